"""Test harness code that every homework's public and hidden tests share."""

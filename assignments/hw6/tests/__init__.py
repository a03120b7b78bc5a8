"""Homework 6's public tests and their harness (hw6_*.py), shared with the hidden tests."""

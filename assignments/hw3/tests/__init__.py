"""Homework 3's public tests and their harness (hw3_*.py), shared with the hidden tests."""

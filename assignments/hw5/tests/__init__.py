"""Homework 5's public tests and their harness (hw5_*.py), shared with the hidden tests."""

"""Homework 2's public tests and their harness (hw2_*.py), shared with the hidden tests."""

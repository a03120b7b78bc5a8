"""Homework 4's public tests and their harness (hw4_*.py), shared with the hidden tests."""

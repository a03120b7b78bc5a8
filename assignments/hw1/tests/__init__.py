"""Homework 1's public tests and their harness (hw1_*.py), shared with the hidden tests."""

"""Homework 3: gradient compression (handout and public tests)."""

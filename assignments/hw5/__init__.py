"""Homework 5: pipeline parallelism."""

"""Homework 1: collectives from send/recv (handout, scripts and public tests)."""

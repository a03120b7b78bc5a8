"""Homework 2: data parallel, gossip and SGP (handout, scripts and public tests)."""

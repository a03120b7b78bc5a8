"""Homework 4: Megatron tensor parallelism (handout, scripts and public tests)."""

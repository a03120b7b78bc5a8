"""Hidden tests of homework 4 (Megatron tensor parallelism); never shipped to students."""

"""Hidden tests of homework 5 (pipeline parallelism); never shipped to students."""

"""Hidden tests of homework 1 (collectives from send/recv); never shipped to students."""

"""Hidden tests of homework 2 (data parallel, gossip, SGP); never shipped to students."""

"""Hidden tests of homework 3 (gradient compression); never shipped to students."""

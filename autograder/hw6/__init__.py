"""Hidden tests of homework 6 (ZeRO-1, ZeRO-2, FSDP); never shipped to students."""

"""The kit's tests of the provided FSDP code (the wrapping policy, parameters left out of every unit); no student code."""

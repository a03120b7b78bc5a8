"""The kit's tests of the provided pipeline code (partitioner, specs, actions, validator); no student code."""

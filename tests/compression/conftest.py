"""Tiny models on one thread, as in tests/models (the same fixture)."""

from tests.models.conftest import single_threaded_torch  # noqa: F401  (autouse)

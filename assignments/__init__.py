"""The homework handouts, scripts and public tests (a package, so that tests import their harness by name)."""

"""Instructor tools: stubs from solutions, overlays, releases (not shipped to students)."""

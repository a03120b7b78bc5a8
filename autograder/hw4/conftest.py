"""pytest setup of homework 4's hidden tests: they share the public tests' harness.

The harness (assignments/hw4/tests/hw4_*.py, and assignments/common/rank_runs.py that every
homework shares) ships with the public tests; put its folders on sys.path so that both suites
import the same modules.
"""

import os
import sys

ASSIGNMENTS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                           "assignments")
for folder in (os.path.join(ASSIGNMENTS, "common"), os.path.join(ASSIGNMENTS, "hw4", "tests")):
    if folder not in sys.path:
        sys.path.insert(0, folder)

import rank_runs  # noqa: E402


def pytest_collection_finish(session):
    rank_runs.select_tasks(session.items)

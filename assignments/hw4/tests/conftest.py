"""pytest setup of homework 4's public tests: a suite runs the cases of the selected tasks only.

The harness shared by every homework (assignments/common/rank_runs.py) goes on sys.path first.
"""

import os
import sys

COMMON_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "common")
if COMMON_DIR not in sys.path:
    sys.path.insert(0, COMMON_DIR)

import rank_runs  # noqa: E402


def pytest_collection_finish(session):
    rank_runs.select_tasks(session.items)

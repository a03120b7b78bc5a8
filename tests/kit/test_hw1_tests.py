"""Homework 1's public and hidden tests, tested: each is a graded unit the autograder can read
(a task marker and points), and `pytest` at the repo root never collects them (testpaths = tests;
the working tree holds the stubs). That they pass on the solutions and fail on the stubs is
checked by grading both (tests/kit/test_autograder.py).
"""

import json
import os
import subprocess
import sys
import tomllib

import pytest

from tools.overlay import ROOT, homework_manifest

MANIFEST = homework_manifest("hw1")
SUITES = [MANIFEST["hidden_tests"], MANIFEST["public_tests"]]          # autograder/hw1, assignments/hw1/tests
TASKS = {f"task{k.replace('.', '_')}" for k in MANIFEST["tasks"]}


def suite_files():
    return [os.path.join(d, f) for d in SUITES for f in sorted(os.listdir(os.path.join(ROOT, d)))
            if f.endswith(".py")]


# -- fast: layout and what the grader collects --------------------------------------------------
def test_root_pytest_does_not_collect_homework_tests():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        testpaths = tomllib.load(f)["tool"]["pytest"]["ini_options"]["testpaths"]
    assert testpaths == ["tests"], "the homework suites must run only under an overlay (they fail on stubs)"
    assert not any(d.startswith("tests/") for d in SUITES)


def test_files_are_short_and_public_ones_need_no_hidden_code():
    for rel in suite_files():
        with open(os.path.join(ROOT, rel)) as f:
            text = f.read()
        assert text.count("\n") < 300, f"{rel} has {text.count(chr(10))} lines; split it"
        if rel.startswith(MANIFEST["public_tests"]):
            assert "from autograder" not in text and "import autograder" not in text, f"{rel} imports hidden code"


@pytest.mark.parametrize("suite", SUITES)
def test_every_test_function_is_a_graded_unit(tmp_path, suite):
    """Collected as the grader does (its plugin): each case has points and exactly one HW1 task."""
    listing = tmp_path / "collect.jsonl"
    env = {**os.environ, "AUTOGRADER_COLLECT": str(listing)}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "autograder.plugin", "-p", "no:cacheprovider",
                           "--collect-only", "-q", suite], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    records = [json.loads(line) for line in listing.read_text().splitlines() if line.strip()]
    assert records and all(r["kind"] == "case" for r in records), records[:3]
    for r in records:
        assert r["task"] in TASKS, f"{r['nodeid']}: no task marker"
        assert r["points"] and r["points"] > 0, f"{r['nodeid']}: no points marker"
    functions = {r["function"] for r in records}
    assert {r["task"] for r in records} == TASKS, "every task has tests"
    if suite == MANIFEST["hidden_tests"]:
        assert len(functions) >= 40 and len(records) >= 250

# The suites themselves run against the solutions and the stubs in tests/kit/test_autograder.py
# (test_real_hw1_suites_*), through the grader, the way submissions are graded.

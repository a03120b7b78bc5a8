"""Homework 1's public and hidden tests, tested: they pass on the reference solutions, every one
fails on the stubs (with the stub's one-line message), and each is a graded unit the autograder
can read (a task marker and points).

    python -m pytest tests/kit/test_hw1_tests.py              # fast: collection and layout
    python -m pytest tests/kit/test_hw1_tests.py -m slow      # run the suites under overlays

The suites run in a child pytest inside a kit copy (tools.overlay): the working tree always
holds the stubs, so `pytest` at the repo root never collects them itself (testpaths = tests).
"""

import json
import os
import subprocess
import sys
import time
import tomllib
import xml.etree.ElementTree as ET

import pytest

from tools.overlay import ROOT, homework_manifest, overlay

MANIFEST = homework_manifest("hw1")
SUITES = [MANIFEST["hidden_tests"], MANIFEST["public_tests"]]          # autograder/hw1, assignments/hw1/tests
TASKS = {f"task{k.replace('.', '_')}" for k in MANIFEST["tasks"]}
SLOW_P1024 = "autograder/hw1/test_sim_time.py::test_ring_all_reduce_sim_time_p1024"


def suite_files():
    return [os.path.join(d, f) for d in SUITES for f in sorted(os.listdir(os.path.join(ROOT, d)))
            if f.endswith(".py")]


def run_pytest(root, env, args, junit, timeout=900):
    """Child `python -m pytest ARGS` in `root`; returns ({nodeid: (outcome, message)}, seconds, output)."""
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=", "-q",
                           f"--junitxml={junit}", *args], cwd=root, env=env, capture_output=True, text=True,
                          timeout=timeout)
    seconds = time.monotonic() - start
    cases = {}
    if os.path.exists(junit):
        for case in ET.parse(junit).getroot().iter("testcase"):
            nodeid = f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"
            bad = [c for c in case if c.tag in ("failure", "error", "skipped")]
            cases[nodeid] = (bad[0].tag if bad else "passed", (bad[0].text or "") if bad else "")
    return cases, seconds, proc.stdout[-3000:] + proc.stderr[-3000:]


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


# -- slow: the suites on the solutions and on the stubs ---------------------------------------
@pytest.mark.slow
def test_solutions_pass_every_test(tmp_path):
    """Hidden + public tests on the reference: all pass, in about a minute (without the p=1024 ring)."""
    with overlay("solutions", homework="hw1") as ov:
        cases, seconds, output = run_pytest(ov.root, ov.env(), [*SUITES, "--deselect", SLOW_P1024],
                                            tmp_path / "junit.xml")
    failed = {k: v for k, v in cases.items() if v[0] != "passed"}
    assert len(cases) >= 250, output
    assert not failed, "\n\n".join(f"{k}: {m[:1500]}" for k, (o, m) in list(failed.items())[:5])
    print(f"{len(cases)} tests passed on the solutions in {seconds:.1f} s")


@pytest.mark.slow
def test_stubs_fail_every_test_with_the_stub_message(tmp_path):
    empty = tmp_path / "nothing"
    empty.mkdir()
    with overlay(str(empty), homework="hw1") as ov:                     # every file missing: the stubs
        assert sorted(ov.missing) == sorted(MANIFEST["editable"])
        cases, seconds, output = run_pytest(ov.root, ov.env(), [*SUITES, "--deselect", SLOW_P1024],
                                            tmp_path / "junit.xml")
    assert len(cases) >= 250, output
    passed = [k for k, (o, m) in cases.items() if o != "failure"]
    assert not passed, f"{len(passed)} tests did not fail on the stubs: {passed[:10]}"
    for nodeid, (_, message) in cases.items():
        assert "is not implemented yet" in message and len(message) < 400, f"{nodeid}: {message[:2000]}"
    print(f"{len(cases)} tests failed on the stubs in {seconds:.1f} s")


@pytest.mark.slow
def test_solutions_pass_the_p1024_ring_sim_time(tmp_path):
    """The one long test (a ring all-reduce of 1024 simulated ranks, tens of seconds)."""
    with overlay("solutions", homework="hw1") as ov:
        cases, seconds, output = run_pytest(ov.root, ov.env(), [SLOW_P1024], tmp_path / "junit.xml")
    assert list(cases.values()) == [("passed", "")], output
    print(f"{SLOW_P1024} passed in {seconds:.1f} s")

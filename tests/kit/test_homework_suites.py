"""Every homework's public and hidden tests, tested: each is a graded unit the autograder can read
(a task marker and points), and `pytest` at the repo root never collects them (testpaths = tests;
the working tree holds the stubs). That they pass on the solutions and fail on the stubs is
checked by grading both (tests/kit/test_autograder.py, test_real_suites_*).
"""

import os
import subprocess
import sys
import tomllib

import pytest

from tools.overlay import ROOT, homework_manifest

HOMEWORKS = ["hw1", "hw2", "hw3", "hw4", "hw5", "hw6"]
COMMON = "assignments/common"          # the harness every homework's tests share (it ships with them)
# the hidden suite's least (test functions, cases): a suite that lost tests fails here
MIN_HIDDEN = {"hw1": (40, 250), "hw2": (16, 65), "hw3": (20, 55), "hw4": (11, 39), "hw5": (15, 38), "hw6": (12, 15)}


def suites(hw: str) -> list[str]:
    manifest = homework_manifest(hw)
    return [manifest["hidden_tests"], manifest["public_tests"]]


def suite_files(hw: str) -> list[str]:
    return [os.path.join(d, f) for d in suites(hw) + [COMMON] for f in sorted(os.listdir(os.path.join(ROOT, d)))
            if f.endswith(".py")]


# -- fast: layout and what the grader collects --------------------------------------------------
def test_root_pytest_does_not_collect_homework_tests():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        ini = tomllib.load(f)["tool"]["pytest"]["ini_options"]
    assert ini["testpaths"] == ["tests"], "the homework suites must run only under an overlay (they fail on stubs)"
    for hw in HOMEWORKS:
        assert not any(d.startswith("tests/") for d in suites(hw))
        tasks = homework_manifest(hw)["tasks"]
        declared = {m.split(":")[0] for m in ini["markers"]}
        assert {f"task{k.replace('.', '_')}" for k in tasks} <= declared, f"{hw}: task markers missing in pyproject"


@pytest.mark.parametrize("hw", HOMEWORKS)
def test_files_are_short_and_public_ones_need_no_hidden_code(hw):
    public = homework_manifest(hw)["public_tests"]
    for rel in suite_files(hw):
        with open(os.path.join(ROOT, rel)) as f:
            text = f.read()
        assert text.count("\n") < 300, f"{rel} has {text.count(chr(10))} lines; split it"
        if rel.startswith((public, COMMON)):
            assert "from autograder" not in text and "import autograder" not in text, f"{rel} imports hidden code"


@pytest.mark.slow
def test_harness_imports_by_full_name_from_the_kit_root(tmp_path):
    """Rank functions are pickled by reference: every harness module (not the test files) imports by
    its full name from the kit root alone, and no suite file puts folders on sys.path."""
    modules = []
    for hw in HOMEWORKS:
        for rel in suite_files(hw):
            with open(os.path.join(ROOT, rel)) as f:
                assert "sys.path" not in f.read(), f"{rel} changes sys.path: import the harness by full name"
            name = os.path.basename(rel)
            if not name.startswith(("test_", "conftest")):
                modules.append(rel[:-len(".py")].replace(os.sep, ".").removesuffix(".__init__"))
    code = "import importlib, sys\nsys.path.insert(0, sys.argv[1])\nfor m in sys.argv[2:]: importlib.import_module(m)"
    proc = subprocess.run([sys.executable, "-I", "-c", code, ROOT, *sorted(set(modules))], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "assignments.hw1.tests.hw1_ranks" in modules and "assignments.common.rank_runs" in modules


@pytest.mark.parametrize("hw", HOMEWORKS)
@pytest.mark.slow
def test_every_test_function_is_a_graded_unit(collected, hw):
    """Collected as the grader does (its plugin, autograder.collect): each case has points and a task of the
    homework, and each suite (public, hidden) has tests of every task."""
    manifest = homework_manifest(hw)
    tests, problems = collected(hw)
    assert not problems, problems
    tasks = {f"task{k.replace('.', '_')}" for k in manifest["tasks"]}
    for which, visibility in (("public", "visible"), ("hidden", "after_published")):
        suite = [t for t in tests if t.visibility == visibility]
        for t in suite:
            assert t.points > 0 and not t.notes, f"{t.function}: no points marker ({t.notes})"
            for nodeid, task in t.case_tasks.items():
                assert task in tasks, f"{nodeid}: no {hw} task marker"
        assert {task for t in suite for task in t.case_tasks.values()} == tasks, f"{which}: every task has tests"
        if which == "hidden":
            least_functions, least_cases = MIN_HIDDEN[hw]
            cases = sum(len(t.cases) for t in suite)
            assert len(suite) >= least_functions and cases >= least_cases, (len(suite), cases)
            assert_bound_to_real_processes(suite)


def assert_bound_to_real_processes(suite) -> None:
    """Every hidden test named for sim or mpi (bindings.py) rests on gloo tests that exist, and each of
    its cases' tasks has cases among them."""
    by_name = {t.function.rsplit("::", 1)[-1]: t for t in suite}
    for t in suite:
        name = t.function.rsplit("::", 1)[-1]
        if "on_sim" not in name and "on_mpi" not in name:
            continue
        assert t.bound_to, f"{name} runs on sim or mpi and is bound to no gloo test (bindings.py)"
        assert set(t.bound_to) <= set(by_name), f"{name}: bound to missing {set(t.bound_to) - set(by_name)}"
        for task in set(t.case_tasks.values()):
            assert any(task in by_name[b].case_tasks.values() for b in t.bound_to), f"{name}: nothing of {task}"

# The suites themselves run against the solutions and the stubs in tests/kit/test_autograder.py
# (test_real_suites_*), through the grader, the way submissions are graded.

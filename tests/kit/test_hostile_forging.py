"""Hostile submissions on every homework: the same wrong code with and without the forging attack of
attacks.py (records, checkers and comparison functions forged from its ranks) scores no more.
test_hostile.py has the attacks themselves on homework 1, and the helpers this module uses."""

import os
import re

import pytest

from tests.kit.attacks import attack
from tests.kit.submissions import insert_after_marker, make_submission, run
from tests.kit.test_hostile import SUCCESS, all_outputs, correct_neighbour, sandboxed_processes, uids_of
from tools.overlay import ROOT

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox's user layer needs root (CI runs as root)")]


@pytest.mark.parametrize("homework,task,file,ending,tests", [
    ("hw1", "1.4", "all_reduce.py", "return x", "test_naive_all_reduce(_on_sim|_messages)?"),
    ("hw2", "2.2", "ddp.py", "return", "test_ddp_(matches_single_process_and_overlaps|how_gradients_are_averaged)"),
    ("hw3", "3.3", "error_feedback.py", "raise RuntimeError('wrong on purpose')", ".*"),
    ("hw4", "4.1", "comm.py", "raise RuntimeError('wrong on purpose')", ".*"),
    ("hw5", "5.3", "one_f_one_b.py", "raise RuntimeError('wrong on purpose')",
     "test_(one_f_one_b_matches_one_process|on_mpi|contract_warmup_forwards_is_clamped_to_m)"),
])
def test_forging_scores_no_more_than_the_wrong_code_on_every_homework(tmp_path, homework, task, file, ending, tests):
    """The same wrong code with and without the forging attack: the attack never adds a point. On the
    task's hidden tests of each kind (gloo, sim, mpi, contracts; the other gloo tests of homeworks 1,
    2 and 5 repeat their kind and took 60-70 s of CPU each there; hw2's sim test is left out, as
    selecting it brings in the 12-case gloo test it is bound to, autograder/bindings.py)."""
    hw = homework.upper()
    wrong = make_submission(tmp_path / "wrong", {file: insert_after_marker(task, ending, hw)}, homework=homework)
    forged = make_submission(tmp_path / "forged", {file: insert_after_marker(task, attack("FORGE", ROOT, ending=ending), hw)},
                             homework=homework)
    only = re.escape(task) + rf"\b.*: {tests}$"
    deserved = run(wrong, homework, only=only, jobs=2, suites=None)          # the homework's real suites
    with correct_neighbour(tmp_path) as beside:
        got = run(forged, homework, only=only, jobs=2, suites=None)
        beside.append(got)
    assert deserved["score"] < sum(t["max_score"] for t in deserved["tests"]), "the wrong code must lose points"
    assert got["score"] <= deserved["score"], (got["score"], deserved["score"])
    assert "ATTACK-DONE: FORGE" in all_outputs(got)
    assert not SUCCESS.findall(all_outputs(got))
    assert sandboxed_processes(uids_of(got, deserved)) == []

"""The mutation suite (autograder/mutants): every seeded bug still applies to the solutions, and the
hidden tests catch every one.

The catch check is the cheap form of `python -m autograder.mutants HW`: one grading session per
homework (one zygote, collected once), each bug graded on the hidden tests of its own task only,
one test function at a time, stopping at the first that loses points; the case named in the bug's
caught_by line (written by `python -m autograder.mutants HW --write-hints`) runs alone first. What each bug costs (the
25% rule) needs every test of the task: that is the instructor's table, not CI.
"""

from __future__ import annotations

import glob
import os
import time

import pytest

from autograder.mutants.grading import grade_bug
from autograder.mutants.patches import MUTANTS, PatchError, apply_hunks, load_bugs, make_submission, read_bug
from autograder.session import GradingSession
from tools.overlay import homework_manifest

HOMEWORKS = sorted(os.path.basename(d) for d in glob.glob(os.path.join(MUTANTS, "hw*")) if os.path.isdir(d))
MIN_BUGS = 15


@pytest.mark.parametrize("hw", HOMEWORKS)
def test_bugs_apply_compile_and_cover_every_task(tmp_path, hw):
    bugs = load_bugs(hw)
    assert len(bugs) >= MIN_BUGS, f"{hw} has {len(bugs)} seeded bugs; keep at least {MIN_BUGS}"
    tasks = homework_manifest(hw)["tasks"]
    assert {b.task for b in bugs} == set(tasks), f"{hw}: tasks without a bug: {set(tasks) - {b.task for b in bugs}}"
    for bug in bugs:
        folder = make_submission(bug, str(tmp_path / bug.name))
        for rel in bug.files:
            with open(os.path.join(folder, rel)) as f:
                compile(f.read(), f"{bug.name}:{rel}", "exec")
        assert bug.what and len(bug.what.splitlines()) == 1


def test_a_hunk_that_no_longer_matches_names_the_bug_and_line():
    with pytest.raises(PatchError, match=r"mine\.patch.*hunk at line 7 no longer matches"):
        apply_hunks("a\nb\nc\n", [(7, ["x"], ["y"])], "mine.patch")
    assert apply_hunks("a\nb\na\n", [(3, ["a"], ["z"])], "w") == "a\nb\nz\n"      # the match nearest its line


def test_a_bug_file_without_its_header_is_refused(tmp_path):
    path = tmp_path / "nohead.patch"
    path.write_text("--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n")
    with pytest.raises(PatchError, match="task: N.K"):
        read_bug("hw1", str(path))


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("hw", HOMEWORKS)
def test_hidden_tests_catch_every_bug(hw):
    t0 = time.monotonic()
    missed, broken = [], []
    with GradingSession(hw, quiet=True) as session:
        for bug in load_bugs(hw):
            verdict = grade_bug(session, bug, hidden_only=True, stop_at_first_failure=True, hint_first=True)
            if verdict.error:
                broken.append(f"{bug.name}: {verdict.error}")
            elif not verdict.caught:
                missed.append(f"{bug.name} ({bug.task}: {bug.what})")
    assert not broken, "bug files that no longer apply:\n" + "\n".join(broken)
    assert not missed, (f"the hidden tests of {hw} miss these seeded bugs (python -m autograder.mutants {hw} "
                        f"--bug NAME shows what they lose):\n" + "\n".join(missed))
    print(f"{hw}: every bug caught in {time.monotonic() - t0:.0f} s")

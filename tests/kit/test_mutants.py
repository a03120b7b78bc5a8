"""The mutation suite (autograder/mutants): every seeded bug still applies to the solutions, and the
hidden tests catch every one.

The catch check is the cheap form of `python -m autograder.mutants HW`: two grading sessions per
homework in threads (a zygote each, collected once), sharing the bugs; each bug graded on the hidden tests of its own task only,
one test function at a time, stopping at the first that loses points; the case named in the bug's
caught_by line (written by `python -m autograder.mutants HW --write-hints`) runs alone first. What each bug costs (the
25% rule) needs every test of the task: that is the instructor's table, not CI.
"""

from __future__ import annotations

import glob
import os
import time

import pytest

from autograder.mutants.grading import catch_all
from autograder.mutants.patches import MUTANTS, PatchError, apply_hunks, load_bugs, make_submission, read_bug
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
    """Over 60 s for homeworks 3, 5 and 6: each of 15-40 bugs is graded on its task's hidden tests."""
    t0 = time.monotonic()
    verdicts = catch_all(hw, load_bugs(hw), sessions=2)
    broken = [f"{v.bug.name}: {v.error}" for v in verdicts if v.error]
    missed = [f"{v.bug.name} ({v.bug.task}: {v.bug.what})" for v in verdicts if not v.error and not v.caught]
    assert not broken, "bug files that no longer apply:\n" + "\n".join(broken)
    assert not missed, (f"the hidden tests of {hw} miss these seeded bugs (python -m autograder.mutants {hw} "
                        f"--bug NAME shows what they lose):\n" + "\n".join(missed))
    slowest = sorted(verdicts, key=lambda v: -v.seconds)[:3]
    print(f"{hw}: {len(verdicts)} bugs caught in {time.monotonic() - t0:.0f} s (slowest: "
          + ", ".join(f"{v.bug.name} {v.seconds:.0f} s" for v in slowest) + ")")

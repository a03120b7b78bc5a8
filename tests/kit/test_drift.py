"""Facts that the handouts and the autograder's README state and the kit also holds, checked against
the kit (no processes): a handout's "Seven files" against homework.json's `editable`, its "(task5_1 ..
task5_8)" against the homework's tasks, and the autograder README's table of files against autograder/
(each homework's hidden tests among them). The points tables: tests/kit/test_points.py."""

from __future__ import annotations

import os
import re

import pytest

from tools.overlay import ROOT, homework_manifest

HOMEWORKS = ["hw1", "hw2", "hw3", "hw4", "hw5", "hw6"]
NUMBERS = {w: n for n, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve".split())}
FILES = re.compile(r"\b(" + "|".join(NUMBERS) + r"|\d+) (?:editable )?files\b", re.I)
MARKERS = re.compile(r"\((task\d+_\d+) \.\. (task\d+_\d+)")


def handout(hw: str) -> str:
    with open(os.path.join(ROOT, "assignments", hw, "README.md")) as f:
        return f.read()


def file_counts(text: str) -> list[tuple[str, int]]:
    """[(the phrase, its number)] for every "Six files" / "the 7 files" in `text`."""
    return [(m.group(0), NUMBERS.get(m.group(1).lower()) or int(m.group(1))) for m in FILES.finditer(text)]


def test_file_counts_are_read_as_numbers():
    assert file_counts("Six files, and only these. Edit only the 7 files above.") == [("Six files", 6), ("7 files", 7)]


@pytest.mark.parametrize("hw", HOMEWORKS)
def test_a_handout_counts_and_names_the_files_a_student_edits(hw):
    editable, text = homework_manifest(hw)["editable"], handout(hw)
    counts = file_counts(text)
    assert counts, f"assignments/{hw}/README.md never says how many files a student edits"
    wrong = [phrase for phrase, n in counts if n != len(editable)]
    assert not wrong, (f"assignments/{hw}/README.md says {wrong} where homework.json lists {len(editable)} editable "
                       f"files: fix the handout (or homework.json)")
    missing = [rel for rel in editable if os.path.basename(rel) not in text]
    assert not missing, f"assignments/{hw}/README.md never names {missing}, which the student edits and submits"


@pytest.mark.parametrize("hw", HOMEWORKS)
def test_a_handout_gives_the_markers_of_every_task_bonus_included(hw):
    tasks = sorted(homework_manifest(hw)["tasks"], key=lambda k: [int(x) for x in k.split(".")])
    first, last = (f"task{t.replace('.', '_')}" for t in (tasks[0], tasks[-1]))
    ranges = MARKERS.findall(handout(hw))
    assert ranges, f"assignments/{hw}/README.md does not say which task markers select one task's tests"
    assert all(r == (first, last) for r in ranges), f"assignments/{hw}/README.md gives {ranges}, the tasks run {first} .. {last}"
    text = handout(hw)
    assert all(t in text for t in tasks), [t for t in tasks if t not in text]


def readme_files_table() -> set[str]:
    """The names in the first column of autograder/README.md's "## Files" table."""
    with open(os.path.join(ROOT, "autograder", "README.md")) as f:
        text = f.read()
    table = text[text.index("## Files"):].split("\n\n")[1]
    return {name for row in table.splitlines()[2:] for name in re.findall(r"`([^`]+)`", row.split("|")[1])}


def test_the_autograder_readme_lists_every_module_and_every_homework_s_hidden_tests():
    here = os.path.join(ROOT, "autograder")
    present = {e + "/" if os.path.isdir(os.path.join(here, e)) else e for e in os.listdir(here)
               if e.endswith(".py") and e != "__init__.py"
               or os.path.isdir(os.path.join(here, e)) and os.path.exists(os.path.join(here, e, "__init__.py"))}
    hidden = {os.path.relpath(homework_manifest(hw)["hidden_tests"], "autograder") + "/" for hw in HOMEWORKS}
    listed = readme_files_table()
    assert hidden <= present, f"hidden test folders missing from autograder/: {sorted(hidden - present)}"
    assert present <= listed, f"autograder/README.md's Files table does not name {sorted(present - listed)}"
    assert listed <= present, f"autograder/README.md's Files table names what is gone: {sorted(listed - present)}"

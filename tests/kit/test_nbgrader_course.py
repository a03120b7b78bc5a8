"""tools.nbgrader_course: an nbgrader course for homework 4's notebook, three students collected into
submitted/ (a correct one, one whose package is only partly written, a broken one), autograded
each against their own package files, exported to a CSV: the round trip an instructor runs, with no
PATH set by hand and no checksum warning.
"""

from __future__ import annotations

import os
import shutil

import pytest

pytest.importorskip("nbgrader")

from tools import nbgrader_course as nc  # noqa: E402
from tools.overlay import ROOT, homework_manifest  # noqa: E402

pytestmark = [pytest.mark.notebook, pytest.mark.slow]
HW = "hw4"
FULL = 17.0                     # homework 4 notebook: part A 7 + part B 6 + part C 4


def _submit(course: str, student: str, notebook: str, files: dict[str, str]) -> None:
    folder = os.path.join(course, "submitted", student, HW)
    os.makedirs(folder)
    shutil.copy(notebook, os.path.join(folder, os.path.basename(nc.notebook_of(HW))))
    for name, text in files.items():
        with open(os.path.join(folder, name), "w") as f:
            f.write(text)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = str(tmp_path_factory.mktemp("course"))
    env_path = os.environ.get("PATH", "")
    nc.setup(course, [HW])
    assert os.environ.get("PATH", "") == env_path                  # nothing set by hand, nothing left set
    released = os.path.join(course, "release", HW, os.path.basename(nc.notebook_of(HW)))
    answers = os.path.join(ROOT, nc.notebook_of(HW))
    editable = homework_manifest(HW)["editable"]
    reference = {os.path.basename(rel): open(os.path.join(ROOT, "solutions", rel)).read() for rel in editable}
    _submit(course, "correct", answers, reference)
    partial = {name: text for name, text in reference.items() if name in ("comm.py", "linear.py")}
    _submit(course, "partial", answers, partial)
    _submit(course, "broken", released, {"comm.py": "def broken(:\n"})
    logs = []
    laid = nc.autograde(course, HW, log=logs.append)
    grades = nc.read_grades(nc.export(course))
    return course, laid, grades, logs


def test_each_student_is_graded_on_their_own_package(graded):
    course, laid, grades, logs = graded
    assert sorted(laid) == ["broken", "correct", "partial"]
    assert len(laid["correct"]) == len(homework_manifest(HW)["editable"])
    assert grades[(HW, "correct")] == FULL, grades
    assert 0 < grades[(HW, "partial")] < FULL, grades                # part A, not the parts needing blocks
    assert grades[(HW, "broken")] == 0, grades
    assert any("partial: 2 of" in line and "the stubs run" in line for line in logs), logs


def test_no_checksum_warning_and_feedback_can_be_generated(graded):
    course, _, _, logs = graded
    text = "\n".join(logs)
    assert "autograde" in text.lower() and "checksum" not in text.lower(), text[-3000:]
    nc.nbgrader(course, ["generate_feedback", HW, "--force"])
    for student in ("correct", "partial", "broken"):
        assert os.path.isdir(os.path.join(course, "feedback", student, HW)), student

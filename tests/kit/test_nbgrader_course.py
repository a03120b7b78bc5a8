"""tools.nbgrader_course: homework 4's notebook through nbgrader's own round trip, every step one of
nbgrader's commands: generate_assignment and release_assignment to a temporary exchange; three
students (a correct one, one whose package is only partly written, a broken one), each with their own
HOME and nbgrader_config.py, fetch_assignment, answer the fetched notebook, add their package files
and submit (the correct one does it as the student README's hand-in section says, command for
command, in a copy of the kit holding their code: its nbgrader_config.py, fetch, cp, submit, feedback); the instructor collects, autogrades each against the student's own package files,
generates and releases feedback, which each student fetches; the grades are exported to a CSV. No PATH
set by hand and no checksum warning.

Every homework's notebook goes through the exchange in test_notebooks.py too (its per-homework courses:
release_assignment, fetch, submit, collect, the course's autograde, feedback, export; the steps other
than generate_assignment and autograde in-process, tests/kit/nbgrader_exchange.py): an answered notebook
handed in with its package files at full points (homework 3's too, which runs on homework 2's reference
BucketedDDP, homework.json builds_on: without it, part B on fails, 6 of 17), a blank one at zero. Here
the same steps run as commands, as students and the README run them, for homework 4.
"""

from __future__ import annotations

import os
import re
import subprocess

import pytest

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbgrader")

from tests.kit.nbgrader_exchange import reference_files, source_answers  # noqa: E402
from tests.kit.test_doc_commands import commands  # noqa: E402
from tools import nbgrader_course as nc  # noqa: E402
from tools.overlay import ROOT, copy_kit, homework_manifest  # noqa: E402
from tools.student_readme import student_readme  # noqa: E402

pytestmark = [pytest.mark.notebook, pytest.mark.slow]
HW = "hw4"
FULL = 17.0                     # homework 4 notebook: part A 7 + part B 6 + part C 4
NOTEBOOK = os.path.basename(nc.notebook_of(HW))
STUDENT_CONFIG = """c = get_config()
c.CourseDirectory.course_id = {course!r}
c.CourseDirectory.student_id = {student!r}
c.Exchange.root = {exchange!r}
c.Exchange.assignment_dir = {home!r}
c.Exchange.cache = {cache!r}
"""


class Student:
    """A student's own HOME and nbgrader config, running nbgrader's student commands there."""

    def __init__(self, base: str, name: str, exchange: str):
        self.name, self.home = name, os.path.join(base, "students", name)
        os.makedirs(self.home)
        with open(os.path.join(self.home, "nbgrader_config.py"), "w") as f:
            f.write(STUDENT_CONFIG.format(course=nc.COURSE_ID, student=name, exchange=exchange, home=self.home,
                                          cache=os.path.join(self.home, ".nbgrader_cache")))

    def nbgrader(self, *args: str) -> str:
        env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER_")}
        env["HOME"] = self.home
        return nc.nbgrader(self.home, list(args), env, timeout=300)

    def folder(self, hw: str = HW) -> str:
        return os.path.join(self.home, hw)

    def answer(self, answers: dict[str, str], files: dict[str, str], hw: str = HW) -> None:
        """Write `answers` {grade id: code} into the fetched notebook's solution cells; add package files."""
        path = os.path.join(self.folder(hw), os.path.basename(nc.notebook_of(hw)))
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
            if cell.metadata.get("nbgrader", {}).get("solution") and grade_id in answers:
                cell.source = answers[grade_id]
        nbformat.write(nb, path)
        for name, text in files.items():
            with open(os.path.join(self.folder(hw), name), "w") as f:
                f.write(text)


def readme_handin(hw: str) -> tuple[str, list[str]]:
    """(the nbgrader_config.py, the nbgrader and cp command lines of `hw`) as the student README gives them."""
    text = student_readme([hw])
    config = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    return config, [cmd for cmd in commands(text) if "nbgrader " in cmd and cmd.endswith(f" {hw}")
                    or cmd.startswith("cp ") and cmd.endswith(f" handin/{hw}/")]


class ReadmeStudent(Student):
    """A student who does what the student README says: its nbgrader_config.py (the exchange and the id
    filled in) in their kit folder, which holds their code and .venv, and its hand-in lines run there by
    bash, as written."""

    def __init__(self, base: str, name: str, exchange: str):
        self.name, self.home, self.kit = name, os.path.join(base, "students", name), os.path.join(base, "kit-" + name)
        os.makedirs(self.home)
        copy_kit(self.kit)                          # with its .venv (a link)
        for rel in homework_manifest(HW)["editable"]:
            with open(os.path.join(ROOT, "solutions", rel)) as src, open(os.path.join(self.kit, rel), "w") as dst:
                dst.write(src.read())
        config, _ = readme_handin(HW)
        filled = config.replace('"/srv/nbgrader/exchange"', repr(exchange)).replace('"your-student-id"', repr(name))
        assert filled.count(repr(exchange)) == 1 and filled.count(repr(name)) == 1, config
        with open(os.path.join(self.kit, "nbgrader_config.py"), "w") as f:
            f.write(filled)

    def folder(self, hw: str = HW) -> str:
        return os.path.join(self.kit, "handin", hw)

    def nbgrader(self, *args: str) -> str:
        return self.run(f".venv/bin/python -m nbgrader {' '.join(args)}")

    def run(self, command: str) -> str:
        env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER_")}
        done = subprocess.run(["bash", "-c", command], cwd=self.kit, env=dict(env, HOME=self.home),
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"the README's {command!r} failed:\n{done.stdout}{done.stderr}"
        return done.stdout + done.stderr

    def hand_in(self, hw: str, answers: dict[str, str]) -> list[str]:
        """The README's lines for `hw`: fetch, answer the fetched notebook, then cp and submit."""
        _, lines = readme_handin(hw)
        assert [line.split()[0] if line.startswith("cp ") else line.split()[3] for line in lines] == \
            ["fetch_assignment", "cp", "submit", "fetch_feedback"], lines
        logs = [self.run(lines[0])]
        self.answer(answers, {}, hw)
        return logs + [self.run(line) for line in lines[1:3]]

    def fetch_feedback(self, hw: str) -> str:
        return self.run(readme_handin(hw)[1][3])


def instructor_answers(hw: str = HW) -> dict[str, str]:
    """{grade id: code} of each solution cell of the source notebook, its solution markers dropped."""
    return source_answers(os.path.join(ROOT, nc.notebook_of(hw)))


@pytest.fixture(scope="module")
def round_trip(tmp_path_factory):
    """The whole course loop once for the module (about 60 s on 2 cores, hence shared by its tests):
    the homework released, fetched by students through the exchange, submitted, collected and
    autograded, feedback generated and fetched."""
    base = str(tmp_path_factory.mktemp("nbgrader"))
    course, exchange = os.path.join(base, "course"), os.path.join(base, "exchange")
    env_path = os.environ.get("PATH", "")
    nc.setup(course, [HW], exchange=exchange)                       # generate_assignment, release_assignment
    assert os.environ.get("PATH", "") == env_path                  # nothing set by hand, nothing left set
    reference = reference_files(HW)
    answers = instructor_answers()
    work = {"correct": (answers, reference),
            "partial": (answers, {name: text for name, text in reference.items() if name in ("comm.py", "linear.py")}),
            "broken": ({}, {"comm.py": "def broken(:\n"})}
    students, exchanged, logs = {}, [], []          # exchanged: the logs of the steps through the exchange
    for name, (cells, files) in work.items():
        if name == "correct":                       # as the student README says, command for command
            student = students[name] = ReadmeStudent(base, name, exchange)
            exchanged += student.hand_in(HW, cells)
            continue
        student = students[name] = Student(base, name, exchange)
        exchanged.append(student.nbgrader("fetch_assignment", HW))
        student.answer(cells, files)
        exchanged.append(student.nbgrader("submit", HW))
    exchanged.append(nc.collect(course, HW, check_owner=False))     # every student is this one user here
    laid = nc.autograde(course, HW, log=logs.append)
    logs.append(nc.nbgrader(course, ["generate_feedback", HW, "--force"]))
    exchanged.append(nc.nbgrader(course, ["release_feedback", HW]))
    for student in students.values():
        exchanged.append(student.fetch_feedback(HW) if isinstance(student, ReadmeStudent)
                         else student.nbgrader("fetch_feedback", HW))
    grades = nc.read_grades(nc.export(course))
    return dict(course=course, exchange=exchange, students=students, laid=laid, grades=grades,
                logs=exchanged + logs, exchanged=exchanged, answers=answers)


def test_students_fetch_the_released_notebook_without_answers(round_trip):
    """Near or over 60 s: its setup is the whole round trip (round_trip: every step one of nbgrader's
    commands, each a fresh Python; 50-60 s in CI)."""
    outbound = os.path.join(round_trip["exchange"], nc.COURSE_ID, "outbound", HW, NOTEBOOK)
    assert os.path.exists(outbound), "release_assignment put nothing in the exchange"
    fetched = nbformat.read(outbound, as_version=4)
    text = "\n".join(cell.source for cell in fetched.cells)
    assert "BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text
    assert any(answer.strip() and answer.strip() not in text for answer in round_trip["answers"].values())
    inbound = os.listdir(os.path.join(round_trip["exchange"], nc.COURSE_ID, "inbound"))
    assert sorted(entry.split("+")[:2] for entry in inbound) == [["broken", HW], ["correct", HW],
                                                                  ["partial", HW]], inbound
    warned = [log for log in round_trip["exchanged"] if "WARNING" in log or "ERROR" in log]
    assert warned == [], warned
    collected = os.path.join(round_trip["course"], "submitted", "partial", HW)
    assert sorted(os.listdir(collected)) == sorted([NOTEBOOK, "comm.py", "linear.py", "timestamp.txt",
                                                    "submission_secret.txt"])


def test_each_student_is_graded_on_their_own_package(round_trip):
    laid, grades, logs = round_trip["laid"], round_trip["grades"], round_trip["logs"]
    assert sorted(laid) == ["broken", "correct", "partial"]
    assert len(laid["correct"]) == len(homework_manifest(HW)["editable"])
    assert grades[(HW, "correct")] == FULL, grades
    assert 0 < grades[(HW, "partial")] < FULL, grades                # part A, not the parts needing blocks
    assert grades[(HW, "broken")] == 0, grades
    assert any("partial: 2 of" in line and "the stubs run" in line for line in logs), logs


def test_no_checksum_warning_and_every_student_fetches_feedback(round_trip):
    text = "\n".join(round_trip["logs"])
    assert "autograde" in text.lower() and "checksum" not in text.lower(), text[-3000:]
    for student in round_trip["students"].values():
        assert os.path.isdir(os.path.join(round_trip["course"], "feedback", student.name, HW)), student.name
        fetched = [name for _, _, names in os.walk(os.path.join(student.folder(), "feedback")) for name in names]
        assert f"{os.path.splitext(NOTEBOOK)[0]}.html" in fetched, (student.name, fetched)

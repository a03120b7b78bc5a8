"""nbgrader's exchange steps run in this process: the same classes its commands run (the exchange's
ReleaseAssignment, FetchAssignment, Submit, Collect, ReleaseFeedback, FetchFeedback; GenerateFeedback;
the CSV export plugin), configured as tools.nbgrader_course's course and a student's
nbgrader_config.py configure them, without starting a Python and importing nbgrader for each step
(about 2 s of CPU a command, 12 commands a homework). test_nbgrader_course.py runs the same steps
as commands, from the student README, for homeworks 3 and 4; test_notebooks.py runs these for every
homework's course, between generate_assignment and its autogrades (which stay commands: each needs
its own package on PYTHONPATH).

    ex = Exchange(course, exchange)
    ex.release("hw1"); ex.student("ann", home).fetch("hw1") ... .submit("hw1"); ex.collect("hw1")
    ex.feedback("hw1", ["ann"]); grades = ex.export()

grade_course: one homework's course of test_notebooks.py, every step from generate_assignment to the
export (the autogrades and generate_assignment as commands, the rest here).
"""

from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass, field

import nbformat
from nbgrader.api import Gradebook
from nbgrader.apps.api import NbGraderAPI
from nbgrader.auth import Authenticator
from nbgrader.coursedir import CourseDirectory
from nbgrader.exchange import ExchangeFactory
from nbgrader.plugins import CsvExportPlugin
from nbgrader.utils import capture_log
from traitlets.config import Config

from tests.kit.conftest import notebook_env
from tools import nbgrader_course
from tools.nbgrader_course import CONFIG, COURSE_ID
from tools.overlay import ROOT, homework_manifest

# nbgrader's apps log through shared loggers and a step changes its CourseDirectory's assignment:
# one step at a time in this process (the courses of test_notebooks grade in two threads).
LOCK = threading.Lock()
MARKER = re.compile(r"^\s*### (BEGIN|END) SOLUTION\s*$")


BENIGN = re.compile(r"^\[WARNING\] Alternative text is missing on \d+ image\(s\)\.$")   # nbconvert, on a figure


def checked(result: dict, what: str) -> str:
    """The log of a capture_log result; AssertionError with the traceback when the step failed or warned."""
    log = result.get("log", "")
    assert result.get("success"), f"{what} failed:\n{result.get('error', '')}\n{log}"
    warned = [line for line in log.splitlines() if line.startswith(("[WARNING]", "[ERROR]", "[CRITICAL]"))
              and not BENIGN.match(line)]
    assert warned == [], f"{what} warned:\n{log}"
    return log


class Student:
    """A student's side of the exchange: their own id, assignment folder and cache (their nbgrader_config.py)."""

    def __init__(self, exchange: str, name: str, home: str):
        self.name, self.home = name, home
        os.makedirs(home, exist_ok=True)
        self.config = Config()
        self.config.CourseDirectory.course_id = COURSE_ID
        self.config.CourseDirectory.student_id = name
        self.config.Exchange.root = exchange
        self.config.Exchange.assignment_dir = home
        self.config.Exchange.cache = os.path.join(home, ".nbgrader_cache")

    def folder(self, hw: str) -> str:
        return os.path.join(self.home, hw)

    def _step(self, kind: str, hw: str) -> str:
        with LOCK:
            coursedir = CourseDirectory(config=self.config)
            coursedir.assignment_id = hw
            app = getattr(ExchangeFactory(config=self.config), kind)(
                coursedir=coursedir, authenticator=Authenticator(config=self.config), config=self.config)
            return checked(capture_log(app), f"{self.name}: {kind} {hw}")

    def fetch(self, hw: str) -> str:
        return self._step("FetchAssignment", hw)

    def submit(self, hw: str) -> str:
        return self._step("Submit", hw)

    def fetch_feedback(self, hw: str) -> str:
        return self._step("FetchFeedback", hw)


class Exchange:
    """The instructor's side: the course folder (its gradebook) and the exchange it releases to."""

    def __init__(self, course: str, exchange: str):
        self.course, self.exchange = course, exchange
        os.makedirs(exchange, exist_ok=True)
        os.chmod(exchange, 0o777)            # as nbgrader wants its exchange: writable by every student
        self.config = Config()
        self.config.CourseDirectory.root = course
        self.config.CourseDirectory.course_id = COURSE_ID
        self.config.CourseDirectory.db_url = f"sqlite:///{course}/gradebook.db"
        self.config.Exchange.root = exchange
        self.config.ExchangeCollect.check_owner = False        # every student is this one user here
        self.config.NbGraderAPI.log_level = "WARN"
        with LOCK:
            self.api = NbGraderAPI(config=self.config)

    def student(self, name: str, home: str) -> Student:
        return Student(self.exchange, name, home)

    def release(self, hw: str) -> str:
        with LOCK:
            return checked(self.api.release_assignment(hw), f"release_assignment {hw}")

    def collect(self, hw: str) -> str:
        with LOCK:
            return checked(self.api.collect(hw), f"collect {hw}")

    def feedback(self, hw: str, students: list[str]) -> list[str]:
        """generate_feedback and release_feedback of each student."""
        logs = []
        with LOCK:
            for name in students:
                logs.append(checked(self.api.generate_feedback(hw, name), f"generate_feedback {hw} {name}"))
                coursedir = CourseDirectory(config=self.config)      # not api.release_feedback: it misspells
                coursedir.assignment_id, coursedir.student_id = hw, name   # a keyword (traitlets warns)
                app = ExchangeFactory(config=self.config).ReleaseFeedback(
                    coursedir=coursedir, authenticator=Authenticator(config=self.config), config=self.config)
                logs.append(checked(capture_log(app), f"release_feedback {hw} {name}"))
        return logs

    def export(self) -> dict[tuple[str, str], float]:
        """nbgrader's CSV export of the gradebook, read back: {(assignment, student): score}."""
        out = os.path.join(self.course, "grades.csv")
        with LOCK, Gradebook(self.config.CourseDirectory.db_url) as gradebook:
            CsvExportPlugin(to=out).export(gradebook)
        with open(out, newline="") as f:
            return {(row["assignment"], row["student_id"]): float(row["score"] or 0) for row in csv.DictReader(f)}


# -- a homework's course in test_notebooks ------------------------------------------------------
# ipykernel 7.4's own shutdown race (its control handler flushes stderr after the iopub pipe closed;
# ipykernel#1518 fixed a sibling path): logged by the kernel after the notebook ran, not an error of it
KERNEL_SHUTDOWN_RACE = re.compile(
    r"ERROR:tornado\.general:Uncaught exception in ZMQStream callback\nTraceback \(most recent call last\):\n"
    r"(?:  .*\n)*?  .*ipykernel/kernelbase\.py.*process_control\n(?:  .*\n)*"
    r"zmq\.error\.ZMQError: Socket operation on non-socket\n")


def run_nbgrader(course: str, args: list[str], env: dict, timeout: float = 150) -> str:
    cmd = [sys.executable, "-m", "nbgrader", *args]
    done = subprocess.run(cmd, cwd=course, env=notebook_env(env), capture_output=True, text=True, timeout=timeout)
    log = done.stdout + done.stderr
    errors = "ERROR" in KERNEL_SHUTDOWN_RACE.sub("", log)
    assert done.returncode == 0 and not errors, f"{' '.join(args)} failed:\n{log[-4000:]}"
    return log


@dataclass(frozen=True)
class Course:
    """A temporary nbgrader course directory where generate_assignment has released one homework."""

    root: str
    hw: object                 # test_notebooks.Homework

    def released(self) -> str:
        return os.path.join(self.root, "release", self.hw.assignment, f"{self.hw.notebook}.ipynb")

    def grades(self, student: str) -> dict[str, float]:
        """{grade cell: score} of a student's autograded notebook, from the gradebook."""
        from nbgrader.api import Gradebook
        with Gradebook(f"sqlite:///{self.root}/gradebook.db") as gb:
            notebook = gb.find_submission_notebook(self.hw.notebook, self.hw.assignment, student)
            return {grade.name: grade.score for grade in notebook.grades}


def new_course(hw, root: str, exchange: str) -> Course:
    """A course directory at `root` (tools.nbgrader_course's config, releasing to `exchange`) where
    generate_assignment has released homework `hw` (test_notebooks.Homework)."""
    os.makedirs(os.path.join(root, "source", hw.assignment))
    shutil.copy(os.path.join(ROOT, hw.path), os.path.join(root, "source", hw.assignment))
    with open(os.path.join(root, "nbgrader_config.py"), "w") as f:
        f.write(CONFIG.format(root=root, course=COURSE_ID, exchange=f"c.Exchange.root = {exchange!r}"))
    run_nbgrader(root, ["generate_assignment", hw.assignment, "--force"], dict(os.environ))
    return Course(root, hw)


@dataclass
class GradedCourse:
    """One homework's course after its autogrades; a step that raised keeps its exception."""

    course: Course
    reference: dict | BaseException = None     # the answered notebook on the reference package
    stubs: dict | BaseException = None         # {student: grades}: stub_blank, stub_answers on the stubs
    round_trip: dict | BaseException = None    # exported grades, fetched feedback, inbound submissions
    laid: list | None = None                   # the reference student's handed-in files the autograde laid
    log: list = field(default_factory=list)    # the course autograde's lines for the reference student

    @staticmethod
    def value(got):
        if isinstance(got, BaseException):
            raise got
        return got


STUDENTS = {"reference": True, "stub_blank": False, "stub_answers": True}      # {student: answers the notebook}
OWN_PACKAGE = {"reference"}            # hands in the solutions' package files beside the notebook


def source_answers(path: str) -> dict[str, str]:
    """{grade id: code} of each solution cell of the source notebook at `path`, its solution markers dropped."""
    nb = nbformat.read(path, as_version=4)
    return {cell.metadata.nbgrader["grade_id"]: "\n".join(line for line in cell.source.splitlines()
                                                           if not MARKER.match(line))
            for cell in nb.cells if cell.metadata.get("nbgrader", {}).get("solution")}


def reference_files(hw: str) -> dict[str, str]:
    """{file name: text} of the homework's editable files as solutions/ holds them (flat, as handed in)."""
    return {os.path.basename(rel): open(os.path.join(ROOT, "solutions", rel)).read()
            for rel in homework_manifest(hw)["editable"]}


def hand_in(course: Course, ex: Exchange, base: str) -> dict:
    """release_assignment; each student fetches the notebook, answers it or not, and submits; collect.
    The student who answers it on their own package ("reference") puts its files beside the notebook
    before submitting, as the student README's hand-in section says."""
    hw = course.hw.assignment
    ex.release(hw)
    answers, students = source_answers(os.path.join(ROOT, course.hw.path)), {}
    for name, answered in STUDENTS.items():
        student = students[name] = ex.student(name, os.path.join(base, "students", name))
        student.fetch(hw)
        if answered:
            path = os.path.join(student.folder(hw), f"{course.hw.notebook}.ipynb")
            nb = nbformat.read(path, as_version=4)
            for cell in nb.cells:
                if cell.metadata.get("nbgrader", {}).get("solution"):
                    cell.source = answers[cell.metadata.nbgrader["grade_id"]]
            nbformat.write(nb, path)
        if name in OWN_PACKAGE:
            for file_name, text in reference_files(hw).items():
                with open(os.path.join(student.folder(hw), file_name), "w") as f:
                    f.write(text)
        student.submit(hw)
    ex.collect(hw)
    return students


def grade_course(hw, base: str, stubs_env: dict) -> GradedCourse:
    """Release homework `hw` (test_notebooks.Homework) through nbgrader's exchange to three students,
    who submit the answered notebook (reference, stub_answers) or the blank one (stub_blank); collect;
    autograde reference on the package files it handed in (tools.nbgrader_course.autograde) and the
    stub_* students on the stub package;
    generate, release and fetch the feedback; export the grades."""
    root, exchange = os.path.join(base, "course"), os.path.join(base, "exchange")
    graded = GradedCourse(new_course(hw, root, exchange))
    course, hw = graded.course, graded.course.hw.assignment
    try:
        ex = Exchange(root, exchange)
        students = hand_in(course, ex, base)
    except Exception as exc:  # noqa: BLE001 - raised by every test that reads this course
        graded.reference = graded.stubs = graded.round_trip = exc
        return graded
    try:
        # the course's own autograde (tools.nbgrader_course): a kit copy holding the files this student
        # handed in, and the reference code the homework builds on, as an instructor grades
        graded.laid = nbgrader_course.autograde(root, hw, only=["reference"], log=graded.log.append,
                                                env=notebook_env(dict(os.environ)))["reference"]
        graded.reference = course.grades("reference")
    except Exception as exc:  # noqa: BLE001 - raised by the test that reads it
        graded.reference = exc
    try:
        run_nbgrader(root, ["autograde", hw, "--student", "stub_*", "--force"], stubs_env, timeout=180)
        graded.stubs = {student: course.grades(student) for student in ("stub_blank", "stub_answers")}
    except Exception as exc:  # noqa: BLE001
        graded.stubs = exc
    try:
        ex.feedback(hw, ["reference", "stub_blank"])
        fetched = {}
        for name in ("reference", "stub_blank"):
            students[name].fetch_feedback(hw)
            fetched[name] = [n for _, _, names in os.walk(os.path.join(students[name].folder(hw), "feedback"))
                             for n in names]
        graded.round_trip = {"grades": ex.export(), "feedback": fetched,
                             "inbound": sorted(os.listdir(os.path.join(exchange, COURSE_ID, "inbound")))}
    except Exception as exc:  # noqa: BLE001
        graded.round_trip = exc
    return graded

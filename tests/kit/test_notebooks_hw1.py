"""Homework 1's notebooks: the lecture runs, and nbgrader grades the homework notebook.

    .venv/bin/python -m pytest tests/kit/test_notebooks_hw1.py        # ~2 min on 2 cores

- The committed notebooks are what tools/notebooks_src builds, without outputs.
- lectures/01_collectives.ipynb executes under a real Jupyter kernel with the reference
  collectives laid over the kit (tools.overlay), and draws its figures.
- nbgrader, in a temporary course directory: generate_assignment strips solutions and hidden
  tests; autograde gives the source notebook (answers in place) run on the reference package
  full marks; the released notebook on the stub package zero; and the answered notebook on the
  stub package only the points of the questions that need no package (part A).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbclient")
pytest.importorskip("nbgrader")

from tools.notebooks_src import hw1 as hw1_src  # noqa: E402
from tools.notebooks_src import lecture01 as lecture_src  # noqa: E402
from tools.notebooks_src._nb import render  # noqa: E402
from tools.overlay import ROOT, overlay  # noqa: E402

pytestmark = [pytest.mark.notebook, pytest.mark.slow]

ASSIGNMENT = "hw1"
NOTEBOOK = "hw1_collectives"
PART_A = {"test_predicted_time": 3, "test_crossover": 2, "test_ring_bytes": 2, "test_best_algorithm": 2}
NEEDS_PACKAGE = {"test_measure": 2, "test_measure_fit": 2, "test_sim_times": 2, "test_all_reduce_times": 3}
SECRET_MARKERS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")


def _env(base: dict) -> dict:
    """`base` with this interpreter's bin folder first on PATH (nbgrader runs `alembic` from it)."""
    env = dict(base)
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    env["MINITORCH_DIST_DEADLINE"] = "30"          # a broken run fails in seconds, not minutes
    return env


@pytest.fixture(scope="module")
def reference():
    """A kit copy with the reference HW1 files laid over the stubs."""
    with overlay("solutions", homework=ASSIGNMENT) as ov:
        assert not ov.missing, f"solutions/ lacks {ov.missing}"
        yield ov


@pytest.fixture(scope="module")
def stubs(tmp_path_factory):
    """A kit copy with nothing laid over it: the student's starting point, whatever the working tree holds."""
    empty = tmp_path_factory.mktemp("no-submission")
    with overlay(str(empty), homework=ASSIGNMENT) as ov:
        yield ov


# -- the committed notebooks --------------------------------------------------------------------
@pytest.mark.parametrize("source", [lecture_src, hw1_src], ids=["lecture01", "hw1"])
def test_committed_notebook_matches_its_source(source):
    with open(os.path.join(ROOT, source.PATH), encoding="utf-8") as f:
        committed = f.read()
    assert committed == render(source.notebook()), (
        f"{source.PATH} differs from {source.__name__}; rebuild it: python -m {source.__name__}")
    nb = nbformat.reads(committed, as_version=4)
    assert all(not c.get("outputs") and c.get("execution_count") is None
               for c in nb.cells if c.cell_type == "code"), f"{source.PATH} stores outputs"


# -- the lecture --------------------------------------------------------------------------------
@pytest.mark.timeout(240)
def test_lecture_runs_against_the_reference(reference, no_leftover_processes):
    from nbclient import NotebookClient

    path = os.path.join(reference.root, lecture_src.PATH)
    nb = nbformat.read(path, as_version=4)
    assert "tools.overlay solutions" in nb.cells[0].source, "the first cell should say how to run it"
    client = NotebookClient(nb, timeout=180, kernel_name="python3", allow_errors=False,
                            resources={"metadata": {"path": os.path.dirname(path)}})
    client.execute(env=_env(reference.env()))        # raises CellExecutionError on the first failing cell

    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    figures = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(figures) >= 4, f"expected the lecture's 4 figures, got {len(figures)}"
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    for expected in ("wait-for cycle: 0 -> 1 -> 0", "all results correct", "largest relative gap between sim"):
        assert expected in text, f"the lecture's output lacks {expected!r}"


# -- nbgrader -----------------------------------------------------------------------------------
def _nbgrader(course: str, args: list[str], env: dict, timeout: float = 150) -> str:
    cmd = [sys.executable, "-m", "nbgrader", *args]
    done = subprocess.run(cmd, cwd=course, env=_env(env), capture_output=True, text=True, timeout=timeout)
    log = done.stdout + done.stderr
    assert done.returncode == 0 and "ERROR" not in log, f"{' '.join(args)} failed:\n{log[-4000:]}"
    return log


def _grades(course: str, student: str) -> dict[str, float]:
    """{grade cell: score} of a student's autograded notebook, from the gradebook."""
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
        notebook = gb.find_submission_notebook(NOTEBOOK, ASSIGNMENT, student)
        return {grade.name: grade.score for grade in notebook.grades}


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A course directory where generate_assignment has released hw1."""
    root = str(tmp_path_factory.mktemp("course"))
    os.makedirs(os.path.join(root, "source", ASSIGNMENT))
    shutil.copy(os.path.join(ROOT, hw1_src.PATH), os.path.join(root, "source", ASSIGNMENT))
    with open(os.path.join(root, "nbgrader_config.py"), "w") as f:
        f.write("c = get_config()\n"
                f"c.CourseDirectory.root = {root!r}\n"
                "c.CourseDirectory.course_id = 'minitorch_dist'\n"
                f"c.CourseDirectory.db_url = 'sqlite:///{root}/gradebook.db'\n"
                "c.Execute.timeout = 120\n")
    _nbgrader(root, ["generate_assignment", ASSIGNMENT, "--force"], dict(os.environ))
    return root


def _submit(course: str, student: str, notebook_path: str) -> None:
    folder = os.path.join(course, "submitted", student, ASSIGNMENT)
    os.makedirs(folder, exist_ok=True)
    shutil.copy(notebook_path, os.path.join(folder, f"{NOTEBOOK}.ipynb"))


def _released(course: str) -> str:
    return os.path.join(course, "release", ASSIGNMENT, f"{NOTEBOOK}.ipynb")


def test_release_strips_solutions_and_hidden_tests(course):
    nb = nbformat.read(_released(course), as_version=4)
    text = "\n".join(cell.source for cell in nb.cells)
    assert not [m for m in SECRET_MARKERS if m in text]
    solution_cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")]
    assert len(solution_cells) == 7
    assert all("raise NotImplementedError()" in c.source for c in solution_cells)
    points = {c.metadata.nbgrader["grade_id"]: c.metadata.nbgrader["points"]
              for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")}
    assert points == {**PART_A, **NEEDS_PACKAGE}


@pytest.mark.timeout(200)
def test_autograde_reference_answers_on_reference_package_full_marks(course, reference):
    _submit(course, "reference", os.path.join(ROOT, hw1_src.PATH))
    _nbgrader(course, ["autograde", ASSIGNMENT, "--student", "reference", "--force"], reference.env())
    grades = _grades(course, "reference")
    assert grades == {**PART_A, **NEEDS_PACKAGE}, f"not full marks: {grades}"


@pytest.fixture(scope="module")
def stub_grades(course, stubs):
    """Grades of two submissions autograded on the stub package (one nbgrader run)."""
    _submit(course, "stub_blank", _released(course))                      # the released notebook
    _submit(course, "stub_answers", os.path.join(ROOT, hw1_src.PATH))     # every answer in place
    _nbgrader(course, ["autograde", ASSIGNMENT, "--student", "stub_*", "--force"], stubs.env(), timeout=180)
    return {student: _grades(course, student) for student in ("stub_blank", "stub_answers")}


@pytest.mark.timeout(240)
def test_autograde_released_notebook_on_stubs_scores_zero(stub_grades):
    grades = stub_grades["stub_blank"]
    assert set(grades) == set(PART_A) | set(NEEDS_PACKAGE)
    assert sum(grades.values()) == 0, f"a blank notebook scored: {grades}"


@pytest.mark.timeout(240)
def test_autograde_answers_on_stubs_score_only_part_a(stub_grades):
    """Answers in place but the package still stubbed: parts B and C need the package, so they score 0."""
    grades = stub_grades["stub_answers"]
    assert grades == {**PART_A, **{name: 0 for name in NEEDS_PACKAGE}}, grades

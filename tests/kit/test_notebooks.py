"""The course's notebooks: the lectures run, and nbgrader grades each homework notebook.

    .venv/bin/python -m pytest tests/kit/test_notebooks.py              # every lecture and homework, two at a time
    .venv/bin/python -m pytest tests/kit/test_notebooks.py -k "hw4 or hw6"         # two homeworks (55 s on 2 cores)
    .venv/bin/python -m pytest tests/kit/test_notebooks.py -k lecture              # the lectures only

Every homework in HOMEWORKS and every lecture in LECTURES gets the same checks:

- The committed notebooks are what tools.notebooks builds from their percent files, without outputs.
- Each lecture executes under a real Jupyter kernel with the reference implementation laid over
  the kit (tools.overlay), prints what it should and draws its figures.
- nbgrader, in a temporary course directory per homework (tests/kit/nbgrader_exchange.py):
  generate_assignment strips solutions and hidden tests; release_assignment puts the notebook in an
  exchange, three students fetch it, answer it or not and submit, the course collects; the course's
  autograde (tools.nbgrader_course) gives the answered notebook, handed in with the solutions'
  package files beside it, full marks on those files; the blank notebook on the
  stub package zero; and the answered notebook on the stub package only the points of the questions
  that need no package (part A); feedback is generated, released and fetched; the exported grades
  say the same.
- What students receive (lectures, released notebooks, handouts) holds no solution marker and no
  line of a reference solution (the release's leak scan would refuse it).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbclient")
pytest.importorskip("nbgrader")

from tests.kit.nbgrader_exchange import STUDENTS, GradedCourse, grade_course  # noqa: E402
from tools.notebooks import build, notebooks, render, source_of  # noqa: E402
from tools.overlay import ROOT, homework_manifest  # noqa: E402
from tools.release import leaks_in_text, readable_text  # noqa: E402
from tests.kit.conftest import CONCURRENT_NOTEBOOKS  # noqa: E402

pytestmark = [pytest.mark.notebook, pytest.mark.slow]


@dataclass(frozen=True)
class Homework:
    """What the tests know about one homework notebook."""

    path: str                           # the notebook, relative to the kit (homework.json "notebook")
    no_package: dict[str, float]        # graded cells that need no package: {grade id: points}
    needs_package: dict[str, float]     # graded cells that run the student's package
    solution_cells: int
    handout: str                        # the README students read

    @property
    def assignment(self) -> str:
        return os.path.basename(os.path.dirname(self.path))

    @property
    def notebook(self) -> str:
        return os.path.splitext(os.path.basename(self.path))[0]

    @property
    def points(self) -> dict[str, float]:
        return {**self.no_package, **self.needs_package}


@dataclass(frozen=True)
class Lecture:
    """A lecture notebook, the lines its run must print and how many figures it draws."""

    path: str
    expected: tuple[str, ...]
    figures: int


NOTEBOOKS = notebooks()
HOMEWORKS = {
    "hw1": Homework(
        path=NOTEBOOKS["hw1"],
        no_package={"test_predicted_time": 3, "test_crossover": 2, "test_ring_bytes": 2, "test_best_algorithm": 2},
        needs_package={"test_measure": 2, "test_measure_fit": 2, "test_sim_times": 2, "test_all_reduce_times": 3},
        solution_cells=7, handout="assignments/hw1/README.md"),
    "hw2": Homework(
        path=NOTEBOOKS["hw2"],
        no_package={"test_bytes_per_step": 2, "test_count_buckets": 2, "test_mixing_matrix": 2,
                    "test_gossip_cheaper": 2},
        needs_package={"test_throughput": 2, "test_bucket_sweep": 3, "test_push_sum": 2, "test_stragglers": 3,
                       "test_gossip_wins": 1},
        solution_cells=9, handout="assignments/hw2/README.md"),
    "hw3": Homework(
        path=NOTEBOOKS["hw3"],
        no_package={"test_powersgd_elements": 2, "test_gather_limit": 2, "test_break_even": 2},
        needs_package={"test_ratio_sweep": 3, "test_rank_sweep": 3, "test_error_feedback": 2, "test_step_times": 2,
                       "test_pays_off": 1},
        solution_cells=8, handout="assignments/hw3/README.md"),
    "hw4": Homework(
        path=NOTEBOOKS["hw4"],
        no_package={"test_tp_vs_dp_bytes": 2, "test_params_per_rank": 2, "test_when_tp_pays": 3},
        needs_package={"test_compare_block": 3, "test_measure_step": 3, "test_sim_times": 3, "test_tp_pays_off": 1},
        solution_cells=7, handout="assignments/hw4/README.md"),
    "hw5": Homework(
        path=NOTEBOOKS["hw5"],
        no_package={"test_bubble": 2, "test_messages": 2, "test_live": 2},
        needs_package={"test_check_gpipe": 3, "test_sim_speedup": 3, "test_peak_memory": 2},
        solution_cells=6, handout="assignments/hw5/README.md"),
    "hw6": Homework(
        path=NOTEBOOKS["hw6"],
        no_package={"test_memory_per_rank": 3, "test_bytes_per_step": 2},
        needs_package={"test_memory_vs_n": 3, "test_traffic_vs_stage": 3},
        solution_cells=4, handout="assignments/hw6/README.md"),
}
LECTURES = {
    "lecture01": Lecture(NOTEBOOKS["lecture01"], figures=4, expected=(
        "wait-for cycle: 0 -> 1 -> 0", "all results correct", "largest relative gap between sim")),
    "lecture02": Lecture(NOTEBOOKS["lecture02"], figures=4, expected=(
        "replicas bitwise equal: True", "10 of 10 all-reduces start before backward ends",
        "after 3 steps: z =  3.50  3.50  3.50  3.50  3.50  3.50  3.50  3.50", "simulated seconds to reach loss")),
    "lecture03": Lecture(NOTEBOOKS["lecture03"], figures=5, expected=(
        "bytes counted by the runtime equal the payload formula for every compressor",
        "signSGD + error feedback: distance to the minimum", "|sum applied + residual - sum of inputs|",
        "over the fast link: dense is fastest", "over the slow link:", "compression beats dense below:")),
    "lecture04": Lecture(NOTEBOOKS["lecture04"], figures=3, expected=(
        "max |partial0 + partial1 - Y|", "TP block equals the dense block on every rank",
        "one all-reduce forward and one backward per MLP: True", "TP / DP")),
    "lecture05": Lecture(NOTEBOOKS["lecture05"], figures=2, expected=(
        "every step time equals (m+p-1)(t_f+t_b)", "1F1B: step 27 ms = (m+p-1)(t_f+t_b) = 27 ms",
        "1F1B keeps at most p - j micro-batches on stage j; GPipe keeps m", "the slowest stage sets the pace")),
    "lecture06": Lecture(NOTEBOOKS["lecture06"], figures=2, expected=(
        "ZeRO memory table (GB): 120.0 31.4 16.6 1.9", "tracker matches the cost model within",
        "FSDP / DDP bytes per step: 1.50")),
}
SECRET_MARKERS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")


# -- the committed notebooks --------------------------------------------------------------------
def test_every_notebook_is_tested():
    assert set(NOTEBOOKS) == set(LECTURES) | set(HOMEWORKS), "a notebook without its checks here, or checks of none"


@pytest.mark.parametrize("name", list(NOTEBOOKS))
def test_committed_notebook_matches_its_source(name):
    rel = NOTEBOOKS[name]
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        committed = f.read()
    assert committed == render(build(rel)), (
        f"{rel} differs from {source_of(rel)}; rebuild it: .venv/bin/python -m tools.notebooks {name}")
    nb = nbformat.reads(committed, as_version=4)
    assert all(not c.get("outputs") and c.get("execution_count") is None
               for c in nb.cells if c.cell_type == "code"), f"{rel} stores outputs"


def test_bad_nbgrader_settings_in_a_percent_file_are_a_clear_error(tmp_path):
    header = '# %% nbgrader={"grade": true, "grade_id": "test_x", "locked": true, "schema_version": 3, "solution": false'
    (tmp_path / "a.py").write_text(header + ', "task": false}\nassert True\n')
    with pytest.raises(ValueError, match=r"a.py, cell 0: graded cell test_x needs points"):
        build("a.ipynb", root=str(tmp_path))
    (tmp_path / "b.py").write_text(header + ', "task": false, "point": 2}\nassert True\n')
    with pytest.raises(ValueError, match=r"unknown nbgrader key\(s\) \['point'\]"):
        build("b.ipynb", root=str(tmp_path))


# -- the lectures -------------------------------------------------------------------------------
@pytest.mark.timeout(600)      # the first of these runs every lecture (the session's executed_lectures)
@pytest.mark.parametrize("name", list(LECTURES))
def test_lecture_runs_against_the_reference(name, executed_lectures):
    """Over 60 s for the first lecture: its setup executes every lecture (executed_lectures, two at a
    time, about 60 s in CI); the others find theirs done."""
    lecture = LECTURES[name]
    rel = lecture.path
    assert rel in executed_lectures.notebooks or rel in executed_lectures.errors, f"{rel} was not found"
    if rel in executed_lectures.errors:     # nbclient's CellExecutionError names the failing cell
        raise executed_lectures.errors[rel]
    assert executed_lectures.leftover == [], f"processes left behind by the lectures: {executed_lectures.leftover}"
    nb = executed_lectures.notebooks[rel]
    first = nb.cells[0].source                 # how a student runs it: no instructor command in their copy
    assert f".venv/bin/jupyter lab {rel}" in first and "tools." not in first, "the first cell should say how to run it"

    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    figures = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(figures) >= lecture.figures, f"expected the lecture's {lecture.figures} figures, got {len(figures)}"
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    for expected in lecture.expected:
        assert expected in text, f"the lecture's output lacks {expected!r}"


# -- nbgrader -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def graded_courses(request, stubs, tmp_path_factory):
    """{homework: Future of its GradedCourse} for the homeworks the selected tests ask for, graded
    CONCURRENT_NOTEBOOKS at a time in the background (each nbgrader run keeps about one core busy)."""
    wanted = [name for name in HOMEWORKS if any(getattr(item, "callspec", None) is not None and
                                                item.callspec.params.get("graded") == name
                                                for item in request.session.items)]
    pool = ThreadPoolExecutor(max_workers=CONCURRENT_NOTEBOOKS)
    futures = {name: pool.submit(grade_course, HOMEWORKS[name], str(tmp_path_factory.mktemp(f"course-{name}")),
                                 stubs.env()) for name in wanted}
    yield futures
    pool.shutdown(wait=True, cancel_futures=True)


@pytest.fixture(params=list(HOMEWORKS))
def graded(request, graded_courses) -> GradedCourse:
    return graded_courses[request.param].result()


@pytest.mark.timeout(600)
def test_release_strips_solutions_and_hidden_tests(graded):
    """Over 60 s for some homeworks: the first test of each homework waits for its course's grading
    (graded_courses: release, three students, two autogrades, feedback, export; 15-75 s in CI)."""
    course = graded.course
    nb = nbformat.read(course.released(), as_version=4)
    text = "\n".join(cell.source for cell in nb.cells)
    assert not [m for m in SECRET_MARKERS if m in text]
    solution_cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")]
    assert len(solution_cells) == course.hw.solution_cells
    assert all("raise NotImplementedError()" in c.source for c in solution_cells)
    points = {c.metadata.nbgrader["grade_id"]: c.metadata.nbgrader["points"]
              for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")}
    assert points == course.hw.points


@pytest.mark.timeout(600)
def test_autograde_reference_answers_on_their_own_handed_in_package_full_marks(graded):
    """The student who answered the notebook handed in the solutions' package files beside it; the
    course's autograde laid every one of them and the reference code the homework builds on (homework 3
    runs on homework 2's BucketedDDP: without it a correct student got 6 of 17), and gave full points."""
    grades = graded.value(graded.reference)
    assert grades == graded.course.hw.points, f"not full marks: {grades}"
    manifest = homework_manifest(graded.course.hw.assignment)
    assert sorted(graded.laid) == sorted(manifest["editable"]), graded.laid
    provided = [rel for files in manifest.get("builds_on", {}).values() for rel in files]
    assert any(line.startswith("reference: ") and all(rel in line for rel in provided) for line in graded.log), (
        f"the earlier homework's reference this one runs on ({provided}) was not laid: {graded.log}")


@pytest.mark.timeout(600)
def test_autograde_released_notebook_on_stubs_scores_zero(graded):
    grades = graded.value(graded.stubs)["stub_blank"]
    assert set(grades) == set(graded.course.hw.points)
    assert sum(grades.values()) == 0, f"a blank notebook scored: {grades}"


@pytest.mark.timeout(600)
def test_the_exchange_round_trip_exports_full_points_and_zero(graded):
    """Through nbgrader's exchange (release_assignment, fetch_assignment, submit, collect, autograde,
    generate_feedback, release_feedback, fetch_feedback, export): the exported grades give the student
    who answered every notebook point and the one who handed in the blank notebook zero."""
    trip, hw = graded.value(graded.round_trip), graded.course.hw
    assert sorted(entry.split("+")[:2] for entry in trip["inbound"]) == sorted([s, hw.assignment] for s in STUDENTS)
    assert trip["grades"][(hw.assignment, "reference")] == sum(hw.points.values()) > 0, trip["grades"]
    assert trip["grades"][(hw.assignment, "stub_blank")] == 0, trip["grades"]
    assert trip["grades"][(hw.assignment, "stub_answers")] == sum(hw.no_package.values()), trip["grades"]
    for student, files in trip["feedback"].items():
        assert f"{hw.notebook}.html" in files, (student, files)


@pytest.mark.timeout(600)
def test_autograde_answers_on_stubs_score_only_part_a(graded):
    """Answers in place but the package still stubbed: the parts that run it score 0."""
    grades = graded.value(graded.stubs)["stub_answers"]
    hw = graded.course.hw
    assert grades == {**hw.no_package, **{name: 0 for name in hw.needs_package}}, grades


# -- what students receive ----------------------------------------------------------------------
def _leaks(path: str) -> list[str]:
    """Solution markers and reference-solution lines found in a file as a reader sees it."""
    return leaks_in_text(readable_text(path))


@pytest.mark.parametrize("name", list(LECTURES))
def test_lecture_holds_no_solution(name):
    """Lectures ship executed, with their percent files: no line of a reference solution may appear in them."""
    for rel in (LECTURES[name].path, source_of(LECTURES[name].path)):
        leaks = _leaks(os.path.join(ROOT, rel))
        assert not leaks, f"{rel} gives away: {leaks[:5]}"


@pytest.mark.timeout(600)
def test_released_notebook_and_handout_hold_no_solution(graded):
    for path in (graded.course.released(), os.path.join(ROOT, graded.course.hw.handout)):
        assert os.path.exists(path), f"{path} is missing"
        leaks = _leaks(path)
        assert not leaks, f"{os.path.basename(path)} gives away: {leaks[:5]}"

"""Every homework's Gradescope upload (tools/gradescope.py) run in Gradescope's folder layout against
four submissions: right (the reference files), partial (one task's file handed in as its stub), empty
(nothing) and hostile (rank code that reads the hidden tests, writes results/results.json itself and
ends its process with os._exit).

Per homework: one zip is built and unpacked into source/; setup.sh runs for real (on a venv that is a
link to the kit's, as in test_gradescope.py) once for all homeworks, as every upload's setup.sh and
requirements.txt are the same bytes (checked). Each submission gets its own layout root
(AUTOGRADER_ROOT) whose source/ is a link to its homework's, its own submission/ and results/, and
run_autograder as Gradescope runs it. The roots are world-readable temporary folders like
/autograder (not pytest's owner-only ones), so the hostile code's reads and writes meet the grader's
own protections. To stay cheap (a grading costs about 4 s of setting up, whatever it grades) each run
grades a few quick tests of two tasks, chosen through run_autograder's AUTOGRADER_ARGS (an
instructor's setting, see tools/gradescope.py), two runs at a time.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import tempfile
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest

from tests.kit.submissions import insert_after_marker
from tools import gradescope
from tools.overlay import ROOT, homework_manifest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]    # the first test waits for every grading


@dataclass(frozen=True)
class Case:
    only: str                  # --only: quick tests of the two tasks below, nothing else
    stubbed: tuple[str, str]   # (task, file name): the partial submission hands this file in as its stub
    hostile: tuple[str, str]   # (task, file name): the hostile code opens every region of this task


CASES = {
    "hw1": Case(r"test_fit_alpha_beta_exact_data|test_broadcast_and_reduce_reject_bad_input",
                ("1.1", "ping_pong.py"), ("1.2", "tree.py")),
    "hw2": Case(r"test_parameter_server$|test_push_sum_step_is_exact", ("2.1", "param_server.py"), ("2.6", "sgp.py")),
    "hw3": Case(r"test_quantize_bad_input$|test_error_feedback_accounting",
                ("3.1", "quantize.py"), ("3.3", "error_feedback.py")),
    "hw4": Case(r"test_column_and_row_parallel_linear$|test_embedding_and_cross_entropy_match_dense",
                ("4.2", "linear.py"), ("4.4", "vocab.py")),             # both run on comm.py (4.1)
    "hw5": Case(r"test_contract_warmup_forwards_is_clamped_to_m|test_contract_gpipe_returns_none_off_the_last_stage",
                ("5.3", "one_f_one_b.py"), ("5.2", "gpipe.py")),
    "hw6": Case(r"test_fsdp_rejects_a_model_without_blocks|test_zero_rejects_an_optimizer_name",
                ("6.3", "fsdp.py"), ("6.1", "zero.py")),
}
KINDS = ("right", "partial", "empty", "hostile")
FORGED = 1000.0

# Rank code, at the start of each region of one task: read the hidden tests (their paths in the upload
# and in the grader's copies, as an attacker who knows the layout would name them), write a results.json
# of its own, then end the rank process at once.
HOSTILE = """import glob as _g, os as _o
for _p in __HIDDEN__ + _g.glob("/tmp/autograder-kit-*/autograder/hw*/*.py"):
    try:
        print("HIDDEN-READ", _p, open(_p).read(), flush=True)
    except OSError as _e:
        print("HIDDEN-REFUSED", _p, type(_e).__name__, flush=True)
try:
    with open(__ROOT__ + "/results/results.json", "w") as _f:
        _f.write('{"score": __FORGED__, "tests": []}')
    print("RESULTS-FORGED", flush=True)
except OSError as _e:
    print("RESULTS-REFUSED", type(_e).__name__, flush=True)
_o._exit(0)
"""


def editable(hw: str) -> dict[str, str]:
    """{file name: kit path} of the homework's editable files."""
    return {os.path.basename(rel): rel for rel in homework_manifest(hw)["editable"]}


def make_submission(hw: str, kind: str, folder: str, root: str, hidden: list[str]) -> None:
    """The submission of `kind`, flat in `folder` (as Gradescope unpacks a zip of the files)."""
    os.makedirs(folder)
    if kind == "empty":
        return
    case, label = CASES[hw], "HW" + hw[2:]
    for name, rel in editable(hw).items():
        text = open(os.path.join(ROOT, "solutions", rel)).read()
        if kind == "partial" and name == case.stubbed[1]:
            text = open(os.path.join(ROOT, rel)).read()               # the kit's file is the stub
            assert "BEGIN YOUR CODE" in text, f"{rel} in the kit is not a stub"
        if kind == "hostile" and name == case.hostile[1]:
            code = HOSTILE.replace("__ROOT__", repr(root)).replace("__FORGED__", repr(FORGED)).replace(
                "__HIDDEN__", repr(hidden))
            text = insert_after_marker(case.hostile[0], code, label)(text)
        with open(os.path.join(folder, name), "w") as f:
            f.write(text)


def hidden_files(source: str, hw: str) -> list[str]:
    return sorted(glob.glob(os.path.join(source, "autograder", hw, "*.py")))


def hidden_lines(source: str, hw: str) -> set[str]:
    """Lines of the homework's hidden test files that a leak of them would show (not short or generic)."""
    lines = set()
    for path in hidden_files(source, hw):
        for line in open(path).read().splitlines():
            line = line.strip()
            if len(line) >= 30 and not line.startswith(("#", "def ", "@", "import ", "from ", '"""')):
                lines.add(line)
    return lines


def unpack(hw: str, base: str, upload: str, setups: dict) -> tuple[str, set[str], list[str]]:
    """The upload of `hw` unpacked into base/source with setup.sh run; (source, hidden lines, hidden files).
    setup.sh and requirements.txt are the same in every homework's upload: the first runs setup.sh, an
    upload whose two files are byte for byte one that ran shares its run (`setups`: their text -> log)."""
    gradescope.build(hw, upload)
    source = os.path.join(base, "source")
    with zipfile.ZipFile(upload) as z:
        z.extractall(source)
        key = (z.read("setup.sh"), z.read("requirements.txt"))
    for name in ("setup.sh", "run_autograder"):
        os.chmod(os.path.join(source, name), 0o755)             # extractall drops the modes, as unzip keeps them
    os.symlink(os.path.join(ROOT, ".venv"), os.path.join(source, ".venv"))
    if key not in setups:
        setup = subprocess.run(["bash", os.path.join(source, "setup.sh")], env=dict(os.environ, AUTOGRADER_ROOT=base),
                               capture_output=True, text=True, timeout=300)
        assert setup.returncode == 0 and "autograder ready" in setup.stdout, setup.stdout + setup.stderr
        setups[key] = setup.stdout
    paths = hidden_files(source, hw)
    assert paths and hidden_lines(source, hw), f"no hidden tests in the upload of {hw}"
    return source, hidden_lines(source, hw), paths


def grade(hw: str, kind: str, base: str, source: str, paths: list[str]) -> tuple[tuple[int, str], dict]:
    """run_autograder on the submission of `kind` in a layout root of its own; (exit code, output), results."""
    root = os.path.join(base, kind)
    os.makedirs(root)
    os.chmod(root, 0o755)
    os.symlink(source, os.path.join(root, "source"))
    make_submission(hw, kind, os.path.join(root, "submission"), root,
                    [os.path.join(root, "source", os.path.relpath(p, source)) for p in paths])
    env = dict(os.environ, AUTOGRADER_ROOT=root, AUTOGRADER_ARGS=f"--only {CASES[hw].only} --jobs 1")
    done = subprocess.run([os.path.join(root, "source", "run_autograder")], env=env,
                          capture_output=True, text=True, timeout=300)
    path = os.path.join(root, "results", "results.json")
    results = json.load(open(path)) if os.path.exists(path) else {}
    return (done.returncode, done.stdout + done.stderr), results


@pytest.fixture(scope="module")
def gradings(request, tmp_path_factory):
    """{homework: (runs, hidden lines)} for the homeworks the selected tests ask for; runs: {kind:
    (run_autograder's exit code and output, results.json)}. Every grading of every homework goes
    through one pool, two at a time (2 cores; a grading keeps about one busy), so no core idles
    between homeworks."""
    wanted = [hw for hw in CASES if any(getattr(item, "callspec", None) is not None and
                                        item.callspec.params.get("graded") == hw for item in request.session.items)]
    bases, setups, unpacked = {}, {}, {}
    try:
        for hw in wanted:
            bases[hw] = tempfile.mkdtemp(prefix=f"gradescope-{hw}-")
            os.chmod(bases[hw], 0o755)                          # like /autograder: others may look around
            upload = str(tmp_path_factory.mktemp("upload") / f"gradescope-{hw}.zip")
            unpacked[hw] = unpack(hw, bases[hw], upload, setups)
        with ThreadPoolExecutor(max_workers=2) as pool:
            futures = {(hw, kind): pool.submit(grade, hw, kind, bases[hw], unpacked[hw][0], unpacked[hw][2])
                       for hw in wanted for kind in KINDS}
            yield {hw: ({kind: futures[hw, kind].result() for kind in KINDS}, unpacked[hw][1]) for hw in wanted}
    finally:
        for base in bases.values():
            shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(params=list(CASES))
def graded(request, gradings):
    """(homework, {kind: (exit code and output, results.json)}, hidden-test lines) of one homework."""
    runs, hidden = gradings[request.param]
    return request.param, runs, hidden


def graded_tests(results: dict) -> list[dict]:
    return [t for t in results.get("tests", []) if t["max_score"] > 0]


def tasks(results: dict) -> dict[str, dict]:
    return results["extra_data"]["tasks"]


def ran(run: tuple, results: dict) -> str:
    """What to show when an assertion fails: the run's exit code and output's end."""
    return f"exit {run[0]}:\n{run[1][-3000:]}\n{json.dumps(results)[:3000]}"


def test_right_submission_scores_full_marks_on_what_is_graded(graded):
    """The first of these tests waits for every grading of the module (gradings: 4 per homework, 24 in
    all, two at a time: 65 s on 2 cores), which is why it takes over 60 s."""
    hw, runs, _ = graded
    run, results = runs["right"]
    tests = graded_tests(results)
    assert run[0] == 0 and tests, ran(run, results)
    assert results["score"] == sum(t["max_score"] for t in tests) > 0, [t["output"] for t in tests]
    assert sorted(tasks(results)) == sorted({CASES[hw].stubbed[0], CASES[hw].hostile[0]}), tasks(results)
    assert results["tests"][0]["status"] == "passed", results["tests"][0]["output"]


def test_partial_submission_loses_only_the_stubbed_tasks_points(graded):
    hw, runs, _ = graded
    (run, results), (_, right) = runs["partial"], runs["right"]
    stubbed, kept = CASES[hw].stubbed[0], CASES[hw].hostile[0]
    assert run[0] == 0 and tasks(results), ran(run, results)
    assert tasks(results)[stubbed]["score"] == 0 < tasks(results)[stubbed]["max"], tasks(results)
    assert tasks(results)[kept] == tasks(right)[kept], (tasks(results), tasks(right))
    assert results["score"] == tasks(results)[kept]["score"] > 0


def test_empty_submission_scores_zero_and_says_why(graded):
    hw, runs, _ = graded
    run, results = runs["empty"]
    assert run[0] == 0 and graded_tests(results), ran(run, results)
    assert results["score"] == 0 and all(t["score"] == 0 for t in graded_tests(results))
    check = results["tests"][0]
    assert check["name"] == "submission check" and check["status"] == "failed" and check["visibility"] == "visible"
    for rel in editable(hw).values():
        assert f"MISSING  {rel}: not in the submission" in check["output"], check["output"]


def test_hostile_submission_loses_its_tasks_points_and_leaks_nothing(graded):
    hw, runs, hidden = graded
    (run, results), (_, right) = runs["hostile"], runs["right"]
    attacked, kept = CASES[hw].hostile[0], CASES[hw].stubbed[0]
    assert results, f"the grader wrote no results.json: {ran(run, results)}"
    assert results["score"] != FORGED and results["tests"], "the submission's own results.json stands"
    assert tasks(results)[attacked]["score"] < tasks(results)[attacked]["max"], tasks(results)
    assert tasks(results)[kept] == tasks(right)[kept], (tasks(results), tasks(right))
    assert results["score"] == sum(t["score"] for t in graded_tests(results))
    shown = "\n".join([results.get("output", "")] + [t.get("output", "") for t in results["tests"]] + [run[1]])
    assert "HIDDEN-READ" not in shown and "RESULTS-FORGED" not in shown, shown[-3000:]
    assert "HIDDEN-REFUSED" in shown and "RESULTS-REFUSED" in shown, f"the attack did not run: {shown[-3000:]}"
    leaked = [line for line in hidden if line in shown]
    assert leaked == [], leaked[:5]
    assert re.search(r"RankExited|ended \(exit code 0\)", shown), shown[-3000:]

"""The student release (tools/release.py) leaks nothing secret and ships what students need.

The release is built once for this module (nbgrader notebooks, lectures executed); the leak
checks below are written independently of tools.release's own scan, so a bug there is caught.
"""

from __future__ import annotations

import functools
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import zipfile

import pytest

from tools import release as rel
from tools.notebooks import source_of
from tools.overlay import ROOT, homework_manifest
from tools.stubs import SOLUTIONS, solution_files, stub_text

# The first test to run builds the release: every lecture executed (unless test_notebooks already ran them
# in this session) and every homework notebook through nbgrader: minutes on 2 busy cores.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
SECRET_MARKERS = ("BEGIN SOLUTION", "### BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS",
                  "END HIDDEN TESTS")
# Solution lines that give nothing away: rank bookkeeping written the same way all over the kit
# (runtime tests, lectures, benchmarks). Lines under 16 characters (`return x`) are skipped too.
TRIVIAL = {"p, r = group.size, group.rank", "right, left = (r + 1) % p, (r - 1) % p",
           "for step in range(p - 1):", "if group.rank == 0:", "if group.rank != 0:", "if group.size < 2:",
           "start = group.now()"}


@pytest.fixture(scope="module")
def released(tmp_path_factory, executed_lectures):
    """The release, with the lectures the session already executed (tests/kit/conftest.py)."""
    assert executed_lectures.errors == {}, f"lectures failed: {sorted(executed_lectures.errors)}"
    out = tmp_path_factory.mktemp("release") / "kit"
    report = rel.release(str(out), log=lambda *a: None, executed=executed_lectures.notebooks)
    return str(out), report


@functools.cache
def region_runs() -> list[list[str]]:
    """The non-trivial stripped lines between BEGIN SOLUTION and END SOLUTION in solutions/, per region."""
    runs, current = [], None
    for path in solution_files():
        with open(os.path.join(ROOT, SOLUTIONS, path)) as f:
            for line in f:
                text = line.strip()
                if re.match(r"# BEGIN SOLUTION\b", text):
                    current = []
                elif re.match(r"# END SOLUTION\b", text):
                    runs.append(current)
                    current = None
                elif current is not None and len(text) >= 16 and not text.startswith("#") and text not in TRIVIAL:
                    current.append(text)
    return runs


@functools.cache
def region_lines() -> set[str]:
    return {line for run in region_runs() for line in run}


def solution_hits(text: str) -> list[str]:
    """Two region lines in a row found in a row in `text` (other lines skipped), or one region line
    of 60+ characters: a single short line (`for h in handles:`) is ordinary code, not a leak."""
    runs = region_runs()
    pairs = {pair for run in runs for pair in zip(run, run[1:])}
    lines = [line.strip() for line in text.splitlines()]
    lines = [t for t in lines if len(t) >= 16 and not t.startswith("#") and t not in TRIVIAL]
    hits = {t for t in lines if len(t) >= 60 and t in region_lines()}
    return sorted(hits | {f"{a} / {b}" for a, b in zip(lines, lines[1:]) if (a, b) in pairs})


def shipped_texts(folder: str) -> dict[str, str]:
    """{relative path: text} of every .py and .ipynb; notebooks also as their decoded cell text."""
    texts = {}
    for base, dirs, names in os.walk(folder):
        for name in names:
            if not name.endswith((".py", ".ipynb")):
                continue
            path = os.path.join(base, name)
            with open(path) as f:
                text = f.read()
            if name.endswith(".ipynb"):
                nb = json.loads(text)
                for cell in nb["cells"]:
                    text += "\n" + "".join(cell["source"])
                    for out in cell.get("outputs", []):
                        text += "\n" + "".join(out.get("text", "")) + "\n".join(out.get("traceback", []))
                        text += "\n" + "".join(out.get("data", {}).get("text/plain", ""))
            texts[os.path.relpath(path, folder)] = text
    return texts


def test_instructor_folders_are_not_shipped(released):
    out, _ = released
    for folder in ("solutions", "autograder", "tools", os.path.join("tests", "kit"), ".ci"):
        assert not os.path.exists(os.path.join(out, folder)), f"{folder}/ must not be in the student release"
    assert not os.path.lexists(os.path.join(out, ".venv"))
    assert os.path.exists(os.path.join(out, "minitorch_dist", "runtime", "group.py"))   # the runtime ships


def test_the_students_own_test_command_collects_in_their_copy(released):
    """`.venv/bin/python -m pytest` in the student copy: no test imports what the copy lacks (tools/,
    autograder/), so collection passes (tests/runtime/test_host.py once imported tools.overlay)."""
    folder, _ = released
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and re.search(r"^\d+ tests collected", proc.stdout, re.M), proc.stdout[-3000:]
    assert "tests/runtime/test_host.py::" in proc.stdout


def test_no_solution_or_hidden_test_markers(released):
    texts = shipped_texts(released[0])
    assert len(texts) > 20
    hits = [f"{path}: {m}" for path, text in texts.items() for m in SECRET_MARKERS if m in text]
    assert hits == []


def test_no_solution_line_in_any_released_file(released):
    assert len(region_lines()) > 40, "the check must cover the reference code (found too few solution lines)"
    texts = shipped_texts(released[0])
    hits = [f"{path}: {hit}" for path, text in texts.items() for hit in solution_hits(text)]
    assert hits == []


def test_stubs_ship_equal_to_what_tools_stubs_generates(released):
    out, _ = released
    for path in solution_files():
        with open(os.path.join(ROOT, SOLUTIONS, path)) as f:
            want = stub_text(f.read(), path)
        with open(os.path.join(out, path)) as f:
            shipped = f.read()
        assert shipped == want, f"{path} in the release differs from its generated stub"
        assert "raise NotImplementedError(" in shipped and "# BEGIN YOUR CODE" in shipped


def test_homework_files_and_public_tests_ship(released):
    out, _ = released
    for name in os.listdir(os.path.join(ROOT, "assignments", "common")):  # the harness every public suite imports
        if name.endswith(".py"):
            assert os.path.exists(os.path.join(out, "assignments", "common", name)), name
    assert os.path.exists(os.path.join(out, "assignments", "__init__.py")), "the tests import assignments.*"
    for hw in rel.homeworks():
        assert os.path.exists(os.path.join(out, "assignments", hw, "__init__.py")), f"assignments.{hw} is a package"
        manifest = homework_manifest(hw)
        for path in manifest["editable"]:
            assert os.path.exists(os.path.join(out, path)), path
        public = os.path.join(ROOT, manifest["public_tests"])
        if not os.path.isdir(public):
            pytest.skip(f"{manifest['public_tests']} is not written yet")
        wanted = [os.path.relpath(os.path.join(b, n), ROOT) for b, _, names in os.walk(public)
                  for n in names if n.endswith(".py")]
        assert wanted, f"{manifest['public_tests']} has no test files"
        missing = [p for p in wanted if not os.path.exists(os.path.join(out, p))]
        assert missing == []


def test_homework_notebook_is_nbgraders_student_version(released):
    out, report = released
    for hw in rel.homeworks():
        nb_rel = homework_manifest(hw).get("notebook")
        if not nb_rel:                                   # a homework without a notebook ships none
            assert not any(n.startswith(f"assignments/{hw}/") for n in report["notebooks"])
            continue
        if not os.path.exists(os.path.join(ROOT, nb_rel)):
            assert nb_rel in report["skipped_notebooks"]
            assert not os.path.exists(os.path.join(out, nb_rel))
            continue
        assert nb_rel in report["notebooks"]
        assert os.path.exists(os.path.join(ROOT, source_of(nb_rel))), f"{nb_rel} has no percent source"
        assert not os.path.exists(os.path.join(out, source_of(nb_rel))), "the notebook's source (answers) shipped"
        with open(os.path.join(ROOT, nb_rel)) as f, open(os.path.join(out, nb_rel)) as g:
            source, student = f.read(), g.read()
        if "BEGIN SOLUTION" in source:
            assert student != source


def test_lectures_ship_with_outputs(released):
    out, report = released
    if not report["lectures"]:
        pytest.skip("no lecture notebooks in the kit yet")
    for path in report["lectures"]:
        with open(os.path.join(out, path)) as f:
            cells = [c for c in json.load(f)["cells"] if c["cell_type"] == "code" and "".join(c["source"]).strip()]
        assert any(c.get("outputs") for c in cells), f"{path} shipped without outputs"
        assert os.path.exists(os.path.join(out, source_of(path))), f"{path} shipped without its percent source"


def test_leak_scan_catches_planted_lines(tmp_path):
    run = next(run for run in region_runs() if len(run) >= 2)
    line = f"{run[0]}\n    {run[1]}"                                   # two solution lines in a row
    (tmp_path / "leak.py").write_text(f"def f():\n    {line}\n")
    nb = {"cells": [{"cell_type": "code", "source": [f"{line}\n"], "metadata": {}, "outputs": [],
                     "execution_count": None}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "leak.ipynb").write_text(json.dumps(nb))
    (tmp_path / "hidden.py").write_text("### BEGIN HIDDEN TESTS\n")
    leaks = rel.find_leaks(str(tmp_path))
    for name in ("leak.py", "leak.ipynb", "hidden.py"):
        assert any(leak.startswith(name + ":") for leak in leaks), (name, leaks)
    assert solution_hits(shipped_texts(str(tmp_path))["leak.ipynb"])    # this module's own scan sees it too
    (tmp_path / "alone.py").write_text(f"def g():\n    {run[0]}\n")    # one short line alone is not a leak
    assert not any(leak.startswith("alone.py:") for leak in rel.find_leaks(str(tmp_path))) or len(run[0]) >= 60


def test_leak_scan_looks_inside_archives_and_refuses_any(tmp_path):
    """A secret inside a zip or a tar placed in the copy is named with its member; an archive that holds
    nothing secret, or goes by another name (found by its bytes), or is hidden, is refused all the same."""
    run = next(run for run in region_runs() if len(run) >= 2)
    secret = f"def f():\n    {run[0]}\n    {run[1]}\n"
    with zipfile.ZipFile(tmp_path / "gradescope-hw3.zip", "w") as z:
        z.writestr("solutions/minitorch_dist/x.py", secret)
        z.writestr("README.md", "nothing here\n")
    with tarfile.open(tmp_path / "bundle.tar.gz", "w:gz") as t:
        data = b"### BEGIN HIDDEN TESTS\n"
        info = tarfile.TarInfo("autograder/hidden.py")
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    with zipfile.ZipFile(tmp_path / "notes.bin", "w") as z:
        z.writestr("notes.txt", "nothing secret\n")
    (tmp_path / "sub").mkdir()
    with zipfile.ZipFile(tmp_path / "sub" / ".old.zip", "w") as z:
        z.writestr("a.txt", "nothing secret\n")
    (tmp_path / "plain.py").write_text("x = 1\n")
    leaks = rel.find_leaks(str(tmp_path))
    inside = "gradescope-hw3.zip!solutions/minitorch_dist/x.py: solution text"
    assert any(leak.startswith(inside) for leak in leaks), leaks
    assert any(leak.startswith("bundle.tar.gz!autograder/hidden.py: marker") for leak in leaks), leaks
    archives = sorted(leak.split(":")[0] for leak in leaks if leak.endswith(rel.ARCHIVE_FOUND))
    assert archives == sorted(["bundle.tar.gz", "gradescope-hw3.zip", "notes.bin", os.path.join("sub", ".old.zip")])
    assert not any(leak.startswith(("plain.py", "gradescope-hw3.zip!README.md")) for leak in leaks), leaks


def test_release_refuses_drifted_stubs_and_a_full_outdir(tmp_path):
    root = tmp_path / "kit"
    (root / SOLUTIONS / "pkg").mkdir(parents=True)
    (root / "pkg").mkdir()
    (root / SOLUTIONS / "pkg" / "m.py").write_text(
        "def f():\n    # BEGIN SOLUTION  (HW1 task 1.4)\n    return 1\n    # END SOLUTION\n")
    (root / "pkg" / "m.py").write_text("def f():\n    return 1\n")          # not the generated stub
    with pytest.raises(rel.ReleaseError, match="stubs out of date"):
        rel.release(str(tmp_path / "out"), root=str(root), log=lambda *a: None)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(rel.ReleaseError, match="not empty"):
        rel.release(str(tmp_path / "full"), log=lambda *a: None)
    assert not (tmp_path / "out").exists()


def test_an_earlier_homeworks_reference_ships_only_where_builds_on_allows_it(tmp_path):
    """hw3 builds on hw2's BucketedDDP: with --reference hw2 the release holds its reference (no markers)
    at that path and nowhere else; the file may hold hw2's solution lines and no other homework's."""
    from tools.stubs import builds_on, lay_provided
    files = builds_on(homework_manifest("hw3"))
    assert files == ["minitorch_dist/data_parallel/bucketed.py"]
    os.makedirs(tmp_path / "minitorch_dist" / "data_parallel")
    warned = []
    assert lay_provided(str(tmp_path), ["hw3"], [], ROOT, warned.append) == {} and "--reference hw2" in warned[0]
    provided = lay_provided(str(tmp_path), ["hw3"], ["hw2"], ROOT, warned.append)
    assert provided == {files[0]: "hw2"}
    text = (tmp_path / files[0]).read_text()
    assert "BEGIN SOLUTION" not in text and "self._pending" in text
    assert rel.find_leaks(str(tmp_path), provided=provided) == []
    assert any(leak.startswith(files[0]) for leak in rel.find_leaks(str(tmp_path)))     # not declared: a leak
    (tmp_path / "copy.py").write_text(text)                                              # elsewhere: a leak
    assert any(leak.startswith("copy.py:") for leak in rel.find_leaks(str(tmp_path), provided=provided))
    os.remove(tmp_path / "copy.py")
    other = next(r for r in rel.solution_regions(ROOT, leave_out="hw2") if len(r) >= 2)
    with open(tmp_path / files[0], "a") as f:                                            # another homework's
        f.write(f"\ndef planted():\n    {other[0]}\n    {other[1]}\n")
    assert any(leak.startswith(files[0]) for leak in rel.find_leaks(str(tmp_path), provided=provided))


def test_the_students_readme_names_only_what_their_copy_runs(released):
    """No instructor command; every file a command names is in the copy; every command uses the venv."""
    folder, report = released
    with open(os.path.join(folder, "README.md")) as f:
        text = f.read()
    for word in ("tools.", "autograder", "solutions/", "tests/kit"):
        assert word not in text, word
    commands = [line.split("#")[0].strip() for line in text.splitlines() if line.startswith((".venv/", "bash "))]
    assert commands and all(c.startswith((".venv/bin/", "bash scripts/")) for c in commands), commands
    for cmd in commands:
        words = cmd.split()
        for w in words[1:]:
            if w.endswith((".py", ".ipynb", ".sh")) or w.startswith("assignments/"):
                assert os.path.exists(os.path.join(folder, w)), (w, cmd)
        if "-m" in words:
            module = words[words.index("-m") + 1]
            if module.startswith("minitorch_dist"):
                assert os.path.exists(os.path.join(folder, *module.split(".")) + ".py"), cmd
    for hw in report["homeworks"]:
        assert f".venv/bin/python -m minitorch_dist.submit {hw}" in text

"""The Gradescope upload (tools/gradescope.py): what the zip holds, that a release after building it
ships no archive, and that setup.sh checks every locked version. test_gradescope_homeworks.py runs
every homework's upload in Gradescope's folder layout (setup.sh, then run_autograder on a right, a
partial, an empty and a hostile submission).

setup.sh runs for real but finds a venv already there (a link to the kit's, so pip only confirms
every requirement): installing torch from nothing takes minutes and is what scripts/setup.sh, which
CI runs, already does.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import types
import zipfile

import pytest

from tools import gradescope, grader_lock
from tools.overlay import ROOT, copy_kit, homework_manifest


@pytest.fixture(scope="module")
def hw3_zip(tmp_path_factory):
    out = tmp_path_factory.mktemp("upload") / "gradescope-hw3.zip"
    info = gradescope.build("hw3", str(out))
    return str(out), info


def test_the_upload_holds_the_grader_of_one_homework_and_no_solution(hw3_zip):
    path, info = hw3_zip
    with zipfile.ZipFile(path) as z:
        names = set(z.namelist())
        modes = {i.filename: i.external_attr >> 16 for i in z.infolist()}
        reqs = z.read("requirements.txt").decode().split()
    assert {"setup.sh", "run_autograder", "requirements.txt"} <= names
    assert modes["setup.sh"] & 0o111 and modes["run_autograder"] & 0o111
    assert reqs == grader_lock.read()[1] and "torch==2.13.0+cpu" in reqs and all("==" in r for r in reqs)
    assert {r.split("==")[0].lower() for r in reqs} >= {"numpy", "pytest", "pytest-timeout", "psutil", "mpi4py", "mpich",
                                                        "cloudpickle", "matplotlib", "pluggy"}      # and what they need
    assert "autograder/grade.py" in names and "autograder/hw3/test_powersgd.py" in names
    assert "minitorch_dist/compression/powersgd.py" in names and "assignments/hw3/tests/hw3_ranks.py" in names
    assert not any(n.startswith(("autograder/hw1/", "assignments/hw1/", "tests/", "lectures/", ".git")) for n in names)
    assert not any(n.endswith(".ipynb") for n in names)                     # hw3's nbgrader source holds answers
    assert "assignments/hw3/hw3_compression.py" not in names                # and so does its percent file
    solutions = sorted(n for n in names if n.startswith("solutions/"))
    assert solutions == ["solutions/" + rel for rel in homework_manifest("hw3")["builds_on"]["hw2"]], solutions
    assert info["provided"] == homework_manifest("hw3")["builds_on"]["hw2"]
    with zipfile.ZipFile(path) as z:                               # the student's files are the stubs
        assert "BEGIN YOUR CODE" in z.read("minitorch_dist/compression/powersgd.py").decode()


def test_unknown_homework_is_a_clear_error(tmp_path, capsys):
    assert gradescope.main(["hw9", "--out", str(tmp_path / "x.zip")]) == 1
    assert "unknown homework 'hw9'" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_release_after_building_the_upload_ships_no_archive(tmp_path):
    """The documented order, in a git checkout of the kit: build the upload (its default path is the kit's
    ignored dist/), leave the zip where the old default put it and an archive in a homework folder too,
    then release: the student copy holds no archive and no dist/."""
    from tools.archives import is_archive
    from tools.release import release
    from tools.stubs import SOLUTIONS
    kit = tmp_path / "kit"
    copy_kit(str(kit))
    os.unlink(kit / ".venv")
    shutil.copytree(os.path.join(ROOT, SOLUTIONS), kit / SOLUTIONS)
    subprocess.run(["git", "init", "-q"], cwd=kit, check=True)
    out = gradescope.default_out("hw3", str(kit))
    assert out == str(kit / "dist" / "gradescope-hw3.zip")
    gradescope.build("hw3", out, str(kit))
    shutil.copy(out, kit / "gradescope-hw3.zip")                       # where the upload used to go
    shutil.copy(out, kit / "assignments" / "hw3" / "old-upload.tar.gz")
    student = tmp_path / "student"
    release(str(student), ["hw3"], execute_lectures=False, root=str(kit), log=lambda *a: None)
    shipped = [os.path.join(d, n) for d, _, names in os.walk(student) for n in names]
    assert len(shipped) > 50 and os.path.exists(student / "minitorch_dist" / "compression" / "powersgd.py")
    assert [p for p in shipped if is_archive(p)] == []
    assert not os.path.exists(student / "dist")


def test_pyproject_is_read_without_tomllib(monkeypatch):
    """Python 3.10 has no tomllib: the tomli package (pyproject's dev extra there) reads pyproject.toml;
    with neither, the error says what to install."""
    try:
        import tomllib as real
    except ModuleNotFoundError:                                    # Python 3.10: the dev extra's tomli
        import tomli as real
    want = grader_lock.needed()
    monkeypatch.setitem(sys.modules, "tomllib", None)              # import tomllib fails, as on 3.10
    monkeypatch.setitem(sys.modules, "tomli", types.SimpleNamespace(load=real.load))
    assert grader_lock.needed() == want
    monkeypatch.setitem(sys.modules, "tomli", None)
    with pytest.raises(RuntimeError, match=r"Python 3\.11\+ \(tomllib\) or the tomli package .* pip install tomli"):
        grader_lock.needed()


def test_the_lock_is_this_venvs_and_setup_checks_every_version(hw3_zip, tmp_path):
    """autograder/requirements.lock holds exactly what this venv has of the grader's packages and what they
    require (python -m tools.grader_lock rewrites it); setup.sh stops, naming the package, when an installed
    version differs from the lock (here: the kit's venv against a lock with one version changed)."""
    assert grader_lock.differences() == [], "python -m tools.grader_lock"
    python, lines = grader_lock.read()
    assert python == grader_lock.python_version() and any(line.startswith("torch==") for line in lines)
    root = tmp_path / "autograder"
    source = root / "source"
    with zipfile.ZipFile(hw3_zip[0]) as z:
        z.extractall(source)
    os.symlink(os.path.join(ROOT, ".venv"), source / ".venv")
    numpy = next(line for line in lines if line.startswith("numpy=="))
    (source / "requirements.txt").write_text("\n".join(line for line in lines if line != numpy) + "\nnumpy==0.0.1\n")
    setup = (source / "setup.sh").read_text().replace(".venv/bin/python -m pip install", ": skipped here")
    done = subprocess.run(["bash", "-c", setup], env=dict(os.environ, AUTOGRADER_ROOT=str(root)),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and f"numpy {numpy.split('==')[1]} (the lock: 0.0.1)" in done.stderr, done.stderr

"""autograder.kit_copies: the student's copy of the kit, and the bytecode the grader compiles once.

- compile_kit puts hash-checked bytecode beside the kit copy's sources; make_student_kit copies a
  bytecode file only beside its source, never a hidden test's or a skipped folder's.
- A source laid after compiling (the submission over a stub) runs as written: its stale bytecode
  fails the hash check, so Python compiles the new source.
- StudentKit puts a student copy back as made, whatever a grading laid on it: the same bytes and
  entries as a copy made afresh, a rewrite of the same size in the same clock tick included.
"""

from __future__ import annotations

import os
import subprocess
import sys

from autograder.kit_copies import StudentKit, compile_kit, make_student_kit


def _write(root, rel: str, text: str) -> None:
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def _pycs(root) -> set[str]:
    return {os.path.relpath(os.path.join(folder, n), root) for folder, _, names in os.walk(root)
            for n in names if n.endswith(".pyc")}


def test_bytecode_comes_only_beside_its_source_and_never_for_a_hidden_test(tmp_path):
    kit, student = str(tmp_path / "kit"), str(tmp_path / "student")
    _write(kit, "minitorch_dist/__init__.py", "")
    _write(kit, "minitorch_dist/ring.py", "def f():\n    return 'stub'\n")
    _write(kit, "assignments/hw1/tests/hidden_check.py", "SECRET = 42\n")
    _write(kit, "autograder/hw1/test_hidden.py", "SECRET = 43\n")
    compile_kit(kit)
    compiled = _pycs(kit)
    assert any("hidden_check" in p for p in compiled) and any("test_hidden" in p for p in compiled)
    make_student_kit(kit, student, exclude=["assignments/hw1/tests/hidden_check.py"])
    copied = _pycs(student)
    assert any(p.startswith("minitorch_dist/__pycache__/ring.") for p in copied), copied
    assert not [p for p in copied if "hidden" in p], copied
    assert not os.path.exists(os.path.join(student, "autograder"))


def test_a_source_laid_after_compiling_runs_as_written(tmp_path):
    kit, student = str(tmp_path / "kit"), str(tmp_path / "student")
    _write(kit, "minitorch_dist/__init__.py", "")
    _write(kit, "minitorch_dist/ring.py", "def f():\n    return 'stub'\n")
    compile_kit(kit)
    make_student_kit(kit, student, exclude=[])
    _write(student, "minitorch_dist/ring.py", "def f():\n    return 'submitted'\n")      # same size or not
    code = "import minitorch_dist.ring as r; print(r.f())"
    env = dict(os.environ, PYTHONPATH=student, PYTHONDONTWRITEBYTECODE="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=student)
    assert out.stdout.strip() == "submitted", out.stderr
    _write(student, "minitorch_dist/ring.py", "def f():\n    return 'stubz'\n")           # same size, same second
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=student)
    assert out.stdout.strip() == "stubz", out.stderr


def test_bytecode_shared_between_kit_copies_names_each_copys_own_files(tmp_path):
    """A session reuses what an earlier session of the process compiled; the code still names the file
    it was imported from (a traceback in feedback points into this grading's copy)."""
    for name in ("first", "second"):
        _write(str(tmp_path / name), "minitorch_dist/__init__.py", "")
        _write(str(tmp_path / name), "minitorch_dist/ring.py", "def f():\n    raise ValueError('here')\n")
        compile_kit(str(tmp_path / name))
    second = str(tmp_path / "second")
    code = "import minitorch_dist.ring as r; print(r.__spec__.cached); print(r.f.__code__.co_filename)"
    env = dict(os.environ, PYTHONPATH=second, PYTHONDONTWRITEBYTECODE="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=second)
    cached, filename = out.stdout.split()
    assert cached.startswith(second) and filename == os.path.join(second, "minitorch_dist", "ring.py"), out


def _tree(root) -> dict[str, bytes | None]:
    """{path: bytes (None for a folder)} of everything under root."""
    out = {}
    for folder, dirs, names in os.walk(root):
        for d in dirs:
            out[os.path.relpath(os.path.join(folder, d), root)] = None
        for n in names:
            path = os.path.join(folder, n)
            out[os.path.relpath(path, root)] = os.readlink(path).encode() if os.path.islink(path) else open(path, "rb").read()
    return out


def test_a_student_kit_is_put_back_as_made_whatever_was_laid_on_it(tmp_path):
    kit = str(tmp_path / "kit")
    _write(kit, "minitorch_dist/__init__.py", "")
    _write(kit, "assignments/hw1/ring.py", "def f():\n    return 'stub'\n")
    _write(kit, "assignments/hw1/tree.py", "X = 1\n")
    _write(kit, "assignments/hw1/tests/hidden_check.py", "SECRET = 42\n")
    compile_kit(kit)
    exclude = ["assignments/hw1/tests/hidden_check.py"]
    make_student_kit(kit, str(tmp_path / "afresh"), exclude)
    expected = _tree(str(tmp_path / "afresh"))
    student = StudentKit(kit, str(tmp_path / "student"), exclude)
    student.fresh()
    assert _tree(student.dest) == expected
    for _ in range(3):      # a grading's writes, at once after the copy was made or put back
        _write(student.dest, "assignments/hw1/ring.py", "def f():\n    return 'SUBM'\n")      # same size
        os.remove(os.path.join(student.dest, "assignments/hw1/tree.py"))
        _write(student.dest, "assignments/hw1/extra.py", "y = 2\n")
        _write(student.dest, "assignments/hw0/new/ref.py", "z = 3\n")
        os.symlink("/etc/passwd", os.path.join(student.dest, "assignments/hw1/link"))
        assert _tree(student.dest) != expected
        student.fresh()
        assert _tree(student.dest) == expected
    os.unlink(os.path.join(student.dest, "minitorch_dist/__init__.py"))
    os.rename(os.path.join(student.dest, "minitorch_dist"), str(tmp_path / "moved"))
    _write(student.dest, "minitorch_dist", "a file where a folder was")
    student.fresh()
    assert _tree(student.dest) == expected

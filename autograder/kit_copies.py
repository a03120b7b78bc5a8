"""The kit copies a grading makes, and the permissions that keep the sandbox out of the rest.

    compile_kit(graders_copy)           # bytecode once, so no rank or test process compiles the kit again
    make_student_kit(graders_copy, dest, exclude=hidden_test_files)   # no grader, solutions, tests
    StudentKit(graders_copy, dest, exclude).fresh()   # the same, made once, then put back per grading
    seal(dest, gid)                     # root-owned, readable by the grading's gid only
    protect_secrets(ROOT)               # the pristine kit's secret folders owner-only
    open_interpreter()                  # search permission so the sandbox user can run Python
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import stat
import sys

from importlib._bootstrap_external import _code_to_hash_pyc   # the pyc layout compileall writes

from autograder.sandbox import is_root

SECRET_DIRS = ("solutions", "autograder", "tests", "tools", ".git")   # of the pristine kit


BYTECODE_DIRS = ("assignments", "minitorch_dist", "autograder")     # what test and rank processes import


def compile_kit(kit: str) -> None:
    """Bytecode for the Python files of a kit copy, in __pycache__, each checked against its source's
    hash when imported. Every rank and test process of a grading imports the harness and the runtime
    afresh, and PYTHONDONTWRITEBYTECODE keeps them from caching what they compile: without this each
    compiled them again (about 7% of a homework's grading CPU, measured on hw4). A source changed
    after this (a submission laid over a stub, a reference laid by lay_references) fails the hash
    check and is compiled from its source, as before. The same source with the same path, met by an
    earlier session of this process, is not compiled again (0.4 s of CPU a session otherwise)."""
    for name in BYTECODE_DIRS:
        for folder, dirs, names in os.walk(os.path.join(kit, name)):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for n in names:
                if n.endswith(".py"):
                    _write_pyc(os.path.join(folder, n), os.path.relpath(os.path.join(folder, n), kit))


# (kit path, source hash) -> its pyc: a session compiles only what an earlier one did not. A pyc is
# relocatable (importing it sets the code's file name to the source's path), so kit copies share them.
_COMPILED: dict[tuple[str, bytes], bytes] = {}


def _write_pyc(source: str, rel: str) -> None:
    with open(source, "rb") as f:
        data = f.read()
    key = (rel, importlib.util.source_hash(data))
    pyc = _COMPILED.get(key)
    if pyc is None:
        try:
            code = compile(data, source, "exec", dont_inherit=True)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return                                  # imported later, it fails as it would have
        pyc = _COMPILED[key] = bytes(_code_to_hash_pyc(code, key[1], checked=True))
    cache = importlib.util.cache_from_source(source)
    os.makedirs(os.path.dirname(cache), exist_ok=True)
    with open(cache, "wb") as f:
        f.write(pyc)


def _source_of(rel_pyc: str) -> str:
    """The source a cached bytecode file belongs to: pkg/__pycache__/mod.cpython-311.pyc -> pkg/mod.py."""
    folder = os.path.dirname(os.path.dirname(rel_pyc))
    return os.path.normpath(os.path.join(folder, os.path.basename(rel_pyc).split(".", 1)[0] + ".py"))


def make_student_kit(trusted_kit: str, dest: str, exclude: list[str]) -> None:
    """Copy the grader's kit copy to `dest` without the grader, solutions, hidden tests or links.
    Cached bytecode comes along only beside its source (never a hidden test's).
    The caller lays the submission over it, then seals it (seal) once."""
    skip = {"autograder", "tools", "solutions", ".git", ".venv"}
    excluded = {os.path.normpath(e) for e in exclude}
    for folder, dirs, names in os.walk(trusted_kit):
        rel_dir = os.path.relpath(folder, trusted_kit)
        dirs[:] = [d for d in dirs if not (rel_dir == "." and d in skip)
                   and os.path.normpath(os.path.join(rel_dir, d)) not in excluded]
        cache = os.path.basename(rel_dir) == "__pycache__"
        os.makedirs(os.path.join(dest, rel_dir), exist_ok=True)
        for n in names:
            rel = os.path.normpath(os.path.join(rel_dir, n))
            src = os.path.join(folder, n)
            if rel in excluded or not stat.S_ISREG(os.lstat(src).st_mode):
                continue
            if cache:
                source = _source_of(rel)
                if not n.endswith(".pyc") or source in excluded or not os.path.isfile(os.path.join(trusted_kit, source)):
                    continue
            shutil.copyfile(src, os.path.join(dest, rel))


# Every file of a student kit that StudentKit made carries this modification time (ns since the epoch):
# any write after it, however soon, sets the clock's time, so a changed file is told by its stat alone.
MADE_MTIME_NS = 1_000_000_000 * 1_000_000_000


class StudentKit:
    """The student's copy at `dest`, made once (make_student_kit) and put back to that state before each
    grading instead of copied again (0.6 s a grading on 2 cores, most of a mutant's grading).

    fresh() removes every entry made since (a submission's files, earlier homeworks' references, anything
    new) and copies again, from the grader's copy, every file whose stat differs from the one recorded
    when it was made: type, size, inode and modification time. Made files carry MADE_MTIME_NS, a time
    no write can leave, so a file rewritten with the same size in the same clock tick still counts as
    changed. The sandbox cannot write here (seal), so only the trusted side's writes are undone."""

    def __init__(self, trusted_kit: str, dest: str, exclude: list[str]):
        self.trusted, self.dest, self.exclude = trusted_kit, dest, exclude
        self.made: dict[str, tuple] | None = None       # kit path -> stat key; folders too ("" for dest)

    def fresh(self) -> None:
        """`dest` as make_student_kit would make it now."""
        if self.made is None or not os.path.isdir(self.dest):
            if os.path.lexists(self.dest):
                shutil.rmtree(self.dest)
            make_student_kit(self.trusted, self.dest, self.exclude)
            self.made = {}
            for rel, entry in _entries(self.dest):
                if not stat.S_ISDIR(entry.st_mode):
                    os.utime(os.path.join(self.dest, rel), ns=(MADE_MTIME_NS, MADE_MTIME_NS), follow_symlinks=False)
                self.made[rel] = _key(os.lstat(os.path.join(self.dest, rel)))
            return
        entries = list(_entries(self.dest))                          # one walk, read both ways below
        present = {rel for rel, entry in entries
                   if rel in self.made and (stat.S_ISDIR(entry.st_mode) or _key(entry) == self.made[rel])}
        for rel, entry in reversed(entries):                         # deepest first: files before their folder
            if rel not in present and rel:
                path = os.path.join(self.dest, rel)
                shutil.rmtree(path) if stat.S_ISDIR(entry.st_mode) else os.unlink(path)
        for rel, made in self.made.items():
            if rel not in present:
                path = os.path.join(self.dest, rel)
                if stat.S_ISDIR(made[0]):
                    os.makedirs(path, exist_ok=True)
                else:
                    shutil.copyfile(os.path.join(self.trusted, rel), path)
                    os.utime(path, ns=(MADE_MTIME_NS, MADE_MTIME_NS))
                    self.made[rel] = _key(os.lstat(path))


def _entries(root: str):
    """(kit path, lstat) of every entry under `root`, folders before what they hold ("" is root)."""
    yield "", os.lstat(root)
    for folder, dirs, names in os.walk(root):
        for n in dirs + names:
            path = os.path.join(folder, n)
            yield os.path.relpath(path, root), os.lstat(path)


def _key(st: os.stat_result) -> tuple:
    return (stat.S_IFMT(st.st_mode), st.st_size, st.st_ino, st.st_mtime_ns) if not stat.S_ISDIR(st.st_mode) else \
        (stat.S_IFMT(st.st_mode),)


def seal(path: str, gid: int | None) -> None:
    """Everything under `path` root-owned (when root), group `gid` may read, nobody else anything."""
    dir_mode, file_mode = (0o750, 0o640) if gid is not None else (0o755, 0o644)
    for folder, dirs, names in os.walk(path):
        for entry, mode in [(folder, dir_mode)] + [(os.path.join(folder, n), file_mode) for n in names]:
            if gid is not None:
                os.chown(entry, 0, gid, follow_symlinks=False)
            os.chmod(entry, mode)


def protect_secrets(root: str) -> str:
    """Make the pristine kit's secret folders owner-only (the venv stays readable); the layer's text."""
    if not is_root():
        return "unavailable: not root, so the kit's solutions/ and hidden tests keep their permissions"
    changed = []
    for name in SECRET_DIRS:
        path = os.path.join(root, name)
        if os.path.isdir(path) and os.stat(path).st_mode & 0o077:
            os.chmod(path, 0o700)
            changed.append(name)
    note = f" (made owner-only now: {', '.join(changed)})" if changed else ""
    return f"active: {', '.join(SECRET_DIRS)} of the kit are owner-only{note}"


def open_interpreter() -> list[str]:
    """Give others search (x) permission on the folders above the interpreter and the venv, so the
    sandbox user can run Python and import what it imports late (e.g. a pyenv Python under a private
    /root, a venv reached through a link in a private folder); returns what changed."""
    changed = []
    targets = {os.path.realpath(sys.executable), os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix),
               os.path.abspath(sys.prefix)}       # as the sandbox reaches it: a venv by a link (Gradescope's layout)
    for target in targets:
        path = os.path.dirname(target) if os.path.isfile(target) else target
        while path and path != os.sep:
            mode = os.stat(path).st_mode
            if not mode & 0o001:
                os.chmod(path, stat.S_IMODE(mode) | 0o001)
                changed.append(path)
            path = os.path.dirname(path)
    return changed

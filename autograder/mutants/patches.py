"""Seeded bugs: one patch file per bug against the reference solutions, and how to apply one.

A bug file, autograder/mutants/<homework>/<name>.patch, is a unified diff against solutions/ (paths
are kit paths, as `diff -u` or `git diff` write them) after a few header lines:

    task: 1.4
    what: combines with sum whatever op it is given
    caught_by: autograder/hw1/test_all_reduce.py::test_naive_all_reduce_dtypes_and_ops[max]
    --- a/minitorch_dist/collectives/all_reduce.py
    +++ b/minitorch_dist/collectives/all_reduce.py
    @@ -31,3 +31,3 @@
    ...

caught_by (optional; `python -m autograder.mutants hw1 --write-hints` fills it in) names the first case
that failed in the full table: CI tries that case alone first, then the task's other hidden tests.
`python -m autograder.mutants new hw1 NAME --task 1.4 --what "..." EDITED_FILE...` writes one from
edited copies of solution files (a student's file, say). A hunk is applied where its old lines are
found in the file, nearest to the line it names, so unrelated edits of the solutions above it do not
break it; a hunk that no longer matches is an error that names the bug, the file and the line.
"""

from __future__ import annotations

import difflib
import glob
import os
import re
import shutil
from dataclasses import dataclass, field

from tools.overlay import ROOT, homework_manifest

MUTANTS = os.path.dirname(os.path.abspath(__file__))
HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+\d+(?:,\d+)? @@")


class PatchError(ValueError):
    """A bug file that cannot be read or no longer applies to the solutions."""


@dataclass
class Bug:
    """One seeded bug: its name, task ("1.4"), one line on what it gets wrong, and its diff per file."""

    homework: str
    name: str
    task: str
    what: str
    path: str
    caught_by: str = ""
    files: dict[str, list[tuple[int, list[str], list[str]]]] = field(default_factory=dict)   # kit path -> hunks

    @property
    def marker(self) -> str:
        """The task's pytest marker, task1_4."""
        return "task" + self.task.replace(".", "_")


def bug_files(homework: str) -> list[str]:
    return sorted(glob.glob(os.path.join(MUTANTS, homework, "*.patch")))


def load_bugs(homework: str, names: list[str] | None = None) -> list[Bug]:
    """The bugs of `homework` (all, or those named), read and checked against homework.json's tasks."""
    bugs = [read_bug(homework, path) for path in bug_files(homework)]
    if names:
        unknown = sorted(set(names) - {b.name for b in bugs})
        if unknown:
            raise PatchError(f"no bug {', '.join(unknown)} in autograder/mutants/{homework}/ "
                             f"(there are: {', '.join(b.name for b in bugs) or 'none'})")
        bugs = [b for b in bugs if b.name in names]
    tasks = homework_manifest(homework).get("tasks", {})
    for b in bugs:
        if b.task not in tasks:
            raise PatchError(f"{b.path}: task {b.task!r} is not a task of {homework} ({', '.join(tasks)})")
    return bugs


def read_bug(homework: str, path: str) -> Bug:
    name = os.path.splitext(os.path.basename(path))[0]
    with open(path) as f:
        lines = f.read().splitlines()
    head: dict[str, str] = {}
    i = 0
    while i < len(lines) and not lines[i].startswith("--- "):
        key, sep, value = lines[i].partition(":")
        if sep and key.strip() in ("task", "what", "caught_by"):
            head[key.strip()] = value.strip()
        i += 1
    if "task" not in head or "what" not in head:
        raise PatchError(f"{path}: the header needs a 'task: N.K' and a 'what: ...' line before the diff")
    bug = Bug(homework, name, head["task"], head["what"], path, head.get("caught_by", ""))
    target, hunk = None, None
    for line in lines[i:]:
        if line.startswith("--- "):
            continue
        if line.startswith("+++ "):
            target = re.sub(r"^b/", "", line[4:].split("\t")[0].strip())
            bug.files[target] = []
        elif (m := HUNK.match(line)) and target is not None:
            hunk = (int(m.group(1)), [], [])
            bug.files[target].append(hunk)
        elif hunk is not None and line[:1] in (" ", "-", "+", ""):
            if line[:1] in (" ", "", "-"):
                hunk[1].append(line[1:])
            if line[:1] in (" ", "", "+"):
                hunk[2].append(line[1:])
    if not bug.files or not any(bug.files.values()):
        raise PatchError(f"{path}: no diff hunks after the header")
    return bug


def write_hint(bug: Bug, nodeid: str) -> None:
    """Set the bug file's caught_by line to `nodeid` (added after the what line when missing)."""
    with open(bug.path) as f:
        lines = f.read().splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("--- "))
    lines = [line for line in lines[:head] if not line.startswith("caught_by:")] + lines[head:]
    at = next(i for i, line in enumerate(lines) if line.startswith("what:")) + 1
    lines.insert(at, f"caught_by: {nodeid}")
    with open(bug.path, "w") as f:
        f.write("\n".join(lines) + "\n")
    bug.caught_by = nodeid


def apply_hunks(text: str, hunks, where: str) -> str:
    """`text` with every hunk's old lines replaced by its new ones (nearest match to its line)."""
    lines = text.split("\n")
    for start, old, new in sorted(hunks, key=lambda h: -h[0]):         # bottom up: line numbers stay valid
        spots = [i for i in range(len(lines) - len(old) + 1) if lines[i:i + len(old)] == old]
        if not spots:
            raise PatchError(f"{where}: the hunk at line {start} no longer matches the solution; "
                             f"edit the bug file (or write it again with `python -m autograder.mutants new`)")
        at = min(spots, key=lambda i: abs(i + 1 - start))
        lines[at:at + len(old)] = new
    return "\n".join(lines)


def make_submission(bug: Bug, folder: str) -> str:
    """`folder` holding the homework's editable solution files at their kit paths, with `bug` applied."""
    editable = homework_manifest(bug.homework)["editable"]
    for rel in editable:
        dest = os.path.join(folder, rel)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(os.path.join(ROOT, "solutions", rel), dest)
    for rel, hunks in bug.files.items():
        if rel not in editable:
            raise PatchError(f"{bug.path}: {rel} is not an editable file of {bug.homework}")
        dest = os.path.join(folder, rel)
        with open(dest) as f:
            text = f.read()
        new = apply_hunks(text, hunks, f"{bug.path} ({rel})")
        if new == text:
            raise PatchError(f"{bug.path}: applying it to {rel} changes nothing")
        with open(dest, "w") as f:
            f.write(new)
    return folder


def write_bug(homework: str, name: str, task: str, what: str, edited: dict[str, str], context: int = 2) -> str:
    """Write autograder/mutants/<homework>/<name>.patch from {kit path: edited text}; returns its path."""
    if not re.fullmatch(r"[a-z0-9_]+", name):
        raise PatchError(f"bug name {name!r}: use lowercase letters, digits and _ (it is a file name)")
    out = [f"task: {task}", f"what: {what}"]
    for rel, text in edited.items():
        with open(os.path.join(ROOT, "solutions", rel)) as f:
            old = f.read()
        diff = list(difflib.unified_diff(old.splitlines(), text.splitlines(), f"a/{rel}", f"b/{rel}",
                                         n=context, lineterm=""))
        if not diff:
            raise PatchError(f"{rel}: the edited file is the same as the solution")
        out += diff
    path = os.path.join(MUTANTS, homework, f"{name}.patch")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    return path

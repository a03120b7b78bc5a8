"""Fake submissions for the autograder's tests: the reference files, copied and mutated.

    sub = make_submission(tmp_path / "sub", {"all_reduce.py": insert_after_marker("1.4", "return x")})
    results = run(sub)                      # graded against the small fixture suite
    tests = by_name(results)                # {"check": ..., "test_naive_sum": ..., ...}
"""

import os
import re
import zipfile

from autograder.grade import grade
from tools.overlay import ROOT, homework_manifest

SUITE = [("tests/kit/fixtures/suite/suite_collectives.py", "after_published")]


def make_submission(folder, mutate=None, drop=(), nested=None, homework="hw1"):
    """The reference files, flat in `folder` (or under `nested`/<kit path>), with `mutate` {file: fn(text)}."""
    os.makedirs(folder, exist_ok=True)
    for rel in homework_manifest(homework)["editable"]:
        name = os.path.basename(rel)
        if name in drop:
            continue
        with open(os.path.join(ROOT, "solutions", rel)) as f:
            text = f.read()
        if mutate and name in mutate:
            new = mutate[name](text)
            assert new != text, f"the mutation of {name} changed nothing"
            text = new
        target = os.path.join(folder, nested, rel) if nested else os.path.join(folder, name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w") as f:
            f.write(text)
    return str(folder)


def zip_folder(folder, zip_path):
    with zipfile.ZipFile(zip_path, "w") as z:
        for base, _, files in os.walk(folder):
            for name in files:
                path = os.path.join(base, name)
                z.write(path, os.path.relpath(path, folder))
    return str(zip_path)


def insert_after_marker(task, code, homework="HW1"):
    """A mutation: put `code` at the start of every student region of `task`, at the marker's indent."""
    def mutate(text):
        marker = re.compile(rf"^( *)# BEGIN SOLUTION  \({homework} task {re.escape(task)}\)\n", re.M)
        assert marker.search(text), f"no region of {homework} task {task}"
        return marker.sub(lambda m: m.group(0) + "".join(f"{m.group(1)}{line}\n" for line in code.splitlines()),
                          text)
    return mutate


def by_name(results):
    """{short test function name: test entry} plus the submission check under "check"."""
    out = {"check": results["tests"][0]}
    for t in results["tests"][1:]:
        out[t["name"].rsplit(": ", 1)[-1]] = t
    return out


def run(submission, homework="hw1", **kw):
    """grade() quietly, without writing results.json; homework 1 against the fixture suite."""
    if homework == "hw1":
        kw.setdefault("suites", SUITE)
    kw.setdefault("out", None)
    return grade(homework, submission, quiet=True, **kw)



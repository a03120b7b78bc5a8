"""Fake submissions for the autograder's tests: the reference files, copied and mutated.

    sub = make_submission(tmp_path / "sub", {"all_reduce.py": insert_after_marker("1.4", "return x")})
    results = run(sub)                      # graded against the small fixture suite
    tests = by_name(results)                # {"check": ..., "test_naive_sum": ..., ...}
"""

import os
import re
import zipfile
from collections import OrderedDict

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


# -- grading sessions shared between tests --------------------------------------------------------
# Setting a session up (the grader's kit copy, a zygote per job importing torch, collecting the tests)
# and closing it costs about 7 s on 2 cores, more than most of the gradings below. Tests that grade
# with the same options share one open session, as the mutation suite and autograder.batch do for
# their submissions; each grade() still gets a fresh student copy, a fresh input secret, every
# sandbox process killed and its files removed, so what a test checks after a grading holds.
MAX_OPEN_SESSIONS = 3          # each holds zygotes (about 300 MB each): the least recently used closes
_open: "OrderedDict[tuple, object]" = OrderedDict()


def shared_session(homework: str, **options):
    """An open GradingSession of `homework` with `options` (quiet), shared by every test asking the same."""
    from autograder.session import GradingSession
    key = (homework, repr(sorted(options.items())))
    session = _open.pop(key, None)
    if session is None:
        while len(_open) >= MAX_OPEN_SESSIONS:
            _open.popitem(last=False)[1].close()
        session = GradingSession(homework, quiet=True, **options)
    _open[key] = session
    return session


def close_sessions() -> None:
    """Close every shared session (the end of the test session)."""
    while _open:
        _open.popitem(last=False)[1].close()


def grade_at_sizes(submission, only: str, sizes, out, homework="hw1"):
    """Grade the tests matching `only` on their cases at world sizes `sizes` alone (a shared session of the
    homework's real suites): (results, {short test name: its entry, for tests worth points})."""
    session = shared_session(homework, suites=None, jobs=2)
    tests = session.select(only)
    for test in tests:
        test.cases = [c for c in test.cases if c.endswith(tuple(f"[{p}]" for p in sizes))]
        assert len(test.cases) == len(sizes), test.cases
    results = session.grade(str(submission), out=str(out), tests=tests, show=False)
    return results, {t["name"].rsplit(": ", 1)[-1]: t for t in results["tests"][1:] if t["max_score"]}


def run(submission, homework="hw1", *, out=None, only=None, fresh=False, **options):
    """Grade quietly (results.json written only to `out`); homework 1 against the fixture suite.

    The grading runs in a shared session (shared_session) unless `fresh`: then grade() makes and
    closes its own, for tests that check what outlives a whole grading (marked_env); always without
    the zygote (zygote=False) and without the sandbox (sandbox=False: code that runs as the grader's
    user could change the session it would share)."""
    if homework == "hw1":
        options.setdefault("suites", SUITE)
    if fresh or options.get("zygote") is False or options.get("sandbox") is False:
        return grade(homework, submission, out=out, only=only, quiet=True, **options)
    return shared_session(homework, **options).grade(submission, out=out, only=only, show=False)

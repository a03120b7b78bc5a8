"""Find the graded tests of a homework: one GradedTest per test function, with its cases.

Collection runs once, in a child of the runner, against the kit copy *before* the submission
is laid over it (the stubs import cleanly; a submission that crashes at import cannot hide
the list of tests). Each test directory is collected on its own (public and hidden tests may
share file names).
"""

from __future__ import annotations

import glob
import json
import os

from autograder.results import GradedTest

DEFAULT_LIMIT = 60.0
COLLECT_LIMIT = 180.0


JOB_ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}


def pytest_args(root: str, targets: list[str]) -> list[str]:
    """pytest arguments for a graded run of `targets` (node ids or files) in the kit copy `root`.

    Jobs run with PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 (JOB_ENV): the plugins they need are named
    here. Loading every installed plugin (anyio's imports its event-loop backends) cost 0.45 s of
    a 1.2 s job; a grading runs one job per test function.
    """
    return ["-p", "autograder.plugin", "-p", "pytest_timeout", "-p", "no:cacheprovider", "-p", "no:terminal", "-s",
            "-o", "timeout=0", "-o", "addopts=", "--rootdir", root, "-c", os.path.join(root, "pyproject.toml"),
            *targets]


def test_files(root: str, target: str) -> list[str]:
    """Test files of a folder (test_*.py, recursively) or the file itself, relative to `root`."""
    path = os.path.join(root, target)
    if os.path.isfile(path):
        return [target]
    found = sorted(glob.glob(os.path.join(path, "**", "test_*.py"), recursive=True))
    return [os.path.relpath(f, root) for f in found]


def task_name(manifest: dict, task_marker: str | None) -> str:
    """"HW1 1.4 naive all-reduce through rank 0" from the marker task1_4 and the manifest."""
    hw = manifest["name"].upper()
    if not task_marker:
        return hw
    number = task_marker[len("task"):].replace("_", ".")
    title = manifest.get("tasks", {}).get(number, "")
    return f"{hw} {number} {title.split(':')[0].strip()}".rstrip()


def collect(runner, root: str, manifest: dict, suites: list[tuple[str, str]], scratch: str,
            default_limit: float = DEFAULT_LIMIT) -> tuple[list[GradedTest], list[str]]:
    """([GradedTest], [problems]) for `suites`, a list of (folder or file, visibility)."""
    tests: dict[str, GradedTest] = {}
    tasks: dict[str, list] = {}                        # function -> each case's task marker
    problems: list[str] = []
    for n, (target, visibility) in enumerate(suites):
        files = test_files(root, target)
        if not files:
            problems.append(f"no test files in {target}")
            continue
        listing = os.path.join(scratch, f"collect{n}.jsonl")
        output = os.path.join(scratch, f"collect{n}.out")
        reply = runner.run(pytest_args(root, ["--collect-only", *files]), {"AUTOGRADER_COLLECT": listing},
                           output, COLLECT_LIMIT)
        records = []
        if os.path.exists(listing):
            with open(listing) as f:
                records = [json.loads(line) for line in f if line.strip()]
        for rec in records:
            if rec["kind"] == "collect_error":
                problems.append(f"collecting {rec['nodeid']}: {rec['message']}")
                continue
            test = tests.get(rec["function"])
            if test is None:
                points = rec["points"] if rec["points"] is not None else 1
                name = f"{task_name(manifest, rec['task'])}: {rec['name']}"
                test = tests[rec["function"]] = GradedTest(
                    function=rec["function"], name=name, points=float(points),
                    limit=float(rec["time_limit"] or default_limit), visibility=visibility)
                if rec["points"] is None:
                    test.notes.append("(this test has no points marker; it counts 1 point)")
            test.cases.append(rec["nodeid"])
            test.needs_gpu = test.needs_gpu or bool(rec.get("gpu"))       # any case marked gpu: the function
            test.case_tasks[rec["nodeid"]] = rec["task"]
            tasks.setdefault(rec["function"], []).append(rec["task"])
        if reply["status"] != "exited" or not records:
            with open(output, errors="replace") as f:
                problems.append(f"collecting {target} failed ({reply}):\n{f.read()[-2000:]}")
    graded = list(tests.values())
    for t in graded:                                   # cases of several tasks: "HW1 1.2-1.7: test_..."
        numbers = sorted({k[len("task"):].replace("_", ".") for k in tasks[t.function] if k})
        if len(numbers) > 1:
            t.name = f"{manifest['name'].upper()} {numbers[0]}-{numbers[-1]}: {t.name.rsplit(': ', 1)[-1]}"
    names = [t.name for t in graded]
    for t in graded:                                   # same function name in public and hidden tests
        if names.count(t.name) > 1 and t.visibility == "visible":
            t.name += " (public)"
    return graded, problems

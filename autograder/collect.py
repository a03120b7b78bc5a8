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
import subprocess
import sys
import tempfile

from autograder.results import GradedTest

DEFAULT_LIMIT = 60.0
COLLECT_LIMIT = 180.0


JOB_ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTEST_ADDOPTS": ""}   # the caller's pytest options stay its own


def pytest_args(root: str, targets: list[str]) -> list[str]:
    """pytest arguments for a graded run of `targets` (node ids or files) in the kit copy `root`.

    Jobs run with PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 (JOB_ENV): the plugins they need are named
    here. Loading every installed plugin (anyio's imports its event-loop backends) cost 0.45 s of
    a 1.2 s job; a grading runs one job per test function. pytest's unraisableexception plugin
    (warnings about exceptions in __del__, which no grade reads) runs gc.collect() repeatedly at exit:
    0.06 s a job with the zygote's heap frozen, 0.26 s without.
    """
    return ["-p", "autograder.plugin", "-p", "pytest_timeout", "-p", "no:cacheprovider", "-p", "no:terminal",
            "-p", "no:unraisableexception", "-s",
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


def default_suites(manifest: dict, root: str) -> list[tuple[str, str]]:
    """The homework's test folders that exist in `root`: [(public, "visible"), (hidden, "after_published")]."""
    suites = [(manifest["public_tests"], "visible"), (manifest["hidden_tests"], "after_published")]
    return [s for s in suites if os.path.isdir(os.path.join(root, s[0]))]


def collect(runner, root: str, manifest: dict, suites: list[tuple[str, str]], scratch: str,
            default_limit: float = DEFAULT_LIMIT) -> tuple[list[GradedTest], list[str]]:
    """([GradedTest], [problems]) for `suites`, a list of (folder or file, visibility)."""
    listings: list[tuple[str, list[dict]]] = []
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
        listings.append((visibility, records))
        if reply["status"] != "exited" or not records:
            with open(output, errors="replace") as f:
                problems.append(f"collecting {target} failed ({reply}):\n{f.read()[-2000:]}")
    tests, errors = graded_tests(manifest, listings, default_limit)
    return tests, errors + problems


def graded_tests(manifest: dict, listings: list[tuple[str, list[dict]]],
                 default_limit: float = DEFAULT_LIMIT) -> tuple[list[GradedTest], list[str]]:
    """([GradedTest], [collection errors]) from the plugin's collection records, one list per suite
    with its visibility: what a grading grades, and what every table of points is computed from."""
    tests: dict[str, GradedTest] = {}
    tasks: dict[str, list] = {}                        # function -> each case's task marker
    problems: list[str] = []
    for visibility, records in listings:
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
            test.bound_to = tuple(dict.fromkeys(test.bound_to + tuple(rec.get("bound_to") or ())))
            test.case_tasks[rec["nodeid"]] = rec["task"]
            tasks.setdefault(rec["function"], []).append(rec["task"])
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


def collect_here(homework: str, root: str | None = None) -> tuple[list[GradedTest], list[str]]:
    """The graded tests of `homework` as a grading collects them, collected in the kit `root` itself with
    a plain `python -m pytest --collect-only` (nothing is run, so no sandbox or zygote): for the tables
    of points (tools.points, the kit's tests) without a grading session."""
    from tools.overlay import ROOT, homework_manifest
    root = root or ROOT
    manifest = homework_manifest(homework, root)
    with tempfile.TemporaryDirectory(prefix="collect-") as scratch:
        return collect(_Plain(root), root, manifest, default_suites(manifest, root), scratch)


class _Plain:
    """A runner for collection only: `python -m pytest ARGS` in `root`, as a job runs (JOB_ENV)."""

    def __init__(self, root: str):
        self.root = root

    def run(self, args: list[str], env: dict, output: str, limit: float) -> dict:
        with open(output, "wb") as out:
            try:
                proc = subprocess.run([sys.executable, "-m", "pytest", *args], cwd=self.root, stdout=out,
                                      stderr=subprocess.STDOUT, timeout=limit, stdin=subprocess.DEVNULL,
                                      env={**os.environ, **JOB_ENV, "PYTHONDONTWRITEBYTECODE": "1", **env})
            except subprocess.TimeoutExpired:
                return {"status": "timeout", "code": None}
        return {"status": "exited", "code": proc.returncode}

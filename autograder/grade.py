"""Grade one submission of a homework and write Gradescope's results.json.

    python -m autograder.grade hw1 SUBMISSION --out results.json
    python -m autograder.grade hw1 solutions          # CI: the reference scores full marks
    python -m autograder.grade hw1 stubs              # CI: the stubs score 0

SUBMISSION is a folder or a zip holding the homework's editable files (at their kit paths,
under one top folder, or flat). Steps:
  1. copy the pristine kit to a temporary folder (the grader's copy: stubs and tests, never the
     submission); start the runner there (a zygote that has imported torch, pytest and the
     runtime, in a network namespace of its own, or a fresh python per test with --no-zygote);
  2. collect the public and hidden tests there: one graded test per function;
  3. make the student's copy (no grader, solutions or hidden tests) and lay the submission's
     editable files over it; a file that is missing, refused or does not compile is replaced
     by its stub and reported in the "submission check" entry; scan the files (instructors);
  4. run each test function (autograder.jobs) with a wall-clock limit (time_limit marker, else
     --limit) and MINITORCH_DIST_DEADLINE set short; its code under test runs in a rank host in
     the sandbox (autograder.sandbox); kill every process it left;
  5. when every sandboxed process is gone: score = points * passed cases / cases; write
     results.json; print a table and a total.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import shutil
import sys
import tempfile
import time

from autograder import isolate
from autograder.collect import DEFAULT_LIMIT, JOB_ENV, collect, test_files
from autograder.jobs import run_all, task_order
from autograder.kit_copies import make_student_kit, open_interpreter, protect_secrets, seal
from autograder.results import results_json, summary_table, write_results
from autograder.runner import make_runner
from autograder.sandbox import Sandbox
from autograder.scan import format_findings, scan_submission
from autograder.submission import lay_submission
from tools.overlay import ROOT, copy_kit, homework_manifest
from tools.stubs import builds_on, lay_references

DEFAULT_DEADLINE = 10.0
MAX_RANK_OUTPUT = 8 << 20       # bytes of rank output a test process prints (the rest is cut, and said)


def grade(homework: str, submission: str, out: str | None = "results.json", *, zygote: bool = True,
          deadline: float = DEFAULT_DEADLINE, limit: float = DEFAULT_LIMIT, only: str | None = None,
          suites: list[tuple[str, str]] | None = None, quiet: bool = False, jobs: int = 1,
          sandbox: bool = True, namespaces: bool = True, limits: dict | None = None) -> dict:
    """Grade `submission` for `homework`; returns the results.json object (and writes it to `out`).

    jobs > 1 runs that many test functions at once, each zygote forking its own (zygote only).
    sandbox=False runs the rank hosts as this user with no sandbox (debugging); namespaces=False
    grades as in a container that refuses them (Gradescope's Docker may): every other layer stays.
    limits overrides some of sandbox.LIMITS ({"RLIMIT_CPU": 5}: the kit's own tests of a limit).
    """
    t0 = time.monotonic()
    manifest = homework_manifest(homework)
    if suites is None:
        suites = [(manifest["public_tests"], "visible"), (manifest["hidden_tests"], "after_published")]
        suites = [s for s in suites if os.path.isdir(os.path.join(ROOT, s[0]))]
    token = secrets.token_hex(8)
    kit = tempfile.mkdtemp(prefix="autograder-kit-")            # the grader's copy: stubs, hidden tests
    records = tempfile.mkdtemp(prefix="autograder-run-")        # records and outputs: root only
    outside = tempfile.mkdtemp(prefix="autograder-student-")    # the student kit and test scratch
    os.chmod(outside, 0o711)
    student_kit, scratch_root = os.path.join(outside, "kit"), os.path.join(outside, "scratch")
    os.makedirs(scratch_root, mode=0o711)
    os.chmod(scratch_root, 0o711)
    runners, boxes, layers = [], [], {}
    check, findings = None, ""
    try:
        copy_kit(kit)
        if sandbox and isolate_root():
            layers["files"] = protect_secrets(ROOT)
            opened = open_interpreter()
            if opened:
                layers["files"] += f"; search permission given on {', '.join(opened)} so the sandbox can run Python"
        env = dict(os.environ, PYTHONPATH=kit, PYTHONDONTWRITEBYTECODE="1", **{isolate.TOKEN_VAR: token},
                   AUTOGRADER_PRELOAD=",".join(manifest.get("preload", [])), **JOB_ENV)
        env.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")     # c10d's hostname warnings in a network namespace
        env["MINITORCH_DIST_MAX_OUTPUT"] = str(MAX_RANK_OUTPUT)
        env["AUTOGRADER_NETNS"] = "1" if sandbox and namespaces and isolate_root() else "0"
        runners.append(make_runner(kit, env, zygote=zygote))
        tests, problems = collect(runners[0], kit, manifest, suites, records, limit)
        if only:
            everything, tests = tests, [t for t in tests if re.search(only, t.name)]
            if everything and not tests:
                raise ValueError(f"--only {only!r} matches none of the {len(everything)} tests; their names look "
                                 f"like {everything[0].name!r} (the regular expression is searched in them)")
        tests.sort(key=task_order)
        hidden = [f for target, vis in suites if vis != "visible" for f in test_files(kit, target)]
        make_student_kit(kit, student_kit, exclude=hidden + [os.path.join(os.path.dirname(f), "conftest.py")
                                                            for f in hidden])
        check = lay_submission(submission, student_kit, manifest)
        lay_references(student_kit, builds_on(manifest))      # earlier homeworks' reference code it runs on
        findings = format_findings(scan_submission(student_kit, check.overlaid))
        replaced = check.replaced_tasks()
        runners += [make_runner(kit, env, zygote=True) for _ in range(max(1, jobs) - 1 if zygote else 0)]
        taken: set[int] = set()
        for _ in runners:                     # a uid per runner; the first one's gid reads the student kit
            boxes.append(Sandbox.create(kit, student_kit, scratch_root, boxes[0].gid if boxes else None, taken,
                                        own_user=sandbox, limits=limits))
        seal(student_kit, boxes[0].gid)
        layers.update(boxes[0].layers)
        if boxes[0].uid is not None:
            layers["files"] = layers.get("files", "") + (
                "; the student kit copy is root-owned and group-readable, the grader's copy, records and "
                "results root-only, a private scratch folder per test")
        else:
            layers["files"] = "unavailable: no user of its own, so file permissions do not keep it out"
        run_all(runners, tests, kit, records, deadline, replaced, quiet, boxes, prefixes=(student_kit,))
        layers["network"] = getattr(runners[0], "network", "unavailable") if namespaces else \
            "unavailable: switched off (--no-namespaces)"
    finally:
        for runner in runners:
            runner.close()
        escaped = sum(box.kill_all() for box in boxes)
        for box in boxes:
            box.release()
        left = isolate.sweep(token)
        for path in (kit, records, outside):
            shutil.rmtree(path, ignore_errors=True)
    report = check.report()
    if left or escaped:
        report += f"\n\n{len(left) + escaped} process(es) outlived their tests and were killed at the end."
    check_entry = {"name": "submission check", "score": 0, "max_score": 0,
                   "status": "passed" if check.ok else "failed",
                   "output": report, "output_format": "text", "visibility": "visible"}
    elapsed = time.monotonic() - t0
    title = f"{manifest['name']} grade of {submission}"
    results = results_json(tests, check_entry, elapsed, title)
    results["extra_data"] = {"submission": submission, "swept_at_end": len(left) + escaped,
                             "runner": "zygote" if zygote else "subprocess", "sandbox": layers,
                             "collection_problems": problems, "static_scan": findings,
                             "sandbox_uids": [box.uid for box in boxes if box.uid is not None]}
    if out:
        write_results(out, results)
    if not quiet:
        print(report if not check.ok else f"submission check: ok ({len(check.overlaid)} files)")
        if problems:
            print("Problems while collecting the tests:\n" + "\n".join(problems))
        print(f"static scan of the submission (instructors only):\n{findings}")
        print(summary_table(tests, title, elapsed))
    return results


def isolate_root() -> bool:
    return os.geteuid() == 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("homework", help="e.g. hw1 (assignments/<homework>/homework.json)")
    parser.add_argument("submission", help='a folder or zip of the editable files, or "solutions" / "stubs"')
    parser.add_argument("--out", default="results.json", help="where to write results.json (default: %(default)s)")
    parser.add_argument("--no-zygote", action="store_true", help="start a fresh python per test (slower)")
    parser.add_argument("--deadline", type=float, default=DEFAULT_DEADLINE,
                        help="MINITORCH_DIST_DEADLINE in the tests: per-op deadlock deadline (default %(default)s s)")
    parser.add_argument("--limit", type=float, default=DEFAULT_LIMIT,
                        help="wall-clock limit per test function without a time_limit marker (default %(default)s s)")
    parser.add_argument("--only", help="grade only tests whose name matches this regular expression")
    parser.add_argument("--tests", action="append", metavar="PATH[:VISIBILITY]",
                        help="grade these test folders/files instead of the homework's (visibility default "
                             "after_published); repeatable")
    parser.add_argument("--quiet", action="store_true", help="print only the total line")
    parser.add_argument("--no-sandbox", action="store_true",
                        help="run student code as this user without the sandbox (debugging only)")
    parser.add_argument("--no-namespaces", action="store_true",
                        help="no network namespace, as in a container that refuses them (the other layers stay)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="test functions run at once (zygote runner only; default %(default)s)")
    args = parser.parse_args(argv)
    suites = None
    if args.tests:
        suites = [tuple(t.split(":", 1)) if ":" in t else (t, "after_published") for t in args.tests]
    try:
        results = grade(args.homework, args.submission, args.out, zygote=not args.no_zygote, deadline=args.deadline,
                        limit=args.limit, only=args.only, suites=suites, quiet=args.quiet,
                        jobs=args.jobs, sandbox=not args.no_sandbox,
                        namespaces=not args.no_namespaces)
    except ValueError as exc:
        print(f"autograder: {exc}", file=sys.stderr)
        return 2
    top = sum(t["max_score"] for t in results["tests"])
    print(f"TOTAL {args.homework} {args.submission}: {results['score']:.2f} / {top:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

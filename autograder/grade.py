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
import sys

from autograder.collect import DEFAULT_LIMIT
from autograder.leftovers import end_on_sigterm
from autograder.options import add_score_options, score_options
from autograder.results import out_of, write_results
from autograder.session import DEFAULT_DEADLINE, MAX_RANK_OUTPUT, GradingSession  # noqa: F401 (re-exported)


def grade(homework: str, submission: str, out: str | None = "results.json", *, zygote: bool = True,
          deadline: float = DEFAULT_DEADLINE, limit: float = DEFAULT_LIMIT, only: str | None = None,
          suites: list[tuple[str, str]] | None = None, quiet: bool = False, jobs: int = 1,
          sandbox: bool = True, namespaces: bool = True, limits: dict | None = None, device: str = "auto") -> dict:
    """Grade `submission` for `homework`; returns the results.json object (and writes it to `out`).

    jobs > 1 runs that many test functions at once, each zygote forking its own (zygote only).
    sandbox=False runs the rank hosts as this user with no sandbox (debugging); namespaces=False
    grades as in a container that refuses them (Gradescope's Docker may): every other layer stays.
    limits overrides some of sandbox.LIMITS ({"RLIMIT_CPU": 5}: the kit's own tests of a limit).
    A grading session of one submission (autograder.session); results.json is written after every
    process of the sandbox uids is gone. device: "auto", "cpu" or "cuda" (see the module doc).
    """
    session = GradingSession(homework, zygote=zygote, deadline=deadline, limit=limit, suites=suites, quiet=quiet,
                             jobs=jobs, sandbox=sandbox, namespaces=namespaces, limits=limits, device=device)
    try:
        results = session.grade(submission, out=None, only=only, show=False)
    finally:
        left = session.close()
    if left:
        results["extra_data"]["swept_at_end"] += left
        check = results["tests"][0]
        check["output"] += f"\n\n{left} process(es) outlived their tests and were killed at the end."
    if out:
        write_results(out, results)
    if not quiet:
        session.print_summary(results)
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("homework", help="e.g. hw1 (assignments/<homework>/homework.json)")
    parser.add_argument("submission", help='a folder or zip of the editable files, or "solutions" / "stubs"')
    parser.add_argument("--out", default="results.json", help="where to write results.json (default: %(default)s)")
    parser.add_argument("--no-zygote", action="store_true", help="start a fresh python per test (slower)")
    add_score_options(parser)                       # --deadline --limit --only --tests --device
    parser.add_argument("--quiet", action="store_true", help="print only the total line")
    parser.add_argument("--no-sandbox", action="store_true",
                        help="run student code as this user without the sandbox (debugging only)")
    parser.add_argument("--no-namespaces", action="store_true",
                        help="no network namespace, as in a container that refuses them (the other layers stay)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="test functions run at once (zygote runner only; default %(default)s)")
    args = parser.parse_args(argv)
    try:
        with end_on_sigterm():                      # a timeout's SIGTERM: the session closes, nothing is left
            results = grade(args.homework, args.submission, args.out, zygote=not args.no_zygote, quiet=args.quiet,
                            jobs=args.jobs, sandbox=not args.no_sandbox, namespaces=not args.no_namespaces,
                            **score_options(args))
    except ValueError as exc:
        print(f"autograder: {exc}", file=sys.stderr)
        return 2
    print(f"TOTAL {args.homework} {args.submission}: {results['score']:.2f} / {out_of(results['extra_data'])} "
          f"(on {results['extra_data']['device']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

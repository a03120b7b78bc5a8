"""The mutation suite: grade every seeded bug of a homework and print what each costs.

    .venv/bin/python -m autograder.mutants hw1                       # every bug of homework 1, a table
    .venv/bin/python -m autograder.mutants hw1 --bug naive_ignores_op --details
    .venv/bin/python -m autograder.mutants hw2 --jobs 2 --out table.txt --write-hints
    .venv/bin/python -m autograder.mutants new hw1 NAME --task 1.4 --what "one line" EDITED_FILE...

A bug is one file, autograder/mutants/<homework>/<name>.patch (autograder.mutants.patches). Each is
laid over a temporary copy of the solutions and graded by the real grader on its task's tests; the
table lists the points it loses (and that share of its task), the tests that caught it and the first
message a student reads. Exit status 1 when a bug is missed, costs less than 25% of its task or no
longer applies. `new` writes a bug file from edited copies of solution files (the paths must end like
the kit paths, e.g. .../collectives/all_reduce.py).
"""

from __future__ import annotations

import argparse
import os
import sys

from autograder.mutants.grading import FAIR_SHARE, grade_bug, table
from autograder.mutants.patches import PatchError, load_bugs, write_bug, write_hint
from autograder.session import GradingSession
from tools.overlay import homework_manifest


def run(argv) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.mutants", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("homework", help="hw1, hw2, ... (bugs in autograder/mutants/<homework>/)")
    parser.add_argument("--bug", action="append", help="grade only this bug (repeatable)")
    parser.add_argument("--jobs", type=int, default=2, help="test functions run at once (default %(default)s)")
    parser.add_argument("--details", action="store_true", help="print each bug's whole first message")
    parser.add_argument("--out", help="also write the table to this file")
    parser.add_argument("--write-hints", action="store_true",
                        help="record in each caught bug's file the first case that failed (caught_by), which CI runs first")
    args = parser.parse_args(argv)
    try:
        bugs = load_bugs(args.homework, args.bug)
    except PatchError as exc:
        print(f"mutants: {exc}", file=sys.stderr)
        return 2
    if not bugs:
        print(f"mutants: no bugs in autograder/mutants/{args.homework}/", file=sys.stderr)
        return 2
    verdicts = []
    with GradingSession(args.homework, jobs=args.jobs, quiet=True) as session:
        for n, bug in enumerate(bugs, 1):
            v = grade_bug(session, bug)
            verdicts.append(v)
            state = "ERROR" if v.error else (f"lost {v.lost:g}/{v.task_max:g}" if v.caught else "MISSED")
            print(f"[{n}/{len(bugs)}] {bug.name} ({bug.task}): {state}, {v.seconds:.1f} s", file=sys.stderr, flush=True)
    if args.write_hints:
        for v in verdicts:
            if v.first_case and v.first_case != v.bug.caught_by:
                write_hint(v.bug, v.first_case)
    text = table(verdicts)
    if args.details:
        text += "\n" + "\n".join(f"\n== {v.bug.name} ({v.bug.task}): {v.bug.what}\n{v.message or v.error}"
                                 for v in verdicts)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    bad = [v for v in verdicts if v.error or not v.caught or v.share < FAIR_SHARE]
    return 1 if bad else 0


def new(argv) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.mutants new")
    parser.add_argument("homework")
    parser.add_argument("name", help="the bug's name: lowercase, digits, _ (its file name)")
    parser.add_argument("--task", required=True, help="the task it belongs to, e.g. 1.4")
    parser.add_argument("--what", required=True, help="one line on what it gets wrong")
    parser.add_argument("files", nargs="+", help="edited copies of solution files")
    args = parser.parse_args(argv)
    edited = {}
    for path in args.files:
        norm = os.path.abspath(path).replace(os.sep, "/")
        rel = [e for e in homework_manifest(args.homework)["editable"] if norm.endswith("/" + e)
               or norm.endswith("/" + os.path.basename(e)) and len(args.files) == 1]
        if not rel:
            print(f"mutants: {path} is not one of {args.homework}'s editable files", file=sys.stderr)
            return 2
        with open(path) as f:
            edited[rel[0]] = f.read()
    try:
        print(write_bug(args.homework, args.name, args.task, args.what, edited))
    except PatchError as exc:
        print(f"mutants: {exc}", file=sys.stderr)
        return 2
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    return new(argv[1:]) if argv[:1] == ["new"] else run(argv)


if __name__ == "__main__":
    sys.exit(main())

"""The grading options that change a score, one definition for autograder.grade and autograder.batch
(batch records them in its resume key, autograder/resume.py, so a change regrades).

    add_score_options(parser)          # --only --tests --device --limit --deadline
    options = score_options(args)      # {"only", "suites", "device", "limit", "deadline"}: grade()'s keywords
"""

from __future__ import annotations

import argparse

from autograder.collect import DEFAULT_LIMIT
from autograder.devices import CHOICES
from autograder.session import DEFAULT_DEADLINE

SCORE_OPTIONS = ("only", "suites", "device", "limit", "deadline")


def add_score_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--deadline", type=float, default=DEFAULT_DEADLINE,
                        help="MINITORCH_DIST_DEADLINE in the tests: per-op deadlock deadline (default %(default)s s)")
    parser.add_argument("--limit", type=float, default=DEFAULT_LIMIT,
                        help="wall-clock limit per test function without a time_limit marker (default %(default)s s)")
    parser.add_argument("--only", help="grade only tests whose name matches this regular expression (a quick pass)")
    parser.add_argument("--tests", action="append", metavar="PATH[:VISIBILITY]",
                        help="grade these test folders/files instead of the homework's (visibility default "
                             "after_published); repeatable")
    parser.add_argument("--device", choices=CHOICES, default="auto",
                        help="the device the tests' ranks run on: auto (cuda where torch sees a GPU, else cpu), "
                             "cpu (tests marked gpu are reported not run) or cuda (default %(default)s)")


def suites_of(tests: list[str] | None) -> list[tuple[str, str]] | None:
    """--tests PATH[:VISIBILITY] values as (path, visibility) suites; None (the homework's own) for none."""
    if not tests:
        return None
    return [tuple(t.split(":", 1)) if ":" in t else (t, "after_published") for t in tests]


def score_options(args: argparse.Namespace) -> dict:
    """The parsed score options as grade()'s keyword arguments (SCORE_OPTIONS)."""
    return {"only": args.only, "suites": suites_of(args.tests), "device": args.device, "limit": args.limit,
            "deadline": args.deadline}


def as_arguments(options: dict) -> list[str]:
    """score_options(...) back as command-line arguments (batch hands them to its workers)."""
    out = ["--device", options["device"], "--limit", repr(options["limit"]), "--deadline", repr(options["deadline"])]
    out += ["--only", options["only"]] if options["only"] else []
    for path, visibility in options["suites"] or []:
        out += ["--tests", f"{path}:{visibility}"]
    return out

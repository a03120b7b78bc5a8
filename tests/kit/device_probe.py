"""Run homework rank code under the device guard (tests/kit/device_guard.py) and print what it found.

    python -m tools.overlay solutions -- python -m tests.kit.device_probe hw2 hw5     # a JSON line

For each homework: its public cases, the first of each kind, on 2 gloo ranks in one launch, every
rank under DeviceGuard: a tensor allocated without device= that meets group.device's tensors, or
goes into a message, fails the case. Prints {"hw2": null | "the rank's error", ...}; the kit test
(test_device_generic.py) reads it. Run from a kit copy with an implementation laid over it.
"""

from __future__ import annotations

import importlib
import json
import sys

from assignments.common.rank_runs import try_launch
from tests.kit.device_guard import guarded

SKIP_KINDS = {"deadlock"}           # hangs on purpose until its deadline: nothing is allocated there


def representative(hw: str, p: int = 2) -> list:
    """The public cases of `hw` (those for p ranks, then those for 3), the first of each kind."""
    public = importlib.import_module(f"assignments.{hw}.tests.test_{hw}_public")
    seen, cases = set(), []
    for case in public.public_cases(p) + public.public_cases(3):
        if case.kind not in seen and case.kind not in SKIP_KINDS:
            seen.add(case.kind)
            cases.append(case)
    return cases


def probe(hw: str, p: int = 2) -> str | None:
    """None when every representative case ran clean on p ranks, else the first rank's error."""
    ranks = importlib.import_module(f"assignments.{hw}.tests.{hw}_ranks")
    launch = dict(getattr(importlib.import_module(f"assignments.{hw}.tests.{hw}_harness"), f"{hw.upper()}_LAUNCH"))
    launch["collectives"] = True                      # hw5's bonus 5.6 (a grid) averages with all_reduce
    result, err = try_launch(guarded, p, (ranks.run_cases_on_rank, representative(hw, p)), **launch)
    if err is not None:
        return f"{err.exc_type}: {err.message}"
    problems = [r["error"] for rank in result for r in rank if isinstance(r, dict) and "error" in r]
    return problems[0] if problems else None


def main(argv: list[str]) -> int:
    from minitorch_dist import shutdown
    try:
        print(json.dumps({hw: probe(hw) for hw in argv}))
    finally:
        shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

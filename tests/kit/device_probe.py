"""Run homework rank code under the device guard (tests/kit/device_guard.py) and print what it found.

    python -m tools.overlay solutions -- python -m tests.kit.device_probe hw2 hw5       # a JSON line
    ... python -m tests.kit.device_probe --no-guard --backend nccl --save out.pt hw2    # on GPUs

For each homework: its public cases (those for 2 ranks, then those for 3), the first of each kind,
on 2 gloo ranks in one launch, every rank under DeviceGuard: a tensor allocated without device=
that meets group.device's tensors, or goes into a message, fails the case. Prints
"device_probe: {"hw2": null | "the rank's error", ...}"; the kit test (test_device_generic.py)
reads it. --no-guard runs the same cases as they are (on --backend and --device: a GPU smoke run),
--save keeps the case kinds and what the ranks returned (torch.save) to compare runs. Run it from a kit copy with an
implementation laid over it.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys

from assignments.common.rank_inputs import for_ranks
from assignments.common.rank_runs import try_launch
from tests.kit.device_guard import guarded

P = 2
MARK = "device_probe:"             # the line of the result, among the ranks' warnings
SKIP_KINDS = {"deadlock",           # hangs on purpose until its deadline: nothing is allocated there
              "fsdp_prefetch", "fsdp_ckpt"}     # fsdp's allocations again, at 2-3 s each


def representative(hw: str, p: int = P, kinds=None) -> list:
    """The public cases of `hw` (those for p ranks, then those for 3, then the bonus suites' on gloo),
    the first of each kind (of `kinds` only, when given)."""
    from assignments.common.case_suites import Suite
    public = importlib.import_module(f"assignments.{hw}.tests.test_{hw}_public")
    listed = public.public_cases(p) + public.public_cases(3)
    for suite in vars(public).values():
        if isinstance(suite, Suite) and suite.backend == "gloo" and suite.make_cases is not public.public_cases:
            listed += suite.make_cases(p)
    seen, cases = set(), []
    for case in listed:
        if case.kind not in seen and case.kind not in SKIP_KINDS and (kinds is None or case.kind in kinds):
            seen.add(case.kind)
            cases.append(case)
    return cases


def own_inputs(hw: str, cases: list, p: int) -> list | None:
    """launch()'s rank_args when the homework's harness makes each rank's inputs in the test process
    (assignments/<hw>/tests/<hw>_inputs.py: make_inputs(case, p)), else None."""
    try:
        maker = importlib.import_module(f"assignments.{hw}.tests.{hw}_inputs").make_inputs
    except ModuleNotFoundError:
        return None
    return for_ranks([maker(case, p) for case in cases])


def probe(hw: str, guard: bool = True, backend: str = "gloo", p: int = P, kinds=None) -> tuple[str | None, dict | None]:
    """(None, {"kinds": the cases' kinds, "ranks": what each rank returned, case by case}) when every
    representative case (of `kinds`) ran clean on p ranks, else (the first error, None)."""
    ranks = importlib.import_module(f"assignments.{hw}.tests.{hw}_ranks")
    launch = dict(getattr(importlib.import_module(f"assignments.{hw}.tests.{hw}_harness"), f"{hw.upper()}_LAUNCH"))
    launch["collectives"] = True                      # hw5's bonus 5.6 (a grid) averages with all_reduce
    cases = representative(hw, p, kinds)
    fn, args = (guarded, (ranks.run_cases_on_rank, cases)) if guard else (ranks.run_cases_on_rank, (cases,))
    result, err = try_launch(fn, p, args, backend, rank_args=own_inputs(hw, cases, p), **launch)
    if err is not None:
        return f"{err.exc_type}: {err.message}", None
    problems = [r["error"] for rank in result for r in rank if isinstance(r, dict) and "error" in r]
    return (problems[0], None) if problems else (None, {"kinds": [c.kind for c in cases], "ranks": list(result)})


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("homeworks", nargs="+")
    parser.add_argument("--no-guard", action="store_true", help="run the cases as they are (a GPU smoke run)")
    parser.add_argument("--backend", default="gloo")
    parser.add_argument("--device", default=None, help="cpu or cuda (MINITORCH_DIST_DEVICE of the ranks)")
    parser.add_argument("--save", default=None, help="torch.save {homework: {'kinds': [...], 'ranks': what they returned}} here")
    parser.add_argument("--kinds", default=None, help="only the cases of these kinds (comma-separated)")
    opts = parser.parse_args(argv)
    if opts.device is not None:
        os.environ["MINITORCH_DIST_DEVICE"] = opts.device
    from minitorch_dist import shutdown
    errors, returned = {}, {}
    try:
        for hw in opts.homeworks:
            errors[hw], returned[hw] = probe(hw, guard=not opts.no_guard, backend=opts.backend,
                                             kinds=opts.kinds and set(opts.kinds.split(",")))
    finally:
        shutdown()
    if opts.save:
        import torch
        torch.save(returned, opts.save)
    print(MARK, json.dumps(errors), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Homework 4 test harness: run cases on ranks and bring back what they computed.

    python -m pytest assignments/hw4/tests                 # every public test
    python -m pytest assignments/hw4/tests -m task4_3      # one task's tests

A test describes a run as a Case (hw4_setup.py: which piece). The harness runs a list of cases on
p ranks (the tensor-parallel group) in one launch, gloo by default (sim and mpi too), with the
provided collectives on. Each rank builds its piece from the same dense model, runs it forward and
backward, and returns its output, its input's and parameters' gradients and what it communicated
in each pass (hw4_ranks.py); the verdict is taken in the grading process (hw4_checks.py) against
the dense model.

Files: hw4_setup.py (configs, dense model, inputs, the dense reference), hw4_ranks.py (rank code),
this file (launching, suites), hw4_checks.py (the verdict), ../../common/rank_runs.py (batched
launches, the stub memo, the judge; shared by every homework). A case that raises on a rank stops
the launch; that case records the error and the others run again. A stub's NotImplementedError is
remembered per kind of piece: that kind's later cases fail at once without a launch (per kind, not
per task: the model case is task 4.4 but fails on a 4.3 stub, and a task may mix stubs and
finished pieces).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import rank_runs
from hw4_ranks import run_cases_on_rank
from hw4_setup import Case

from minitorch_dist import SimNetwork

HW4_LAUNCH = {"collectives": True, "trace": False}     # the provided collectives; counters are enough
__all__ = ["Case", "Outcome", "run_cases", "Suite"]


@dataclass
class Outcome:
    """What p ranks did with one case: ranks[r] is rank r's report (a dict); error is None when
    every rank returned."""

    case: Case
    p: int
    backend: str
    ranks: list = field(default_factory=list)
    error: str | None = None

    @property
    def label(self) -> str:
        return f"{self.case.describe(self.p)} on {self.backend}"


def run_cases(cases, p: int, backend: str = "gloo", network: SimNetwork | None = None) -> list[Outcome]:
    """Run `cases` on p ranks in one launch; one Outcome per case, in order (errors recorded, never raised)."""
    cases = list(cases)
    got = rank_runs.run_batched(run_cases_on_rank, cases, p, key=lambda c: c.kind, describe=Case.describe,
                                backend=backend, network=network, **HW4_LAUNCH)
    return [Outcome(case, p, backend, error=res[1]) if res[0] == "error" else Outcome(case, p, backend, res[1])
            for case, res in zip(cases, got)]


class Suite:
    """The cases of a set of tests, run on first use once per world size and kept.

    make_cases(p) -> [Case]; outcomes(p, kinds, tag) -> the Outcomes at p of those kinds (and tag).
    Only the cases of the selected tasks run (`pytest -m task4_2` runs no attention case).
    """

    def __init__(self, make_cases, backend: str = "gloo", network: SimNetwork | None = None):
        self.make_cases, self.backend, self.network = make_cases, backend, network
        self._runs: dict[int, list[Outcome]] = {}

    def outcomes(self, p: int, kinds, tag: str | None = None) -> list[Outcome]:
        kinds = (kinds,) if isinstance(kinds, str) else tuple(kinds)
        if p not in self._runs:
            cases = [c for c in self.make_cases(p) if rank_runs.selected(c.task)]
            self._runs[p] = run_cases(cases, p, self.backend, self.network)
        found = [o for o in self._runs[p] if o.case.kind in kinds and (tag is None or o.case.tag == tag)]
        if not found:
            raise LookupError(f"harness: no case of {kinds} (tag {tag!r}) at p={p} on {self.backend}; "
                              f"selected tasks: {rank_runs.selected_tasks()}")
        return found

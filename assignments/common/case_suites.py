"""What the harnesses of homeworks 2, 3 and 4 share on top of rank_runs: an Outcome per case, a batched run
of cases into Outcomes, and the Suite that runs a test file's cases once per world size.

    run_cases, Suite = case_suites.bind(run_cases_on_rank, collectives=True, trace=False)   # a harness
    SUITE = Suite(make_cases)                  # in its tests: SUITE.outcomes(p, "kind", tag)

A case has `kind` (the piece it exercises, also the stub memo's key), `task`, `tag` and
`describe(p)`.

Inputs: a harness that makes each rank's input of a case in this process (from the grading's secret,
rank_inputs.py) binds `make_inputs(case, p) -> [rank 0's input, ..., rank p-1's]`; each rank then
receives only its own (rank_fn(group, cases, own)) and the Outcome keeps all of them (`inputs`), for
the verdict to compute what the ranks should hold.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from assignments.common import rank_runs
from minitorch_dist import SimNetwork


@dataclass
class Outcome:
    """What p ranks did with one case: ranks[r] is rank r's report (a dict); error is None when
    every rank returned."""

    case: object
    p: int
    backend: str
    ranks: list = field(default_factory=list)
    error: str | None = None
    inputs: list = field(default_factory=list)     # each rank's input (made here, make_inputs), or []
    sim_time: float | None = None                  # on sim, the run's simulated time when the case ran alone

    @property
    def label(self) -> str:
        return f"{self.case.describe(self.p)} on {self.backend}"


def run_outcomes(rank_fn, cases, p: int, backend: str, network: SimNetwork | None, make_inputs=None,
                 **launch) -> list[Outcome]:
    """Run `cases` on p ranks in one launch (rank_runs.run_batched, keyed by kind); one Outcome per
    case, in order (errors recorded, never raised). make_inputs(case, p): every rank's input of a
    case, made here; each rank is sent its own only."""
    cases = list(cases)
    inputs = None if make_inputs is None else [make_inputs(case, p) for case in cases]
    got = rank_runs.run_batched(rank_fn, cases, p, key=lambda c: c.kind, describe=lambda c, q: c.describe(q),
                                backend=backend, network=network, inputs=inputs, **launch)
    kept = inputs or [[] for _ in cases]
    return [Outcome(case, p, backend, error=res[1], inputs=xs) if res[0] == "error"
            else Outcome(case, p, backend, res[1], inputs=xs, sim_time=res[2]) for case, xs, res in zip(cases, kept, got)]


class Suite:
    """The cases of a set of tests, run on first use once per world size and kept.

    make_cases(p) -> [Case]; outcomes(p, kinds, tag) -> the Outcomes at p of those kinds (and tag).
    Only the cases of the selected tasks run (`pytest -m task2_4` runs no parameter-server case).
    alone=True: each case in a launch of its own (on sim, its Outcome then has the run's sim_time,
    which in a grading is the engine's clock: minitorch_dist/runtime/sim/processes.py).
    Subclasses set run_cases.
    """

    run_cases = None    # staticmethod: (cases, p, backend, network) -> [Outcome]

    def __init__(self, make_cases, backend: str = "gloo", network: SimNetwork | None = None, alone: bool = False):
        self.make_cases, self.backend, self.network, self.alone = make_cases, backend, network, alone
        self._runs: dict[int, list[Outcome]] = {}

    def outcomes(self, p: int, kinds, tag: str | None = None) -> list[Outcome]:
        kinds = (kinds,) if isinstance(kinds, str) else tuple(kinds)
        if p not in self._runs:
            cases = [c for c in self.make_cases(p) if rank_runs.selected(c.task)]
            batches = [[c] for c in cases] if self.alone else [cases]
            self._runs[p] = [o for batch in batches for o in self.run_cases(batch, p, self.backend, self.network)]
        found = [o for o in self._runs[p] if o.case.kind in kinds and (tag is None or o.case.tag == tag)]
        if not found:
            raise LookupError(f"harness: no case of {kinds} (tag {tag!r}) at p={p} on {self.backend}; "
                              f"selected tasks: {rank_runs.selected_tasks()}")
        return found


def bind(rank_fn, make_inputs=None, **launch):
    """(run_cases, Suite) of a homework: its rank code `rank_fn(group, cases)` (with make_inputs:
    `rank_fn(group, cases, own)`, own = this rank's input of each case) and launch options.

    run_cases(cases, p, backend="gloo", network=None) -> [Outcome], one launch per batch; Suite is
    a Suite subclass that runs its cases with it.
    """
    def run_cases(cases, p: int, backend: str = "gloo", network: SimNetwork | None = None) -> list[Outcome]:
        """Run `cases` on p ranks in one launch; one Outcome per case, in order (errors recorded, never raised)."""
        return run_outcomes(rank_fn, cases, p, backend, network, make_inputs, **launch)

    class BoundSuite(Suite):
        """The cases of a set of tests, run on first use once per world size and kept."""

    BoundSuite.run_cases = staticmethod(run_cases)
    return run_cases, BoundSuite


def counted_by(fields: dict, parts, loose=None, besides=None, slack=None):
    """run_batched's `counted` for a harness whose reports hold counter snapshots: parts(case, report)
    -> the report's snapshot dicts that together cover the case (their sum must be the launch's
    counters: nothing moved out of the scored part or into another case), fields {key: Counters ->
    int}; loose(case) -> keys that may fall short of the counters (the case also communicates outside
    the snapshots), default none. besides(case, rank, p) -> what rank's run does outside its report's
    snapshots, known in this process (the harness's own: a model's broadcast at construction), added
    to them; slack(case, rank, p) -> {key: n}: that key may fall short of the counters by at most n
    (framing a correct run may add there, which the grader cannot know)."""
    def counted(case, per_rank: list, counters: list) -> str | None:
        p = len(per_rank)
        for r, (rep, c) in enumerate(zip(per_rank, counters)):
            snaps = parts(case, rep)
            if snaps is None:
                continue
            if besides is not None:
                snaps = [*snaps, besides(case, r, p)]
            short = loose(case) if loose is not None else ()
            room = slack(case, r, p) if slack is not None else {}
            wrong = []
            for k, of in fields.items():
                got, run = sum(s.get(k, 0) for s in snaps), of(c)
                if got != run and not (k in short and 0 <= got <= run) and not (0 <= run - got <= room.get(k, 0)):
                    wrong.append(f"{k} {got} (the run's counters: {run})")
            if wrong:
                return (f"rank {r} reported {', '.join(wrong)}: a case's counts must be its run's, which the "
                        f"grader checks against the kernel. Communicate only through `group` and leave its "
                        f"counters alone.")
        return None
    return counted

"""What every homework's test harness shares: run a batch of cases on ranks, bring back what they
computed, and turn failures into short feedback. Verdicts are not taken here (each homework's
*_checks.py takes them, in the grading process, from what the ranks returned).

    results = run_batched(rank_fn, cases, p, key=lambda c: c.fn)    # grading process
    run_case_list(group, cases, run_one, key)                        # rank side (inside rank_fn)
    run_batched(..., inputs=[[x_rank0, x_rank1, ...] per case])      # each rank gets its own inputs only

A batch runs every case in one launch (a launch on a warm pool costs milliseconds, a new world
size about half a second). A case that raises on a rank stops the launch; that case gets the
error and the rest of the batch runs again, so one failing case does not hide the others. A stub's
NotImplementedError is remembered per key (NOT_IMPLEMENTED): that key's later cases fail at once,
in this launch and in every later one, without running.

Student code runs on the ranks only: under the autograder, every launch (sim included) is started
by the sandbox's rank host and what comes back is plain data. Rank functions are pickled by
reference, so the harness modules are imported by full name (assignments.common.rank_runs,
assignments.hw1.tests.hw1_ranks, ...) from the kit root, which ranks can import. A failing case's
exception is registered as plain data (CaseFailed) so its fields come back.

Inputs: a harness that makes its cases' inputs in the test process (rank_inputs.py: from a secret,
so that no rank can rebuild another's) passes them as `inputs`; each launch sends every rank only
its own (launch's rank_args), and run_case_list hands run_one that rank's input of the case.
"""

from __future__ import annotations

import copy
import os
import traceback

import torch

from assignments.common.rank_inputs import for_ranks
from assignments.common.wire_checks import joined_subgroups, lone_allowance, wire_problems  # noqa: F401 (re-exported)
from assignments.common.verdicts import (MAX_SHOWN, STUB, fail, judge, only_stub_errors,  # noqa: F401 (re-exported)
                                         select_tasks, selected, selected_tasks)
from minitorch_dist import LaunchError, PeerFailedError, RankError, SimNetwork, launch, shutdown
from minitorch_dist.runtime.launching.plain import plain_record
from minitorch_dist.runtime.observe.run_meter import VAR as KERNEL_TRAFFIC_VAR

DEFAULT_DEADLINE = 10.0    # seconds a blocking op may wait (MINITORCH_DIST_DEADLINE overrides it)
RUN_TIMEOUT = 180.0        # wall-clock limit of one launch (gloo/mpi), for code stuck outside comm ops
MAX_FAILURES_PER_KEY = 3   # after this many failed cases of one key (one deadlock), its others are not run

# key (a function or task) -> the stub's "NotImplementedError: ..." line; its later cases are not run
NOT_IMPLEMENTED: dict[str, str] = {}


# -- on the ranks ---------------------------------------------------------------------------
@plain_record
class CaseFailed(Exception):
    """Raised on a rank when case `index` raised: stops the launch and names the case."""

    def __init__(self, index: int, exc_type: str, message: str, where: str = ""):
        super().__init__(index, exc_type, message, where)
        self.index, self.exc_type, self.message, self.where = index, exc_type, message, where

    def __str__(self) -> str:
        return f"case {self.index}: {self.exc_type}: {self.message}"


def student_frames(exc: BaseException, harness_suffix: str = "_ranks.py") -> str:
    """The last few frames of the traceback, without the harness, the runtime and torch's own frames
    (module.py, run_backward): what is left points at the student's lines."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not f.filename.endswith((harness_suffix, "rank_runs.py"))
              and "minitorch_dist/runtime" not in f.filename
              and "/site-packages/" not in f.filename and "/torch/" not in f.filename
              and not f.filename.startswith("<frozen")]
    return "".join(traceback.format_list(frames[-4:])).rstrip()


def own_copy(value):
    """A copy of a rank's input: tensors cloned inside lists, tuples and dicts, anything else deep-copied.
    (Not copy.deepcopy on the whole: its memo would put the copies beside the originals in one call,
    which the device guard of tests/kit reads as a CPU tensor meeting group.device's.)"""
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, (list, tuple)):
        return type(value)(own_copy(v) for v in value)
    if isinstance(value, dict):
        return {k: own_copy(v) for k, v in value.items()}
    return copy.deepcopy(value)


def run_case_list(group, cases, run_one, key, inputs=None) -> list[dict]:
    """Rank code: run_one(case, group) -> dict for every case, in order; with `inputs` (this rank's
    own input of each case, from run_batched), run_one(case, group, a copy of the case's input):
    on sim the ranks are threads of the test process, whose own inputs must stay as they were.

    A NotImplementedError gives {"error": "NotImplementedError: ..."} for that case and every later
    case with the same key(case); any other exception stops the launch with CaseFailed.
    """
    results, missing = [], {}
    for index, case in enumerate(cases):
        if key(case) in missing:
            results.append({"error": missing[key(case)]})
            continue
        try:
            own = () if inputs is None else (own_copy(inputs[index]),)
            results.append(run_one(case, group, *own))
        except NotImplementedError as exc:         # a stub: raised on every rank before any message
            missing[key(case)] = f"{STUB}{exc}"
            results.append({"error": missing[key(case)]})
        except PeerFailedError:
            raise
        except Exception as exc:  # noqa: BLE001 - reported to the grading process, which judges
            raise CaseFailed(index, type(exc).__name__, str(exc), student_frames(exc)) from None
    return results


# -- in the grading process -----------------------------------------------------------------
def launch_for_tests(fn, p: int, args=(), backend: str = "gloo", network: SimNetwork | None = None,
                     collectives: bool = True, trace: bool = False, rank_args=None):
    """launch() as the homework tests use it: deadline from MINITORCH_DIST_DEADLINE, else
    DEFAULT_DEADLINE; a RUN_TIMEOUT on the whole run (gloo/mpi). Under the autograder every
    backend, sim included, runs in the sandbox's rank host (minitorch_dist.runtime.launching.host).
    rank_args: launch()'s, each rank's own arguments after `args`.
    """
    deadline = "default" if os.environ.get("MINITORCH_DIST_DEADLINE") else DEFAULT_DEADLINE
    if backend == "sim":
        return launch(fn, p, args=args, rank_args=rank_args, backend="sim", collectives=collectives, trace=trace,
                      network=network or SimNetwork())
    return launch(fn, p, args=args, rank_args=rank_args, backend=backend, collectives=collectives, trace=trace,
                  deadline=deadline, timeout=RUN_TIMEOUT)


def try_launch(fn, p: int, args=(), backend: str = "gloo", network: SimNetwork | None = None, **options):
    """(RunResult, None), or (None, the RankError) when a rank raised: judge it outside the except."""
    try:
        return launch_for_tests(fn, p, args, backend, network, **options), None
    except RankError as err:
        return None, err


def first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


def compute_calls(result) -> int:
    """group.compute() calls a sim run's counters hold (the engine's own in a grading)."""
    return sum(c.by_op["compute"].calls for c in result.counters if "compute" in c.by_op)


def error_text(err: BaseException) -> str:
    """Feedback for a failed launch: a stub's one-line message, else the whole report (rank, traceback)."""
    if isinstance(err, RankError) and err.exc_type == "NotImplementedError":
        return err.message
    return str(err)


def run_batched(rank_fn, cases, p: int, key, describe, backend: str = "gloo", network=None,
                leaked=None, inputs=None, check_wire: bool = False, apart=None, counted=None,
                lone=None, widest=None, subgroups=None, compute=True, _seen=None, **options) -> list[tuple]:
    """Run `cases` on p ranks, rank_fn(group, cases) -> [dict per case]; returns per case
    ("ok", [each rank's dict], sim_time or None) or ("error", message). Errors are recorded, never
    raised. leaked(per_rank) -> True when the case left a message in flight (fresh ranks for the rest).
    inputs: one list of p per-rank inputs per case (made in this process); then each launch runs
    rank_fn(group, cases, own) on rank r with own = [rank r's input of each case], sent to it alone.
    check_wire: every case of a run whose counters the kernel's byte counts contradict
    (wire_problems) gets that error.
    apart(case, p) -> True: with check_wire on gloo or mpi and the kernel measuring (run_meter.VAR, which
    the autograder sets), that case runs in a launch of its own (its traffic is scored: the kernel
    bounds a launch's totals, so cases batched together could trade counts), and counted(case,
    per_rank, counters) -> a problem or None then holds what its ranks reported against the run's
    counters (the ones the kernel bounded). lone(case, p) -> per rank {op: (calls, bytes)}: the most
    a correct run of the case puts on one-rank groups (default none: the trace's claims of more keep
    the kernel's lower bound). widest=1: the cases reduce no float16, bfloat16 or float8 (the upper
    bound then allows 1x, not traffic_check.WIDEST times, each reduction's counted bytes). subgroups(case,
    p) -> per rank the sizes of the sub-groups a correct run of the case creates: what a rank may receive
    from the job's store is bounded by their rendezvous (default none: nothing; observe/store_check.py).
    compute=False: on sim, a run whose counters show group.compute() calls fails every case (the times
    must come from messages alone; in a grading the sim's engine keeps those counters, out of the ranks'
    reach: minitorch_dist/runtime/sim/processes.py).
    """
    again = dict(options, lone=lone, widest=widest, subgroups=subgroups)      # for runs of some of the cases
    if check_wire and apart is not None and backend in ("gloo", "mpi") and os.environ.get(KERNEL_TRAFFIC_VAR) == "1":
        return _run_traffic_apart(rank_fn, list(cases), p, key, describe, backend, network, leaked, inputs, apart,
                                  counted, again)
    cases = list(cases)
    out: list[tuple | None] = [None] * len(cases)
    failures: dict[str, int] = {}
    pending = []
    for i, case in enumerate(cases):
        if key(case) in NOT_IMPLEMENTED:
            out[i] = ("error", NOT_IMPLEMENTED[key(case)])
        else:
            pending.append(i)
    while pending:
        batch = [cases[i] for i in pending]
        own = None if inputs is None else for_ranks([inputs[i] for i in pending])
        try:
            result = launch_for_tests(rank_fn, p, (batch,), backend, network, rank_args=own, **options)
        except (RankError, LaunchError) as err:
            failed = getattr(err, "cause", None)
            if not isinstance(failed, CaseFailed):
                _run_apart(rank_fn, cases, pending, out, p, key, describe, backend, network, leaked, err, again,
                           inputs, check_wire)
                break
            i = pending[failed.index]
            later = set(pending[failed.index + 1:])        # not reached: cases before it succeeded
            where = f"\n{failed.where}" if failed.where else ""
            out[i] = ("error", f"rank {err.rank} raised {failed.exc_type}: {failed.message}{where}")
            # a deadlock costs a deadline per run, and a stub fails every case the same way
            weight = MAX_FAILURES_PER_KEY if failed.exc_type in ("DeadlockError", "NotImplementedError") else 1
            failures[key(cases[i])] = failures.get(key(cases[i]), 0) + weight
            pending.remove(i)
            for j in [j for j in pending if j in later and failures.get(key(cases[j]), 0) >= MAX_FAILURES_PER_KEY]:
                out[j] = ("error", f"not run: {key(cases[j])} failed on other cases at p={p} "
                                   f"({failed.exc_type} in {describe(cases[i], p)})")
                pending.remove(j)
            continue
        if _seen is not None:
            _seen.append(result.counters)
        charged = 0 if compute or backend != "sim" else compute_calls(result)
        if charged:
            for i in pending:
                out[i] = ("error", f"group.compute() was called {charged} time(s) in the run of "
                                   f"{describe(cases[i], p)}: it moves the simulated clock, and these times must "
                                   f"come from the messages alone (no compute() in this homework)")
            break
        # a case that failed on its own keeps its error (a stub's posted receives are counted, never filled)
        forged = wire_problems(result, traced=options.get("trace", False), lone_most=lone_allowance(batch, p, lone),
                               widest=widest, joined=joined_subgroups(batch, p, subgroups)) if check_wire else None
        leak = None
        for k, i in enumerate(pending):
            per_rank = [r[k] for r in result]
            errors = [r["error"] for r in per_rank if "error" in r]
            if errors:
                if errors[0].startswith(STUB):
                    NOT_IMPLEMENTED[key(cases[i])] = errors[0]
                out[i] = ("error", errors[0])
                continue
            if forged:
                out[i] = ("error", forged)
                continue
            out[i] = ("ok", per_rank, result.sim_time if len(pending) == 1 else None)
            if leak is None and leaked is not None and leaked(per_rank):
                leak = k                           # a message left in flight may reach later cases
        if leak is None or leak == len(pending) - 1:
            if leak is not None:
                shutdown()
            break
        shutdown()                                 # fresh processes, no stale message: run the rest again
        pending = pending[leak + 1:]
    return out


def _run_traffic_apart(rank_fn, cases, p, key, describe, backend, network, leaked, inputs, apart, counted, options):
    """run_batched with check_wire for cases whose traffic is scored: each in a launch of its own, its
    report held to that launch's counters (counted); the other cases batched as usual."""
    alone = [i for i, case in enumerate(cases) if apart(case, p)]
    rest = [i for i in range(len(cases)) if i not in alone]
    out: list = [None] * len(cases)
    for group in [[i] for i in alone] + ([rest] if rest else []):
        seen = []                    # the run's counters, per launch: only a lone case's are used
        got = run_batched(rank_fn, [cases[i] for i in group], p, key, describe, backend, network, leaked,
                          inputs=None if inputs is None else [inputs[i] for i in group], check_wire=True,
                          _seen=seen, **options)
        for i, o in zip(group, got):
            if len(group) == 1 and o[0] == "ok" and counted is not None:
                problem = counted(cases[i], o[1], seen[-1]) if seen else "no run's counters came back"
                o = ("error", problem) if problem else o
            out[i] = o
    return out


def _run_apart(rank_fn, cases, pending, out, p, key, describe, backend, network, leaked, err, options,
               inputs=None, check_wire: bool = False) -> None:
    """A launch failed without naming its case (a rank died, a timeout): run each key alone."""
    keys = sorted({key(cases[i]) for i in pending})
    if len(keys) > 1:
        for k in keys:
            mine = [i for i in pending if key(cases[i]) == k]
            got = run_batched(rank_fn, [cases[i] for i in mine], p, key, describe, backend, network, leaked,
                              inputs=None if inputs is None else [inputs[i] for i in mine], check_wire=check_wire,
                              **options)
            for i, o in zip(mine, got):
                out[i] = o
        return
    for i in pending:
        out[i] = ("error", f"{type(err).__name__}: {first_line(str(err))}")


def attempt(fn, what: str | None = None) -> dict:
    """Run fn() on a rank and report whether it raised, for a bad-input check judged in the grading
    process: {"raised": the exception's class name or None, "message": its text} (with "what" first
    when given). A stub's NotImplementedError is not caught: the stub memo records it."""
    head = {} if what is None else {"what": what}
    try:
        fn()
    except NotImplementedError:
        raise
    except Exception as exc:  # noqa: BLE001 - reported, judged in the grading process
        return {**head, "raised": type(exc).__name__, "message": str(exc)}
    return {**head, "raised": None, "message": ""}

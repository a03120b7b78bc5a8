"""Simulator and mpiexec cases count only beside the same task's passing cases on gloo.

    @pytest.mark.bound_to("test_naive_all_reduce")           # on a hidden test that runs on sim or mpi
    def test_naive_all_reduce_on_sim(p): ...

On the thread sim (above 64 ranks) every rank is a thread of one sandboxed process: it holds every
rank's input, and its clock, counters and trace are the submission's to write; the engine that runs
smaller sim runs (runtime/sim/processes.py) and the PMI relay of mpiexec's ranks (a channel to
mpiexec's proxy that the kernel's count of TCP bytes does not see, closed after MPI_Init:
runtime/launching/pmi_relay.py) are younger than the gloo tests' layers. So a case on either
backend is not taken as evidence alone that the code communicates. A test marked `bound_to(name, ...)` earns a case only where every case
of the named gloo tests (whose ranks each get their own input alone, in a Landlock domain of their
own, and whose traffic the kernel counts) of the same task passed in this grading; a case without a
task asks the same of every case of the named tests. Selecting a bound test selects what it is
bound to (`with_bound`), and `apply` turns a bound case that passed into a failure that names the
test it rests on, before the rubric's entries are made. Timing on sim (a bubble, a number of rounds)
stays the sandbox's clock: code that passes on gloo and writes the clock on sim is not caught here
(the static scan flags clock writes for the instructor).
"""

from __future__ import annotations

import copy

from autograder.results import GradedTest

MARKER = "bound_to"


def short(function: str) -> str:
    return function.rsplit("::", 1)[-1]


def with_bound(selected: list[GradedTest], every: list[GradedTest]) -> list[GradedTest]:
    """`selected` plus fresh copies of the tests they are bound to that are not already in it."""
    have = {short(t.function) for t in selected}
    wanted = {name for t in selected for name in t.bound_to} - have
    return selected + [copy.deepcopy(t) for t in every if short(t.function) in wanted]


def _resting_on(test: GradedTest, task: str | None, by_name: dict[str, GradedTest]) -> tuple[list[str], list[str]]:
    """(names of the real-process tests a case of `task` rests on, the cases of them that did not pass)."""
    names, lost = [], []
    for name in test.bound_to:
        bound = by_name.get(name)
        mine = [c for c in bound.cases if task is None or bound.case_tasks.get(c) == task] if bound else []
        if bound is None or bound.not_run or not mine:
            continue
        names.append(name)
        lost += [c for c in mine if bound.outcomes.get(c, {}).get("outcome") != "passed"]
    return names, lost


def apply(tests: list[GradedTest]) -> None:
    """Fail, in place, every passed case of a bound test whose real-process cases did not all pass."""
    by_name = {short(t.function): t for t in tests}
    for test in tests:
        if not test.bound_to:
            continue
        for case in test.cases:
            outcome = test.outcomes.get(case, {})
            if outcome.get("outcome") != "passed":
                continue
            names, lost = _resting_on(test, test.case_tasks.get(case), by_name)
            if names and not lost:
                continue
            why = (f"{len(lost)} case(s) of {', '.join(names)} did not pass (see their feedback)" if names else
                   f"none of {', '.join(test.bound_to)} ran in this grading")
            test.outcomes[case] = {**outcome, "outcome": "failed", "message": (
                "This case ran on sim or under mpiexec, where the grader does not take a passing case as "
                f"evidence alone that the code communicates: it counts only when the same task passes on gloo, "
                f"and {why}.")}

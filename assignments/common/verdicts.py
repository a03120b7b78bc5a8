"""What every homework's tests share in the grading process: which tasks a run selected, and the
verdict (judge: every problem the checks find in the outcomes, a stub's one line, a failing test's
message). The harness's launching and rank side is rank_runs.py, which re-exports these names.
"""

from __future__ import annotations

STUB = "NotImplementedError: "     # how a stub's error starts, on every rank and in every verdict
MAX_SHOWN = 6                      # failing cases (or problems) shown in one test's message


# -- suites: which tasks the run selected (pytest -m task2_4) ---------------------------------
_selected_tasks: set[str] | None = None


def select_tasks(items) -> None:
    """Remember the task markers of the collected tests (pytest_collection_finish), so that a
    suite runs only the cases of the selected tasks (`pytest -m task1_7` runs no naive case)."""
    global _selected_tasks
    tasks = {m.name for item in items for m in item.iter_markers() if m.name.startswith("task")}
    _selected_tasks = tasks or None


def selected(task: str) -> bool:
    """Whether the cases of `task` (a marker name such as "task2_4") should run."""
    return _selected_tasks is None or task in _selected_tasks


def selected_tasks() -> set[str] | None:
    return _selected_tasks


# -- the verdict ----------------------------------------------------------------------------
def fail(message: str) -> None:
    """Fail the current test with `message` only (no harness traceback)."""
    try:
        import pytest
    except ImportError:           # pragma: no cover - the harness used outside pytest
        raise AssertionError(message) from None
    pytest.fail(message, pytrace=False)


def fail_on(problems: list[str], shown: int = MAX_SHOWN) -> None:
    """Fail with the first `shown` problems (and how many more), if there are any."""
    if problems:
        more = [f"... and {len(problems) - shown} more"] if len(problems) > shown else []
        fail("\n".join(problems[:shown] + more))


def only_stub_errors(errors: list[str | None]) -> str | None:
    """The stubs' messages, one per line, when every error is a stub's NotImplementedError; else None."""
    if errors and all((e or "").startswith(STUB) for e in errors):
        return "\n".join(dict.fromkeys(e[len(STUB):] for e in errors))
    return None


def judge(outcomes, *checks) -> None:
    """Fail with every problem the `checks` find in `outcomes` (first few shown), else return.

    An outcome has .error (None when every rank returned) and .label (the case, p, backend);
    check(outcome) -> [problem, ...]. Stubs fail with their one-line messages only.
    """
    outcomes = list(outcomes)
    if not outcomes:
        fail("no case ran")
    stubs = only_stub_errors([o.error for o in outcomes])
    if stubs:                                                       # stubs: say so, nothing else
        fail(stubs)
    bad, not_run = [], {}
    for o in outcomes:
        if (o.error or "").startswith("not run: "):
            not_run[o.error] = not_run.get(o.error, 0) + 1
            continue
        problems = list(dict.fromkeys(p for check in checks for p in check(o)))
        if problems:
            more = [f"... and {len(problems) - 4} more"] if len(problems) > 4 else []
            bad.append(f"{o.label}:\n    " + "\n    ".join(problems[:4] + more))
    if bad or not_run:
        more = f"\n... and {len(bad) - MAX_SHOWN} more failing cases" if len(bad) > MAX_SHOWN else ""
        skipped = "".join(f"\n{k} case{'s' * (k > 1)} {text}" for text, k in not_run.items())
        fail(f"{len(bad) + sum(not_run.values())} of {len(outcomes)} cases failed:"
             + "".join("\n" + b for b in bad[:MAX_SHOWN]) + more + skipped)

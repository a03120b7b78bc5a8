"""Grade seeded bugs with the real grader and weigh what each loses against its task.

Each bug is laid over the solutions in a temporary folder and graded by a GradingSession of its
homework (one grader's copy, one zygote per job, for all the bugs) on the cases of its task only:
every test function that has a case of the task, each run on those cases. Points are counted as the
whole grading counts them (a case is worth its function's points / its function's cases, plus the
rubric's "every case of the task passes" entry), so the share lost is the share a student loses.
"""

from __future__ import annotations

import copy
import math
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field

from autograder.feedback import COUNT_LINE
from autograder.mutants.patches import Bug, PatchError, make_submission
from autograder.results import GradedTest
from autograder.rubric import task_points

FAIR_SHARE = 0.25          # every caught bug must cost at least this share of its task's points


@dataclass
class Verdict:
    """What one bug cost: points lost of its task's, the tests that caught it, the first message."""

    bug: Bug
    task_max: float = 0.0            # the task's points: its cases' plus the rubric entry
    lost: float = 0.0
    entry: float = 0.0               # the rubric entry's points ("every case of the task passes")
    caught_by: list[tuple[str, int, int]] = field(default_factory=list)     # (test, failed cases, cases)
    message: str = ""
    first_case: str = ""            # the failed hidden case quickest to run alone: the bug's caught_by hint
    _cost: float = float("inf")
    seconds: float = 0.0
    error: str = ""                                                         # the bug file did not apply

    @property
    def caught(self) -> bool:
        return bool(self.caught_by)

    @property
    def share(self) -> float:
        return self.lost / self.task_max if self.task_max else 0.0

    @property
    def tests_share(self) -> float:
        """The share lost from the task's test cases alone, without the rubric entry."""
        tests_max = self.task_max - self.entry
        return (self.lost - (self.entry if self.caught else 0.0)) / tests_max if tests_max else 0.0


def task_tests(session, marker: str, hidden_only: bool = False) -> list[GradedTest]:
    """Copies of the session's tests restricted to the cases of task `marker` (task1_4)."""
    out = []
    for t in session.tests:
        mine = [c for c in t.cases if t.case_tasks.get(c) == marker]
        if mine and not (hidden_only and t.visibility == "visible"):
            t = copy.deepcopy(t)
            t.per_case = t.points / len(t.cases)            # what a case is worth in a whole grading
            t.cases = mine
            out.append(t)
    return out


def grade_bug(session, bug: Bug, hidden_only: bool = False, stop_at_first_failure: bool = False,
              hint_first: bool = False) -> Verdict:
    """Grade `bug` on its task's tests in `session` (see module doc). hint_first: when the bug names
    the case that caught it (caught_by), run that case alone first and stop if it fails; otherwise
    (or if it passes) go on with the task's tests."""
    verdict = Verdict(bug)
    t0 = time.monotonic()
    tests = task_tests(session, bug.marker, hidden_only)
    rubric = session.rubric or {}
    total = task_points(session.tests, set(rubric.get("minor", ()))).get(bug.marker, 0.0)
    extra = math.ceil(total / 3 - 1e-9) if rubric.get("all_cases") else 0
    verdict.task_max, verdict.entry = total + extra, extra
    rounds = [tests]
    if hint_first:
        hinted = [t for t in tests if bug.caught_by in t.cases]
        if hinted:
            first = copy.deepcopy(hinted[0])
            first.cases = [bug.caught_by]
            rounds = [[first], tests]
    folder = tempfile.mkdtemp(prefix=f"mutant-{bug.name}-")
    try:
        make_submission(bug, folder)
        for batch in rounds:
            results = session.grade(folder, tests=batch, stop_at_first_failure=stop_at_first_failure, show=False)
            if results["tests"][0]["status"] != "passed":             # the patched file did not compile
                verdict.error = "the submission check failed: " + results["tests"][0]["output"].strip()[:300]
                return verdict
            _count(verdict, batch)
            if verdict.caught:
                break
    except PatchError as exc:
        verdict.error = str(exc)
        return verdict
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if verdict.caught:
        verdict.lost += extra
    verdict.seconds = time.monotonic() - t0
    return verdict


def catch_all(homework: str, bugs: list[Bug], sessions: int = 2) -> list[Verdict]:
    """CI's quick check: is each bug caught? `sessions` grading sessions (one zygote each) in threads
    take the bugs from one queue, in order, each the next one when it is free (a fixed split left one
    session idle while the other graded a bug that waits out a deadline); each bug runs its caught_by
    case alone first, then its task's hidden tests one at a time until one loses points. Returns the
    verdicts in the order of `bugs`."""
    from autograder.session import GradingSession
    verdicts: dict[str, Verdict] = {}
    errors: list[BaseException] = []
    queue = iter(list(bugs))
    lock = threading.Lock()

    def next_bug() -> Bug | None:
        with lock:
            return None if errors else next(queue, None)

    def work() -> None:
        try:
            with GradingSession(homework, quiet=True) as session:
                while (bug := next_bug()) is not None:
                    verdicts[bug.name] = grade_bug(session, bug, hidden_only=True, stop_at_first_failure=True,
                                                   hint_first=True)
        except BaseException as exc:  # noqa: BLE001 - reported by the caller
            with lock:
                errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(max(1, min(sessions, len(bugs))))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return [verdicts[b.name] for b in bugs]


def _count(verdict: Verdict, tests: list[GradedTest]) -> None:
    """Add the failed cases of `tests` to the verdict (cases left unrun by a stop count as nothing)."""
    for t in tests:
        failed = [c for c in t.cases if t.outcomes.get(c, {}).get("outcome") != "passed"
                  and t.outcomes.get(c, {}).get("message") != "not run (an earlier test failed)"]
        if not failed:
            continue
        verdict.lost += t.per_case * len(failed)
        verdict.caught_by.append((t.name.rsplit(": ", 1)[-1], len(failed), len(t.cases)))
        if not verdict.message:
            verdict.message = first_message(t, failed[0])
        cost = t.wall / len(t.cases)            # a whole job per case when run alone: prefer the quick tests
        if t.visibility != "visible" and cost < verdict._cost:
            verdict.first_case, verdict._cost = failed[0], cost


def first_message(test: GradedTest, nodeid: str) -> str:
    """The first lines of feedback a student reads for the failing case `nodeid` (or the test's notes)."""
    message = str(test.outcomes.get(nodeid, {}).get("message") or "")
    if message in ("", "did not finish (see below)") and test.notes:
        message = test.notes[0]
    lines = [line for line in message.strip().splitlines() if not COUNT_LINE.fullmatch(line)]
    return "\n".join(lines)


def table(verdicts: list[Verdict], width: int = 110) -> str:
    """The mutation table: one row per bug, then the bugs that are missed or cost less than FAIR_SHARE.
    "lost" counts the rubric entry; "cases" is the share lost from the task's test cases alone, which
    shows the properties the tests weigh lightly."""
    rows = [f"{'bug':<34} {'task':>4} {'lost (share)':>17} {'cases':>5}  {'caught by (failed/cases)':<48} first message",
            "-" * (width + 60)]
    for v in verdicts:
        if v.error:
            rows.append(f"{v.bug.name:<34} {v.bug.task:>4} {'ERROR':>17}  {v.error}")
            continue
        lost = f"{v.lost:.1f}/{v.task_max:.1f} ({v.share:4.0%})"
        caught = ", ".join(f"{name} {n}/{m}" for name, n, m in v.caught_by) or "MISSED"
        first = " | ".join(line.strip() for line in v.message.splitlines()[:2])
        rows.append(f"{v.bug.name:<34} {v.bug.task:>4} {lost:>17} {v.tests_share:5.0%}  {_cut(caught, 48):<48} "
                    f"{_cut(first, width - 50)}")
    rows.append("-" * (width + 60))
    missed = [v.bug.name for v in verdicts if not v.error and not v.caught]
    cheap = [v.bug.name for v in verdicts if v.caught and v.share < FAIR_SHARE]
    broken = [v.bug.name for v in verdicts if v.error]
    rows.append(f"{len(verdicts)} bugs: {sum(v.caught for v in verdicts)} caught, missed: {', '.join(missed) or 'none'}; "
                f"caught for less than {FAIR_SHARE:.0%} of the task: {', '.join(cheap) or 'none'}"
                + (f"; did not apply: {', '.join(broken)}" if broken else ""))
    return "\n".join(rows)


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n - 3] + "..."

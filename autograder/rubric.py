"""A homework's rubric: one more graded entry per task, earned only when every case of the task passes.

homework.json:  "rubric": {"all_cases": true, "minor": ["test_name", ...]}

The tests of a task spread its points over properties (world sizes, dtypes, ops, messages, sim time,
bad input), with partial credit per case: a bug that breaks one property of one task (an op ignored,
a message too many) fails a few cases and alone would lose a sliver of the homework. So each task
also gets the entry "every case of the task passes", worth ceil(T / 3) points where T is the points
of the task's cases: any failing case of the task costs at least that entry, which is at least 25%
of the task's points (T + ceil(T / 3)). Cases of the tests named under "minor" (the handout says the
property is minor), and of tests not run (a gpu test on a cpu grading), count neither way. A test function whose cases belong to several tasks (one run
on mpi for every algorithm) gives each task the points of its own cases.
"""

from __future__ import annotations

import math

from autograder.collect import task_name
from autograder.feedback import COUNT_LINE
from autograder.jobs import task_order
from autograder.results import GradedTest

ENTRY = "every case of the task passes"


def is_bonus(manifest: dict, task: str) -> bool:
    """A task labelled "(bonus)" in homework.json: its points come on top of the base total."""
    return "(bonus)" in manifest.get("tasks", {}).get(task, "")


def task_points(tests: list[GradedTest], minor=()) -> dict[str, float]:
    """{task marker: points of its cases} over `tests` (a case is worth points / cases of its function)."""
    points: dict[str, float] = {}
    for t in tests:
        if t.function.rsplit("::", 1)[-1] in minor or t.not_run:
            continue
        for nodeid in t.cases:
            task = t.case_tasks.get(nodeid)
            if task:
                points[task] = points.get(task, 0.0) + t.points / len(t.cases)
    return points


def rubric_tests(tests: list[GradedTest], manifest: dict, rubric: dict) -> list[GradedTest]:
    """`tests` followed by one "every case of the task passes" entry per task they cover (see module doc)."""
    if not rubric.get("all_cases"):
        return tests
    minor = set(rubric.get("minor", ()))
    entries = []
    for task, points in sorted(task_points(tests, minor).items(), key=lambda kv: _number(kv[0])):
        failing, visibility, first = {}, "visible", ""
        for t in tests:
            mine = [c for c in t.cases if t.case_tasks.get(c) == task]
            if not mine or t.function.rsplit("::", 1)[-1] in minor or t.not_run:
                continue
            if t.visibility != "visible":
                visibility = t.visibility
            lost = [c for c in mine if t.outcomes.get(c, {}).get("outcome") != "passed"]
            if lost:
                failing[t.name.rsplit(": ", 1)[-1]] = (len(lost), len(mine))
                first = first or _reason(str(t.outcomes.get(lost[0], {}).get("message") or ""))
        extra = math.ceil(points / 3 - 1e-9)
        entry = GradedTest(function=f"rubric::{task}", name=f"{task_name(manifest, task)}: {ENTRY}",
                           points=float(extra), limit=0.0, visibility=visibility, cases=[f"rubric::{task}"],
                           case_tasks={f"rubric::{task}": task})
        if failing:
            which = ", ".join(f"{name} ({n} of {m} cases)" for name, (n, m) in failing.items())
            message = (f"{len(failing)} test(s) of this task lost points: {which}. This entry (at least 25% of the "
                       f"task's points) is earned when every case of the task passes; see those tests' feedback."
                       + (f"\nThe first reason: {first[:300]}" if first else ""))
            entry.outcomes = {entry.cases[0]: {"outcome": "failed", "message": message}}
        else:
            entry.outcomes = {entry.cases[0]: {"outcome": "passed", "message": ""}}
        entries.append(entry)
    return sorted(tests + entries, key=task_order)       # each entry after its task's tests


def _reason(message: str) -> str:
    """The first line of a failure message that says something (not "2 of the 7 runs of this case failed:")."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    return next((line for line in lines if not COUNT_LINE.fullmatch(line)), "")


def _number(task: str) -> tuple[int, ...]:
    return tuple(int(x) for x in task[len("task"):].split("_"))


def task_totals(tests: list[GradedTest]) -> dict[str, dict[str, float]]:
    """{"1.4": {"score": s, "max": m}} over graded tests (rubric entries included): each case is worth
    points / cases of its function and belongs to its own task; what results.json reports per task."""
    out: dict[str, dict[str, float]] = {}
    for t in tests:
        for nodeid in [] if t.not_run else t.cases:
            task = t.case_tasks.get(nodeid)
            if not task:
                continue
            row = out.setdefault(task[len("task"):].replace("_", "."), {"score": 0.0, "max": 0.0})
            share = t.points / len(t.cases)
            row["max"] += share
            row["score"] += share if t.outcomes.get(nodeid, {}).get("outcome") == "passed" else 0.0
    return {k: {"score": round(v["score"], 4), "max": round(v["max"], 4)}
            for k, v in sorted(out.items(), key=lambda kv: _number("task" + kv[0].replace(".", "_")))}


def points_summary(graded: list[GradedTest], manifest: dict) -> dict:
    """Every number of points a student or an instructor sees, computed once from the graded tests
    (rubric entries included): results.json's extra_data, the table's total, the handout's table
    (tools.points) and the gradebook (autograder.gradebook) all read it.

    {"tasks": task_totals(graded), a bonus task's row marked "bonus": True,
     "code": {"score", "max"}: every test but the bonus tasks' cases (the handout's "code, in all"),
     "bonus": {"tasks": [...], "score", "max"}: on top of that}.
    A test function whose cases belong to several tasks is split by its cases' tasks everywhere."""
    tasks = task_totals(graded)
    for task, row in tasks.items():
        if is_bonus(manifest, task):
            row["bonus"] = True
    bonus = [task for task, row in tasks.items() if row.get("bonus")]
    extra = {field: sum(tasks[task][field] for task in bonus) for field in ("score", "max")}
    total = {"score": sum(t.score for t in graded), "max": sum(t.max_score for t in graded)}
    return {"tasks": tasks,
            "code": {field: round(total[field] - extra[field], 4) for field in ("score", "max")},
            "bonus": {"tasks": bonus, **{field: round(extra[field], 4) for field in ("score", "max")}}}

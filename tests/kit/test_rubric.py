"""The rubric entry "every case of the task passes" (autograder/rubric.py), without processes: its
points, when it is earned, and the rule it enforces (a failing case costs >= 25% of its task)."""

from autograder.results import GradedTest
from autograder.rubric import rubric_tests, task_points

MANIFEST = {"name": "hw9", "tasks": {"9.1": "one thing", "9.2": "another"}}


def graded(name, points, tasks, failed=(), visibility="after_published"):
    cases = [f"t.py::{name}[{i}]" for i in range(len(tasks))]
    t = GradedTest(function=f"t.py::{name}", name=f"HW9 9.x: {name}", points=points, limit=1.0,
                   visibility=visibility, cases=cases, case_tasks=dict(zip(cases, tasks)))
    t.outcomes = {c: {"outcome": "failed" if i in failed else "passed", "message": "HW9 task 9.1: x is 3, expected 2"}
                  for i, c in enumerate(cases)}
    return t


def entries(tests):
    return {t.function: t for t in rubric_tests(tests, MANIFEST, {"all_cases": True}) if t.function.startswith("rubric")}


def test_entry_is_a_third_of_the_task_rounded_up_and_a_case_spanning_tasks_splits():
    tests = [graded("a", 8, ["task9_1"] * 8), graded("b", 4, ["task9_1", "task9_2"])]
    assert task_points(tests) == {"task9_1": 10.0, "task9_2": 2.0}
    got = entries(tests)
    assert got["rubric::task9_1"].points == 4 and got["rubric::task9_2"].points == 1
    assert all(e.score == e.points for e in got.values())


def test_one_failing_case_costs_at_least_a_quarter_of_its_task():
    for total in (1, 3, 7, 22, 100):
        tests = [graded("a", total, ["task9_1"] * 9, failed=(4,)), graded("b", 2, ["task9_2"])]
        entry = entries(tests)["rubric::task9_1"]
        lost = total / 9 + entry.points - entry.score
        assert entry.score == 0 and lost / (total + entry.points) >= 0.25, total
        assert "a (1 of 9 cases)" in entry.output() and "x is 3, expected 2" in entry.output()
        assert entries(tests)["rubric::task9_2"].score == 1


def test_minor_tests_count_neither_way_and_suites_without_a_rubric_are_unchanged():
    tests = [graded("a", 6, ["task9_1"] * 2), graded("small", 3, ["task9_1"], failed=(0,))]
    got = {t.function: t for t in rubric_tests(tests, MANIFEST, {"all_cases": True, "minor": ["small"]})}
    assert got["rubric::task9_1"].points == 2 and got["rubric::task9_1"].score == 2
    assert rubric_tests(tests, MANIFEST, {}) == tests

"""One truth for points (autograder.rubric.points_summary), checked for every homework without grading:
the tests are collected once (the `collected` fixture) and their outcomes made up, so the handout's
table (tools.points), results.json's extra_data, the table's totals and the gradebook's columns
(autograder.gradebook) are compared on the same tests, cross-task tests and bonus tasks included.
Also: the gradebook's rows for group submissions and for ids found in one source only, and the words
of a failing case's message against the table's count of cases."""

from __future__ import annotations

import csv
import json
import os
import re

import pytest

from autograder.gradebook import PROBLEMS, write_gradebook
from autograder.results import GradedTest, results_json, summary_table
from autograder.rubric import points_summary, rubric_tests, task_totals
from tools.overlay import ROOT, homework_manifest
from tools.points import BEGIN, BONUS, CODE, END, NOTEBOOK, handout_rows, notebook_points

HOMEWORKS = ["hw1", "hw2", "hw3", "hw4", "hw5", "hw6"]


def _grading(tests: list[GradedTest], manifest: dict, failed: set[str] = frozenset()) -> tuple[list, dict]:
    """(graded tests with the rubric entries, results.json) as GradingSession.grade makes them, every case
    passing but those in `failed`."""
    tests = [GradedTest(**{**t.__dict__, "outcomes": {c: {"outcome": "failed" if c in failed else "passed",
                                                          "message": "1 of 3 runs of this case failed:"}
                                                      for c in t.cases}}) for t in tests]
    graded = rubric_tests(tests, manifest, manifest.get("rubric") or {})
    results = results_json(graded, {"name": "submission check", "score": 0, "max_score": 0}, 1.0, "t", "cpu",
                           manifest)
    results["extra_data"] = points_summary(graded, manifest)
    return graded, results


def _write(out, student: str, results: dict, members=None) -> None:
    os.makedirs(os.path.join(out, student), exist_ok=True)
    extra = dict(results["extra_data"], batch={"student": student, "members": members or [student]})
    with open(os.path.join(out, student, "results.json"), "w") as f:
        json.dump(dict(results, extra_data=extra), f)


def _gradebook(hw: str, out, notebook_csv=None) -> dict[str, dict]:
    return {r["student"]: r for r in csv.DictReader(open(write_gradebook(hw, str(out), notebook_csv, log=print)))}


@pytest.mark.parametrize("hw", HOMEWORKS)
def test_handout_results_table_and_gradebook_give_the_same_points(collected, hw, tmp_path):
    manifest = homework_manifest(hw)
    tests, problems = collected(hw)
    assert tests and not problems, problems
    graded, full = _grading(tests, manifest)
    points = full["extra_data"]
    # the handout's table: every task, the code without the bonus, the bonus, the notebook
    rows = handout_rows(hw)
    expected = {**{task: row["max"] for task, row in points["tasks"].items()}, CODE: points["code"]["max"],
                **({BONUS: points["bonus"]["max"]} if points["bonus"]["max"] else {}),
                **({NOTEBOOK: notebook_points(hw)} if notebook_points(hw) else {})}
    assert rows == pytest.approx(expected), f"assignments/{hw}/README.md is out of date: python -m tools.points {hw}"
    bonus_tasks = [k for k, title in manifest["tasks"].items() if "(bonus)" in title]
    assert points["bonus"]["tasks"] == bonus_tasks
    assert points["code"]["max"] + points["bonus"]["max"] == pytest.approx(sum(t.max_score for t in graded))
    # one test whose cases belong to several tasks: a failing case costs its own task only
    mixed = next((t for t in tests if len(set(t.case_tasks.values())) > 1), None)
    failed = {mixed.cases[-1]} if mixed else {tests[0].cases[0]}
    _, partial = _grading(tests, manifest, failed)
    lost_task = (mixed or tests[0]).case_tasks[next(iter(failed))][len("task"):].replace("_", ".")
    share = (mixed or tests[0]).points / len((mixed or tests[0]).cases)
    for task, row in partial["extra_data"]["tasks"].items():
        if task == lost_task:
            assert row["score"] < row["max"] - share + 1e-6, (task, row)       # the case and the rubric entry
        else:
            assert row["score"] == pytest.approx(row["max"]), (task, row, "lost a point for another task's case")
    # the full table says the same per task and in all
    table = full["tests"][1]["output"] if len(full["tests"]) > 1 and full["tests"][1]["name"].startswith("summary") \
        else full["output"]
    for task, row in points["tasks"].items():
        assert f"{task}{' (bonus)' if row.get('bonus') else ''} {row['max']:.2f} / {row['max']:g}" in table, task
    # the gradebook: its columns are results.json's (notebook max: the handout's)
    out = tmp_path / "grades"
    _write(out, "full", full)
    _write(out, "partial", partial)
    nb = tmp_path / "grades.csv"
    nb.write_text(f"assignment,student_id,score,max_score\n{hw},full,1,{notebook_points(hw):g}\n"
                  f"{hw},partial,0,{notebook_points(hw):g}\n")
    book = _gradebook(hw, out, str(nb))
    for student, res in (("full", full), ("partial", partial)):
        row, p = book[student], res["extra_data"]
        for task, task_row in p["tasks"].items():
            assert float(row[f"task {task} (max {task_row['max']:g})"]) == pytest.approx(task_row["score"], abs=0.005)
        assert float(row["code_max"]) == pytest.approx(rows[CODE]) and float(row["bonus_max"]) == rows.get(BONUS, 0)
        assert float(row["code"]) + float(row["bonus"]) == pytest.approx(res["score"], abs=0.01)
        assert float(row["notebook_max"]) == rows.get(NOTEBOOK, 0) and row["problems"] == ""


TASK_ROW = re.compile(r"^\| (\d+\.\d+)(?: \(bonus\))? \| ([\d.]+) \|", re.M)          # "| 5.6 (bonus) | 18 | ..."
NOTEBOOK_WORDS = re.compile(r"(?:analysis, |\*\*Notebook\*\* \(|notebook is worth )(\d+) points", re.I)
BONUS_WORDS = re.compile(r"its (\d+) points come on top of the (\d+)")


@pytest.mark.parametrize("hw", HOMEWORKS)
def test_the_handout_states_no_other_points(collected, hw):
    """Points the handout's prose and its "What to implement" table state: the same as its points table."""
    manifest = homework_manifest(hw)
    tests, _ = collected(hw)
    points = _grading(tests, manifest)[1]["extra_data"]
    with open(os.path.join(ROOT, "assignments", hw, "README.md")) as f:
        text = f.read()
    outside = text[:text.index(BEGIN)] + text[text.index(END):]
    for task, pts in TASK_ROW.findall(outside):
        assert float(pts) == points["tasks"][task]["max"], f"assignments/{hw}/README.md: task {task} is worth " \
            f"{points['tasks'][task]['max']:g} (its points table, the grader), not {pts}"
    for pts in NOTEBOOK_WORDS.findall(outside):
        assert float(pts) == notebook_points(hw), f"assignments/{hw}/README.md: the notebook is worth {notebook_points(hw):g}"
    for bonus, code in BONUS_WORDS.findall(outside):
        assert (float(bonus), float(code)) == (points["bonus"]["max"], points["code"]["max"]), (bonus, code)


def test_gradebook_rows_for_every_group_member_and_ids_in_one_source_only(tmp_path, capsys):
    manifest = {"name": "hw3", "tasks": {"3.1": "a", "3.6": "b (bonus)"}}
    cases = ["t.py::x[0]", "t.py::x[1]"]
    test = GradedTest(function="t.py::x", name="HW3 3.1-3.6: x", points=4.0, limit=1, visibility="visible",
                      cases=cases, case_tasks={cases[0]: "task3_1", cases[1]: "task3_6"})
    _, results = _grading([test], manifest)
    out = tmp_path / "grades"
    for member in ("ann", "ben"):                        # autograder.batch writes each member's results.json
        _write(out, member, results, members=["ann", "ben"])
    _write(out, "cy", results)
    nb = tmp_path / "grades.csv"
    nb.write_text(f"assignment,student_id,score,max_score\nhw3,ann,5,{notebook_points('hw3'):g}\n"
                  f"hw3,ben,6,{notebook_points('hw3'):g}\nhw3,dee,7,{notebook_points('hw3'):g}\n")
    book = _gradebook("hw3", out, str(nb))
    assert set(book) == {"ann", "ben", "cy", "dee"}
    assert book["ann"]["group"] == "ben" and book["ben"]["group"] == "ann" and book["cy"]["group"] == ""
    assert (book["ann"]["code"], book["ann"]["bonus"], book["ann"]["task 3.1 (max 2)"]) == ("2.00", "2.00", "2.00")
    assert float(book["ben"]["total"]) == 2 + 2 + 6 and book["ben"]["problems"] == ""
    assert "no notebook grade" in book["cy"]["problems"] and float(book["cy"]["total"]) == 4
    assert "no code graded" in book["dee"]["problems"] and float(book["dee"]["total"]) == 7
    assert book["dee"]["code_max"] == "2" and book["dee"]["bonus_max"] == "2"
    said = capsys.readouterr().out
    assert "gradebook: cy: no notebook grade" in said and "gradebook: dee: no code graded" in said
    assert "cy: no notebook grade" in (out / PROBLEMS).read_text()
    nb.write_text("assignment,student_id,score,max_score\nhw3,ann,5,3\nhw3,ben,6,3\nhw3,cy,1,3\n")
    _gradebook("hw3", out, str(nb))
    assert "nbgrader's max_score for hw3 is 3 where the notebook's graded cells are worth" in capsys.readouterr().out


def test_the_table_counts_cases_and_the_message_counts_runs():
    """The harness judges several runs in one test case ("1 of 3 cases failed", its own words); the table
    counts the test's cases (0/1): the message the grader keeps says runs, so the two never read as one."""
    from types import SimpleNamespace

    from assignments.common.rank_runs import judge
    from autograder.feedback import short_message
    runs = [SimpleNamespace(error=None, label=f"p={p} gloo") for p in (2, 3, 4)]
    runs += [SimpleNamespace(error="not run: mpi is missing", label=f"p={p} mpi") for p in (2, 4)]
    with pytest.raises(pytest.fail.Exception) as failed:                  # the harness's real verdict
        judge(runs, lambda run: ["wrong sum"] if run.label == "p=4 gloo" else [])
    message = short_message(failed.value, "")
    assert message.splitlines()[0] == "3 of the 5 runs of this case failed:", message
    assert "2 runs of this case not run: mpi is missing" in message and "cases" not in message, message
    test = GradedTest(function="t.py::x", name="HW9 9.1 x: test_x", points=3.0, limit=1, visibility="visible",
                      cases=["t.py::x"], case_tasks={"t.py::x": "task9_1"})
    test.outcomes = {"t.py::x": {"outcome": "failed", "message": message}}
    line = summary_table([test], "t", 1.0).splitlines()[3]
    assert " 0/1 " in line and "3 of the 5 runs of this case failed" in line and "cases failed" not in line
    assert task_totals([test]) == {"9.1": {"score": 0.0, "max": 3.0}}

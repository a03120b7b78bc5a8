"""gradebook.csv: one row per student from the results.json files autograder.batch wrote in `out`,
with nbgrader's notebook points merged (its `export` CSV).

    student, code, code_max, bonus, bonus_max, task 3.1 (max 39), ..., [notebook, notebook_max,] total, total_max,
    group, problems

Every number is the grading's own (results.json extra_data: autograder.rubric.points_summary, which
the handout's table and the feedback's per-task line come from too): `code` is the points without the
bonus tasks, `bonus` on top of it, a task's column its cases' points (a test whose cases belong to
several tasks split by case). `notebook_max` is the graded cells' points of the homework's notebook
(tools.points.notebook_points, the handout's "notebook" row). `total` = code + bonus + notebook,
`total_max` = code_max + notebook_max. `group`: the other members of a Gradescope group submission
(each member has a row). `problems`: what does not fit, also printed to stderr: a student with code
and no notebook grade or the other way round (ids that differ between Gradescope and nbgrader), a
task maximum that differs from the other rows' (graded with other tests or options), nbgrader's
max_score that differs from the notebook's points. The problems are also written to
gradebook-problems.txt beside it.
"""

from __future__ import annotations

import csv
import glob
import json
import os
import sys
from collections import Counter

PROBLEMS = "gradebook-problems.txt"     # beside gradebook.csv: every problem line, when there is any


def _rows_of_results(out: str) -> dict[str, dict]:
    """{student: results.json} of every <student>/results.json in `out`."""
    found = {}
    for path in sorted(glob.glob(os.path.join(out, "*", "results.json"))):
        with open(path) as f:
            found[os.path.basename(os.path.dirname(path))] = json.load(f)
    return found


def _points(results: dict) -> tuple[dict, list[str]]:
    """(extra_data's points: tasks, code, bonus; [problems]) of one results.json."""
    extra = results.get("extra_data", {})
    if "code" in extra and "tasks" in extra:
        return {"tasks": extra["tasks"], "code": extra["code"], "bonus": extra["bonus"]}, []
    top = sum(t.get("max_score", 0) for t in results.get("tests", []))
    return ({"tasks": {}, "code": {"score": results.get("score", 0.0), "max": top}, "bonus": {"score": 0, "max": 0}},
            ["graded by an older grader (no points per task): grade again with --force"])


def _notebook(homework: str, notebook_csv: str, max_points: float) -> tuple[dict[str, float], list[str]]:
    """({student: notebook points} of `homework` in nbgrader's CSV, [problems with the CSV as a whole])."""
    from tools.nbgrader_course import read_grades
    scores = {s: v for (hw, s), v in read_grades(notebook_csv).items() if hw == homework}
    maxima = {v for (hw, _), v in read_grades(notebook_csv, "max_score").items() if hw == homework}
    problems = []
    if not scores:
        problems.append(f"{notebook_csv} holds no grade of {homework} (its assignment column names other "
                        f"homeworks): was it exported after `nbgrader autograde` of {homework}?")
    if maxima - {max_points}:
        problems.append(f"nbgrader's max_score for {homework} is {', '.join(f'{m:g}' for m in sorted(maxima))} where "
                        f"the notebook's graded cells are worth {max_points:g}: was the notebook changed after it "
                        f"was released? Release and grade the same notebook.")
    return scores, problems


def write_gradebook(homework: str, out: str, notebook_csv: str | None = None,
                    log=lambda line: print(line, file=sys.stderr, flush=True)) -> str:
    """Write `out`/gradebook.csv (see the module docstring); returns its path. Problems go to stderr
    (`log`) and to the row's `problems` column."""
    from tools.points import notebook_points
    results = _rows_of_results(out)
    points, problems = {}, {student: [] for student in results}
    for student, res in results.items():
        points[student], problems[student] = _points(res)
    tasks: dict[str, Counter] = {}                          # task -> how many rows give each maximum
    for p in points.values():
        for task, row in p["tasks"].items():
            tasks.setdefault(task, Counter())[row["max"]] += 1
    order = sorted(tasks, key=lambda k: [int(x) for x in k.split(".")])
    task_max = {task: tasks[task].most_common(1)[0][0] for task in order}
    for student, p in points.items():
        for task in order:
            row = p["tasks"].get(task)
            if row is None or row["max"] != task_max[task]:
                problems[student].append(f"task {task} graded out of {row['max'] if row else 0:g}, not "
                                         f"{task_max[task]:g} as in the other rows: other tests or options?")
    notebook, nb_max, general = {}, notebook_points(homework), []
    if notebook_csv:
        notebook, general = _notebook(homework, notebook_csv, nb_max)
        for student in results:
            if student not in notebook:
                problems[student].append("no notebook grade: nbgrader has no student of this id (another id "
                                         "there?); notebook counted 0")
        for student in sorted(set(notebook) - set(results)):
            problems[student] = ["no code graded: no submission of this id (another id on Gradescope?); code "
                                 "counted 0"]
    common = {k: Counter(p[k]["max"] for p in points.values()).most_common(1)[0][0] if points else 0.0
              for k in ("code", "bonus")}
    path = os.path.join(out, "gradebook.csv")
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["student", "code", "code_max", "bonus", "bonus_max", *[f"task {t} (max {task_max[t]:g})" for t in order]]
                   + (["notebook", "notebook_max"] if notebook_csv else []) + ["total", "total_max", "group", "problems"])
        for student in sorted(problems):
            p = points.get(student) or {"tasks": {}, **{k: {"score": 0.0, "max": common[k]} for k in common}}
            code, bonus = p["code"], p["bonus"]
            nb = [notebook.get(student, 0.0), nb_max] if notebook_csv else [0.0, 0.0]
            members = results.get(student, {}).get("extra_data", {}).get("batch", {}).get("members", [student])
            w.writerow([student, f"{code['score']:.2f}", f"{code['max']:g}", f"{bonus['score']:.2f}", f"{bonus['max']:g}",
                        *[f"{p['tasks'].get(t, {}).get('score', 0.0):.2f}" for t in order],
                        *([f"{nb[0]:.2f}", f"{nb[1]:g}"] if notebook_csv else []),
                        f"{code['score'] + bonus['score'] + nb[0]:.2f}", f"{code['max'] + nb[1]:g}",
                        " ".join(m for m in members if m != student), "; ".join(problems[student])])
    lines = general + [f"{s}: {'; '.join(ps)}" for s, ps in sorted(problems.items()) if ps]
    report = os.path.join(out, PROBLEMS)
    if lines:
        with open(report, "w") as f:
            f.write("\n".join(lines) + "\n")
        log(f"gradebook: {len(lines)} problem(s), also in {report}:")
    elif os.path.exists(report):
        os.remove(report)
    for line in lines:
        log(f"gradebook: {line}")
    return path

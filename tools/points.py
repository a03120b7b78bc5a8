"""Write each handout's table of points from what the grader actually grades.

    python -m tools.points hw1 [hw2 ...]      # rewrite the table in assignments/<hw>/README.md
    python -m tools.points --all

The table sits between two markers in the handout, under "How it is graded":

    <!-- BEGIN POINTS (python -m tools.points) -->
    | task | points |
    ...
    <!-- END POINTS -->

It is computed, not typed: the homework's tests are collected as a grading collects them
(autograder.collect.collect_here: nothing is run), and autograder.rubric.points_summary, which also
makes results.json's points, the table's per-task line and the gradebook's columns, gives each task
the points of its cases (a test whose cases belong to several tasks is split by case) plus its rubric
entry, the code total without the bonus tasks, and the bonus; the notebook gets the points of its
nbgrader cells (notebook_points, the gradebook's notebook_max). tests/kit/test_points.py checks that
every handout's table, results.json and the gradebook agree; a grading of the solutions reports the
same per task (tests/kit/test_autograder.py).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

from tools.overlay import ROOT, homework_manifest

BEGIN, END = "<!-- BEGIN POINTS (python -m tools.points) -->", "<!-- END POINTS -->"
ROW = re.compile(r"^\| ([^|]+?) \| ([\d.]+) \|$", re.M)
TASK = re.compile(r"\d+\.\d+")
CODE, BONUS, NOTEBOOK = "code, in all", "bonus, on top of that", "notebook (nbgrader)"      # the table's last rows


def notebook_points(hw: str, root: str = ROOT) -> float:
    """Points of the graded cells of the homework's nbgrader notebook (0 without one)."""
    rel = homework_manifest(hw, root).get("notebook")
    if not rel or not os.path.exists(os.path.join(root, rel)):
        return 0.0
    with open(os.path.join(root, rel)) as f:
        cells = json.load(f)["cells"]
    return float(sum(c["metadata"].get("nbgrader", {}).get("points", 0) for c in cells
                     if c["metadata"].get("nbgrader", {}).get("grade")))


def collected_points(hw: str, root: str = ROOT) -> dict:
    """autograder.rubric.points_summary of the homework's tests as a grading collects them, rubric entries
    included (nothing is run: the maxima): the same computation as results.json and the gradebook."""
    from autograder.collect import collect_here
    from autograder.rubric import points_summary, rubric_tests
    manifest = homework_manifest(hw, root)
    tests, problems = collect_here(hw, root)
    if problems:
        raise RuntimeError(f"collecting the {hw} tests failed, so their points are unknown; fix the tests and run "
                           f"this again:\n" + "\n".join(problems))
    return points_summary(rubric_tests(tests, manifest, manifest.get("rubric") or {}), manifest)


def _fmt(x: float) -> str:
    return f"{x:g}" if abs(x - round(x)) > 1e-9 else str(int(round(x)))


def table(hw: str, points: dict, root: str = ROOT) -> str:
    """The handout's table from `points` (collected_points)."""
    m = homework_manifest(hw, root)
    rubric = bool(m.get("rubric", {}).get("all_cases"))
    lines = [BEGIN, "| task | points |", "|---|---|"]
    for task, row in points["tasks"].items():
        title = m["tasks"].get(task, "").split(":")[0]
        lines.append(f"| {task} {title} | {_fmt(row['max'])} |")
    bonus, nb = points["bonus"]["max"], notebook_points(hw, root)
    lines.append(f"| {CODE}{' (without the bonus)' if bonus else ''} | {_fmt(points['code']['max'])} |")
    if bonus:
        lines.append(f"| {BONUS} | {_fmt(bonus)} |")
    if nb:
        lines.append(f"| {NOTEBOOK} | {_fmt(nb)} |")
    lines.append("")
    lines.append("Each task's points are its tests' (a test function's points are shared by its cases)"
                 + (" plus one entry, \"every case of the task passes\", worth a third of them: a task with "
                    "one failing case loses at least a quarter of its points." if rubric else "."))
    lines.append("A case that runs on sim or under mpiexec counts only where the same task's tests on gloo pass.")
    lines.append(END)
    return "\n".join(lines)


def handout_totals(hw: str, root: str = ROOT) -> dict[str, float] | None:
    """{task: points} read back from the handout's table, None when it has none."""
    rows = handout_rows(hw, root)
    return None if rows is None else {task: pts for task, pts in rows.items() if TASK.fullmatch(task)}


def handout_rows(hw: str, root: str = ROOT) -> dict[str, float] | None:
    """Every row of the handout's table: {"3.1": 39, ..., CODE: 135, BONUS: 8, NOTEBOOK: 17}; None without one."""
    with open(os.path.join(root, "assignments", hw, "README.md")) as f:
        text = f.read()
    if BEGIN not in text:
        return None
    block = text[text.index(BEGIN):text.index(END)]
    rows = {}
    for label, pts in ROW.findall(block):
        task = label.split()[0]
        rows[task if TASK.fullmatch(task) else next((k for k in (CODE, BONUS, NOTEBOOK) if label.startswith(k)),
                                                    label)] = float(pts)
    return rows


def write(hw: str, root: str = ROOT) -> str:
    path = os.path.join(root, "assignments", hw, "README.md")
    with open(path) as f:
        text = f.read()
    block = table(hw, collected_points(hw, root), root)
    if BEGIN in text:
        text = text[:text.index(BEGIN)] + block + text[text.index(END) + len(END):]
    else:
        at = text.index("## How it is graded")
        head_end = text.index("\n", at) + 1
        text = text[:head_end] + "\n" + block + "\n" + text[head_end:]
    with open(path, "w") as f:
        f.write(text)
    return path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("homeworks", nargs="*")
    parser.add_argument("--all", action="store_true")
    args = parser.parse_args(argv)
    from tools.release import homeworks
    for hw in homeworks() if args.all else args.homeworks:
        print(f"tools.points: {write(hw)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Write each handout's table of points from what the grader actually grades.

    python -m tools.points hw1 [hw2 ...]      # rewrite the table in assignments/<hw>/README.md
    python -m tools.points --all

The table sits between two markers in the handout, under "How it is graded":

    <!-- BEGIN POINTS (python -m tools.points) -->
    | task | points |
    ...
    <!-- END POINTS -->

It is computed, not typed: the homework's tests are collected by the grader (a grading session that
grades nothing), each task gets the points of its cases plus its rubric entry, and the notebook gets
the points of its nbgrader cells. The kit's tests check that every handout's table equals what a
grading of the solutions reports per task (results.json extra_data.tasks).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

from autograder.rubric import is_bonus
from tools.overlay import ROOT, homework_manifest

BEGIN, END = "<!-- BEGIN POINTS (python -m tools.points) -->", "<!-- END POINTS -->"
ROW = re.compile(r"^\| (\d+\.\d+) [^|]*\| ([\d.]+) \|$", re.M)


def notebook_points(hw: str, root: str = ROOT) -> float:
    """Points of the graded cells of the homework's nbgrader notebook (0 without one)."""
    rel = homework_manifest(hw, root).get("notebook")
    if not rel or not os.path.exists(os.path.join(root, rel)):
        return 0.0
    with open(os.path.join(root, rel)) as f:
        cells = json.load(f)["cells"]
    return float(sum(c["metadata"].get("nbgrader", {}).get("points", 0) for c in cells
                     if c["metadata"].get("nbgrader", {}).get("grade")))


def collected_totals(hw: str) -> dict[str, float]:
    """{task: max points} from the grader's collection of the homework's tests (nothing is run)."""
    from autograder.rubric import rubric_tests, task_totals
    from autograder.session import GradingSession
    with GradingSession(hw, quiet=True) as session:
        tests = session.select()
        graded = rubric_tests(tests, session.manifest, session.rubric) if session.rubric else tests
        return {task: row["max"] for task, row in task_totals(graded).items()}


def _fmt(x: float) -> str:
    return f"{x:g}" if abs(x - round(x)) > 1e-9 else str(int(round(x)))


def table(hw: str, totals: dict[str, float], root: str = ROOT) -> str:
    m = homework_manifest(hw, root)
    rubric = bool(m.get("rubric", {}).get("all_cases"))
    lines = [BEGIN, "| task | points |", "|---|---|"]
    for task, pts in totals.items():
        title = m["tasks"].get(task, "").split(":")[0]
        lines.append(f"| {task} {title} | {_fmt(pts)} |")
    bonus = sum(pts for task, pts in totals.items() if is_bonus(m, task))
    code = sum(totals.values()) - bonus
    nb = notebook_points(hw, root)
    lines.append(f"| code, in all{' (without the bonus)' if bonus else ''} | {_fmt(code)} |")
    if bonus:
        lines.append(f"| bonus, on top of that | {_fmt(bonus)} |")
    if nb:
        lines.append(f"| notebook (nbgrader) | {_fmt(nb)} |")
    lines.append("")
    lines.append("Each task's points are its tests' (a test function's points are shared by its cases)"
                 + (" plus one entry, \"every case of the task passes\", worth a third of them: a task with "
                    "one failing case loses at least a quarter of its points." if rubric else "."))
    lines.append(END)
    return "\n".join(lines)


def handout_totals(hw: str, root: str = ROOT) -> dict[str, float] | None:
    """{task: points} read back from the handout's table, None when it has none."""
    with open(os.path.join(root, "assignments", hw, "README.md")) as f:
        text = f.read()
    if BEGIN not in text:
        return None
    block = text[text.index(BEGIN):text.index(END)]
    return {task: float(pts) for task, pts in ROW.findall(block)}


def write(hw: str, root: str = ROOT) -> str:
    path = os.path.join(root, "assignments", hw, "README.md")
    with open(path) as f:
        text = f.read()
    block = table(hw, collected_totals(hw), root)
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

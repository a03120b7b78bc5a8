"""An nbgrader course for the kit's homework notebooks, graded against each student's own package.

    python -m tools.nbgrader_course setup COURSE hw1 [hw2 ...]   # config, source/, release/ (student version)
    python -m tools.nbgrader_course setup COURSE hw1 --exchange /srv/nbgrader/exchange   # ... and release it there
    python -m tools.nbgrader_course collect COURSE hw1           # the exchange's submissions into submitted/
    python -m tools.nbgrader_course autograde COURSE hw1         # every student in submitted/ (or --student ID)
    python -m tools.nbgrader_course export COURSE                # grades.csv of every assignment and student

A student hands in, in their assignment folder (nbgrader's submitted/<student>/<hw>/ after collect):
the homework notebook and their package files (the homework's `editable` files, flat as the
handout's zip stores them). Plain `nbgrader autograde` would run every notebook against whatever
minitorch_dist the grading machine imports, so a correct student would be graded on the stubs;
here each student's notebook runs with PYTHONPATH on a kit copy with that student's files laid
over it (tools.overlay, with the earlier homeworks' reference code the homework runs on, homework.json
builds_on, laid as the code grader lays it), one student at a time. nbgrader runs as `python -m nbgrader` from this
interpreter, with its bin folder first on PATH (nbgrader calls `alembic` from there).

setup writes COURSE/nbgrader_config.py (course id "minitorch_dist", the gradebook in COURSE,
execution timeout 300 s per cell), copies each homework's source notebook (homework.json
"notebook") to COURSE/source/<hw>/ and runs generate_assignment: COURSE/release/<hw>/ is what
students receive (solutions and hidden tests stripped). With --exchange, the config names that
folder as nbgrader's exchange (Exchange.root; created if missing) and release_assignment puts each
homework there. Students then use nbgrader's own commands, with the same exchange and course id in
their nbgrader_config.py (CourseDirectory.course_id "minitorch_dist", Exchange.root; on a shared
machine without JupyterHub, CourseDirectory.student_id too, or they all submit as their login):

    nbgrader fetch_assignment hw1     # ./hw1/: the notebook; they add their package files beside it
    nbgrader submit hw1
    nbgrader fetch_feedback hw1       # after the instructor's generate_feedback and release_feedback

The student copy's README (tools.student_readme, "Handing in") gives students these steps as commands
run from their kit folder, with the config (Exchange.assignment_dir "handin") and the `cp` line of the
package files; tests/kit/test_nbgrader_course.py runs them as written. Give students the exchange
folder, and ask for their Gradescope id as student_id, so autograder.batch's gradebook can join the
two (it reports an id found in one source only).

`collect` fetches what they submitted into COURSE/submitted/ (nbgrader collect; by default it
warns when a submission's owner is not the student it names: pass --no-check-owner where every
student submits as one user, as in the kit's test).
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import subprocess
import sys

from tools.overlay import ROOT, homework_manifest, overlay

COURSE_ID = "minitorch_dist"
CONFIG = """c = get_config()
c.CourseDirectory.root = {root!r}
c.CourseDirectory.course_id = {course!r}
c.CourseDirectory.db_url = 'sqlite:///{root}/gradebook.db'
c.Execute.timeout = 300
{exchange}

# Hidden tests: the release strips them from locked test cells, and autograde puts the source cell
# back when a submitted cell's checksum differs, warning each time. A cell that is exactly the
# released one (the source minus its hidden tests) is the expected case: put back without a warning.
# Any other change to a locked cell is still reported.
import copy
from nbgrader.converters.autograde import Autograde
from nbgrader.preprocessors import ClearHiddenTests, OverwriteCells


class RestoreHiddenTests(OverwriteCells):
    def preprocess_cell(self, cell, resources, cell_index):
        grade_id = cell.metadata.get("nbgrader", {{}}).get("grade_id")
        self._released = False
        if grade_id is not None:
            try:
                source = self.gradebook.find_source_cell(grade_id, self.notebook_id, self.assignment_id)
                released = copy.deepcopy(cell)
                released.source = source.source
                ClearHiddenTests()._remove_hidden_test_region(released)
                self._released = "BEGIN HIDDEN TESTS" in source.source and released.source.strip() == cell.source.strip()
            except Exception:
                pass
        return super().preprocess_cell(cell, resources, cell_index)

    def report_change(self, name, attr, old, new):
        if not (attr == "checksum" and self._released):
            super().report_change(name, attr, old, new)


c.Autograde.sanitize_preprocessors = [RestoreHiddenTests if p is OverwriteCells else p
                                      for p in Autograde.class_traits()["sanitize_preprocessors"].default()]
"""


class CourseError(RuntimeError):
    """An nbgrader step failed or the course folder is not what it should be; the message says which."""


def nbgrader_env(base: dict | None = None) -> dict:
    env = dict(os.environ if base is None else base)
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    return env


def nbgrader(course: str, args: list[str], env: dict | None = None, timeout: float = 1800) -> str:
    """Run `python -m nbgrader ARGS` in the course folder; its log, or CourseError with the log's end."""
    done = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=nbgrader_env(env),
                          capture_output=True, text=True, timeout=timeout)
    log = done.stdout + done.stderr
    if done.returncode:
        raise CourseError(f"nbgrader {' '.join(args)} failed (exit {done.returncode}):\n{log[-4000:]}")
    return log


def notebook_of(hw: str, root: str = ROOT) -> str:
    rel = homework_manifest(hw, root).get("notebook")
    if not rel:
        raise CourseError(f"{hw} has no notebook (homework.json key 'notebook')")
    return rel


def setup(course: str, homeworks: list[str], root: str = ROOT, exchange: str | None = None) -> None:
    """The course folder with each homework generated, and released to `exchange` when given."""
    os.makedirs(course, exist_ok=True)
    course = os.path.abspath(course)
    line = f"c.Exchange.root = {os.path.abspath(exchange)!r}" if exchange else ""
    with open(os.path.join(course, "nbgrader_config.py"), "w") as f:
        f.write(CONFIG.format(root=course, course=COURSE_ID, exchange=line))
    for hw in homeworks:
        source = os.path.join(course, "source", hw)
        os.makedirs(source, exist_ok=True)
        shutil.copy(os.path.join(root, notebook_of(hw, root)), source)
        nbgrader(course, ["generate_assignment", hw, "--force"])
        if exchange:
            nbgrader(course, ["release_assignment", hw, "--force"])


def collect(course: str, hw: str, check_owner: bool = True) -> str:
    """nbgrader collect: the exchange's latest submission of each student into COURSE/submitted/; its log."""
    return nbgrader(os.path.abspath(course), ["collect", hw, "--update"]
                    + ([] if check_owner else ["--ExchangeCollect.check_owner=False"]))


def students(course: str, hw: str) -> list[str]:
    base = os.path.join(course, "submitted")
    return sorted(s for s in os.listdir(base) if os.path.isdir(os.path.join(base, s, hw))) if os.path.isdir(base) else []


def autograde(course: str, hw: str, only: list[str] | None = None, root: str = ROOT, log=print,
              env: dict | None = None) -> dict[str, list]:
    """Autograde each student's notebook on a kit copy holding that student's package files and the
    reference code the homework builds on (tools.overlay.overlay with the homework, as the code grader).
    env: the environment nbgrader starts from (default this process's).
    Returns {student: [kit paths laid over the stubs]} (an empty list: the student's package is the stubs)."""
    course, editable, laid = os.path.abspath(course), homework_manifest(hw, root)["editable"], {}
    for student in only or students(course, hw):
        folder = os.path.join(course, "submitted", student, hw)
        if not os.path.isdir(folder):
            raise CourseError(f"no submission of {student} for {hw}: {folder} does not exist")
        with overlay(folder, hw, root=root, prefix=f"nbgrader-{student}-") as ov:
            laid[student] = ov.overlaid
            log(f"{student}: {len(ov.overlaid)} of {len(editable)} package files"
                + (f" (missing: {', '.join(os.path.basename(m) for m in ov.missing)}: the stubs run)" if ov.missing else "")
                + (f"; reference code it builds on: {', '.join(ov.provided)}" if ov.provided else ""))
            log(nbgrader(course, ["autograde", hw, "--student", student, "--force"], ov.env(env)).rstrip())
    return laid


def export(course: str, out: str | None = None) -> str:
    """nbgrader's CSV of every grade (assignment, student, score, max score ...) to `out`."""
    out = os.path.abspath(out or os.path.join(course, "grades.csv"))
    nbgrader(course, ["export", "--to", out])
    return out


def read_grades(csv_path: str, column: str = "score") -> dict[tuple[str, str], float]:
    """{(assignment, student): score} from an exported grades.csv (or another column: "max_score"; {}
    when the CSV has no such column)."""
    with open(csv_path, newline="") as f:
        return {(row["assignment"], row["student_id"]): float(row[column] or 0) for row in csv.DictReader(f)
                if column in row}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("setup", help="config, source notebooks and generate_assignment")
    p.add_argument("course")
    p.add_argument("homeworks", nargs="+")
    p.add_argument("--exchange", help="release each homework to this nbgrader exchange folder")
    p = sub.add_parser("collect", help="nbgrader collect from the exchange into submitted/")
    p.add_argument("course")
    p.add_argument("homework")
    p.add_argument("--no-check-owner", action="store_true",
                   help="no warning when a submission's owner is not its student (one user submits for all)")
    p = sub.add_parser("autograde", help="every student (or --student) against their own package files")
    p.add_argument("course")
    p.add_argument("homework")
    p.add_argument("--student", action="append")
    p = sub.add_parser("export", help="grades.csv")
    p.add_argument("course")
    p.add_argument("--out")
    args = parser.parse_args(argv)
    try:
        if args.command == "setup":
            setup(args.course, args.homeworks, exchange=args.exchange)
            print(f"tools.nbgrader_course: {args.course}: release/ holds the student notebooks of {args.homeworks}"
                  + (f", released to {args.exchange}" if args.exchange else ""))
        elif args.command == "collect":
            collect(args.course, args.homework, not args.no_check_owner)
            print(f"tools.nbgrader_course: collected {len(students(args.course, args.homework))} student(s) "
                  f"of {args.homework} into {os.path.join(args.course, 'submitted')}")
        elif args.command == "autograde":
            graded = autograde(args.course, args.homework, args.student)
            print(f"tools.nbgrader_course: autograded {len(graded)} student(s) of {args.homework}")
        else:
            print(f"tools.nbgrader_course: wrote {export(args.course, args.out)}")
    except (CourseError, ValueError) as exc:
        print(f"tools.nbgrader_course: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

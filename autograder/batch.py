"""Grade a folder of submissions of one homework: one results.json per student and a gradebook.

    python -m autograder.batch hw1 ../export/ --out ../grades/                # Gradescope export, nbgrader, or zips
    python -m autograder.batch hw1 ../export/ --out ../grades/ --workers 2 --jobs 1
    python -m autograder.batch hw1 ../export/ --out ../grades/ --notebook-grades ../course/grades.csv
    python -m autograder.batch hw1 ../export/ --out ../grades/ --device cpu    # auto (default) | cpu | cuda
    python -m autograder.batch hw1 ../export/ --out ../grades/ --force         # grade every submission again

What it reads (found by looking at the folder):
  - a Gradescope export: submission_metadata.yml beside submission_<id>/ folders (the student is
    the first submitter's sid, else email, else name);
  - an nbgrader tree: submitted/<student>/<hw>/ (the folder given, or its submitted/);
  - anything else: every <student>.zip and every <student>/ folder in it.
What it writes, in --out: <student>/results.json (Gradescope's format, extra_data.batch says which
submission, its digest and when) and gradebook.csv: student, total, max, one column per task, and
with --notebook-grades (nbgrader's `export` CSV) the notebook's points and the sum.

Resumable: a student whose results.json was graded from the same submission (its digest), the same
test files, the same kit and the same score options (--only, --tests, --device, --limit, --deadline;
autograder/resume.py) is skipped, so a re-run after a crash or a new upload grades only what is new or
changed, and a full run after a quick --only pass grades everyone again; --force grades every
submission. Each results.json is written whole (a temporary file, then a rename), so a crash loses
at most the grading in flight.
One grading session (autograder.session: one grader's copy, --jobs zygotes) serves every student of
a worker; --workers K runs K of them on disjoint shares of the students. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import csv
import glob
import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass

from autograder.collect import DEFAULT_LIMIT
from autograder.devices import resolve_device
from autograder.options import add_score_options, as_arguments, score_options
from autograder.resume import digest, grading_key, previous_results, why_regrade
from autograder.session import DEFAULT_DEADLINE

TASK = re.compile(r"^HW\d+ (\d+(?:\.\d+)?)")


@dataclass(frozen=True)
class Submission:
    student: str
    path: str
    source: str          # "gradescope", "nbgrader" or "folder"


def _gradescope(folder: str) -> list[Submission]:
    import yaml                                     # PyYAML: Gradescope's metadata is Ruby-flavoured YAML
    with open(os.path.join(folder, "submission_metadata.yml")) as f:
        meta = yaml.safe_load(f) or {}
    out = []
    for key, info in sorted(meta.items()):
        people = (info or {}).get(":submitters") or [{}]
        who = people[0]
        student = str(who.get(":sid") or who.get(":email") or who.get(":name") or key)
        out.append(Submission(_safe(student), os.path.join(folder, key), "gradescope"))
    return out


def _safe(name: str) -> str:
    return re.sub(r"[^\w.@+-]", "_", name).strip("._") or "unnamed"


def discover(folder: str, homework: str) -> list[Submission]:
    """The submissions in `folder` (see the module docstring), sorted by student."""
    if os.path.exists(os.path.join(folder, "submission_metadata.yml")):
        return _gradescope(folder)
    base = os.path.join(folder, "submitted") if os.path.isdir(os.path.join(folder, "submitted")) else folder
    nbgrader = sorted(glob.glob(os.path.join(base, "*", homework)))
    if nbgrader and all(os.path.isdir(p) for p in nbgrader):
        return [Submission(_safe(os.path.basename(os.path.dirname(p))), p, "nbgrader") for p in nbgrader]
    subs = []
    for entry in sorted(os.listdir(folder)):
        path = os.path.join(folder, entry)
        if entry.endswith(".zip") and os.path.isfile(path):
            subs.append(Submission(_safe(entry[:-4]), path, "folder"))
        elif os.path.isdir(path) and not entry.startswith("."):
            subs.append(Submission(_safe(entry), path, "folder"))
    return subs


def _write(path: str, results: dict) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(results, f, indent=1)
    os.replace(tmp, path)


def grade_all(homework: str, subs: list[Submission], out: str, jobs: int = 2, only: str | None = None,
              log=lambda line: print(line, file=sys.stderr, flush=True), device: str = "auto", *,
              suites: list[tuple[str, str]] | None = None, limit: float = DEFAULT_LIMIT,
              deadline: float = DEFAULT_DEADLINE, force: bool = False) -> dict[str, int]:
    """Grade every submission not graded yet with these tests, kit and options (see Resumable), or all
    of them with `force`, on `device` (autograder.devices); {"graded": n, "skipped": n}."""
    from autograder.session import GradingSession
    options = {"only": only, "suites": suites, "device": device, "limit": limit, "deadline": deadline}
    key = grading_key(homework, options)
    todo, reasons = [], Counter()
    for sub in subs:
        dig = digest(sub.path)
        why = "--force" if force else why_regrade(previous_results(os.path.join(out, sub.student, "results.json")),
                                                   dig, key)
        if why:
            todo.append((sub, dig))
            reasons[why] += 1
    counts = {"graded": 0, "skipped": len(subs) - len(todo)}
    if counts["skipped"]:
        log(f"batch: {counts['skipped']} of {len(subs)} already graded (same submission, tests, kit and options): "
            f"skipped (--force grades them again)")
    for why, n in sorted(reasons.items()):
        log(f"batch: {n} to grade: {why}")
    if not todo:
        return counts
    t0 = time.monotonic()
    with GradingSession(homework, jobs=jobs, quiet=True, device=device, suites=suites, limit=limit,
                        deadline=deadline) as session:
        for i, (sub, dig) in enumerate(todo, 1):
            start = time.monotonic()
            results = session.grade(sub.path, only=only)
            results.setdefault("extra_data", {})["batch"] = {"student": sub.student, "submission": sub.path,
                                                             "source": sub.source, "digest": dig, "key": key,
                                                             "graded_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
            _write(os.path.join(out, sub.student, "results.json"), results)
            counts["graded"] += 1
            top = sum(t.get("max_score", 0) for t in results["tests"])
            eta = (time.monotonic() - t0) / i * (len(todo) - i)
            log(f"[{i}/{len(todo)}] {sub.student}: {results['score']:.2f} / {top:g} "
                f"({time.monotonic() - start:.0f} s; about {eta / 60:.0f} min left)")
    return counts


def task_scores(results: dict) -> dict[str, float]:
    """{task: points} summed over the test entries whose name starts with 'HWn task'."""
    out: dict[str, float] = {}
    for t in results.get("tests", []):
        m = TASK.match(t.get("name", ""))
        if m:
            out[m.group(1)] = out.get(m.group(1), 0.0) + float(t.get("score", 0))
    return out


def write_gradebook(homework: str, out: str, notebook_csv: str | None = None) -> str:
    """gradebook.csv from every <student>/results.json in `out` (and nbgrader's notebook scores)."""
    rows, tasks = [], set()
    for path in sorted(glob.glob(os.path.join(out, "*", "results.json"))):
        with open(path) as f:
            results = json.load(f)
        scores = task_scores(results)
        tasks |= set(scores)
        top = sum(t.get("max_score", 0) for t in results["tests"])
        rows.append((os.path.basename(os.path.dirname(path)), results["score"], top, scores))
    notebook = {}
    if notebook_csv:
        from tools.nbgrader_course import read_grades
        notebook = {student: score for (hw, student), score in read_grades(notebook_csv).items() if hw == homework}
    order = sorted(tasks, key=lambda k: [int(x) for x in k.split(".")])
    path = os.path.join(out, "gradebook.csv")
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["student", "code", "code_max", *[f"task {t}" for t in order]]
                   + (["notebook", "total"] if notebook_csv else []))
        for student, score, top, scores in rows:
            extra = [notebook.get(student, 0.0), score + notebook.get(student, 0.0)] if notebook_csv else []
            w.writerow([student, f"{score:.2f}", f"{top:g}", *[f"{scores.get(t, 0.0):.2f}" for t in order], *extra])
    return path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("homework")
    parser.add_argument("folder", help="a Gradescope export, an nbgrader course (or its submitted/), or zips")
    parser.add_argument("--out", required=True, help="where results and gradebook.csv go")
    parser.add_argument("--jobs", type=int, default=2, help="test functions at once within a worker")
    parser.add_argument("--workers", type=int, default=1, help="students graded at once (one session each)")
    parser.add_argument("--notebook-grades", help="nbgrader's export CSV, merged into the gradebook")
    parser.add_argument("--force", action="store_true",
                        help="grade every submission again, even one graded with the same submission, tests, kit "
                             "and options")
    add_score_options(parser)                       # --deadline --limit --only --tests --device: in the resume key
    parser.add_argument("--shard", help=argparse.SUPPRESS)            # i/K: this worker's share
    args = parser.parse_args(argv)
    options = score_options(args)
    try:
        resolve_device(args.device)                 # cuda without a GPU: said once, before any worker starts
    except ValueError as exc:
        print(f"batch: {exc}", file=sys.stderr)
        return 2
    subs = discover(args.folder, args.homework)
    if not subs:
        print(f"batch: no submission found in {args.folder}", file=sys.stderr)
        return 1
    os.makedirs(args.out, exist_ok=True)
    if args.shard:
        i, k = map(int, args.shard.split("/"))
        grade_all(args.homework, subs[i::k], args.out, args.jobs, force=args.force, **options)
        return 0
    if args.workers > 1:
        base = [sys.executable, "-m", "autograder.batch", args.homework, args.folder, "--out", args.out,
                "--jobs", str(args.jobs), *as_arguments(options)] + (["--force"] if args.force else [])
        procs = [subprocess.Popen(base + ["--shard", f"{i}/{args.workers}"]) for i in range(args.workers)]
        failed = [p.wait() for p in procs]
        if any(failed):
            print(f"batch: a worker failed (exit codes {failed}); run the same command again to resume",
                  file=sys.stderr)
            return 1
    else:
        grade_all(args.homework, subs, args.out, args.jobs, force=args.force, **options)
    path = write_gradebook(args.homework, args.out, args.notebook_grades)
    print(f"batch: {len(subs)} submission(s) of {args.homework}; gradebook: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

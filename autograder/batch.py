"""Grade a folder of submissions of one homework: one results.json per student and a gradebook.

    python -m autograder.batch hw1 ../export/ --out ../grades/                # Gradescope export, nbgrader, or zips
    python -m autograder.batch hw1 ../export/ --out ../grades/ --workers 2 --jobs 1
    python -m autograder.batch hw1 ../export/ --out ../grades/ --notebook-grades ../course/grades.csv
    python -m autograder.batch hw1 ../export/ --out ../grades/ --device cpu    # auto (default) | cpu | cuda
    python -m autograder.batch hw1 ../export/ --out ../grades/ --force         # grade every submission again

What it reads (found by looking at the folder):
  - a Gradescope export: submission_metadata.yml beside submission_<id>/ folders (a student is a
    submitter's sid, else email, else name; a group submission is graded once and every member gets
    its results.json and a gradebook row);
  - an nbgrader tree: submitted/<student>/<hw>/ (the folder given, or its submitted/);
  - anything else: every <student>.zip and every <student>/ folder in it.
What it writes, in --out: <student>/results.json (Gradescope's format, extra_data.batch says which
submission, its digest, its group's members and when) and gradebook.csv (autograder/gradebook.py): code
and bonus points with their maxima, one column per task, with --notebook-grades (nbgrader's `export`
CSV) the notebook's points and maximum, the total, and the problems found (a student in one source
and not the other, ...), which also go to stderr.

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
import glob
import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field

from autograder.collect import DEFAULT_LIMIT
from autograder.devices import resolve_device
from autograder.gradebook import write_gradebook
from autograder.leftovers import end_on_sigterm
from autograder.options import add_score_options, as_arguments, score_options
from autograder.results import out_of
from autograder.resume import digest, grading_key, previous_results, why_regrade
from autograder.session import DEFAULT_DEADLINE



@dataclass(frozen=True)
class Submission:
    student: str
    path: str
    source: str          # "gradescope", "nbgrader" or "folder"
    members: tuple[str, ...] = field(default=())     # a group submission's students, `student` first

    @property
    def students(self) -> tuple[str, ...]:
        """Every student this submission counts for (each gets its results.json)."""
        return self.members or (self.student,)


def _gradescope(folder: str) -> list[Submission]:
    import yaml                                     # PyYAML: Gradescope's metadata is Ruby-flavoured YAML
    with open(os.path.join(folder, "submission_metadata.yml")) as f:
        meta = yaml.safe_load(f) or {}
    out = []
    for key, info in sorted(meta.items()):
        people = (info or {}).get(":submitters") or [{}]
        members = tuple(dict.fromkeys(_safe(str(who.get(":sid") or who.get(":email") or who.get(":name") or key))
                                      for who in people))
        out.append(Submission(members[0], os.path.join(folder, key), "gradescope",
                              members if len(members) > 1 else ()))
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
        why = "--force" if force else next(filter(None, (
            why_regrade(previous_results(os.path.join(out, student, "results.json")), dig, key)
            for student in sub.students)), None)
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
            batch = {"submission": sub.path, "source": sub.source, "digest": dig, "key": key,
                     "members": list(sub.students), "graded_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
            for student in sub.students:                # a group: the same grading for every member
                results.setdefault("extra_data", {})["batch"] = {"student": student, **batch}
                _write(os.path.join(out, student, "results.json"), results)
            counts["graded"] += 1
            eta = (time.monotonic() - t0) / i * (len(todo) - i)
            log(f"[{i}/{len(todo)}] {' + '.join(sub.students)}: {results['score']:.2f} / {out_of(results['extra_data'])} "
                f"({time.monotonic() - start:.0f} s; about {eta / 60:.0f} min left)")
    return counts


def main(argv=None) -> int:
    with end_on_sigterm():                          # a stopped worker closes its session: nothing is left
        return _main(argv)


def _main(argv=None) -> int:
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
        try:
            failed = [p.wait() for p in procs]
        except KeyboardInterrupt:                   # Ctrl-C or SIGTERM: each worker closes its session
            for p in procs:
                p.terminate()
            for p in procs:
                p.wait()
            raise
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

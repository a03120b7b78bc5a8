"""Write the student copy of the kit.

    python -m tools.release OUTDIR                        # every homework, lectures executed
    python -m tools.release OUTDIR --homework hw1         # only assignments/hw1 (repeatable)
    python -m tools.release OUTDIR --no-execute-lectures  # ship lectures as they are in the kit
    python -m tools.release OUTDIR --homework hw3 --reference hw2   # hw3 runs on hw2's BucketedDDP

What ships: the kit's files as tools.overlay.kit_files lists them (git's tracked and
untracked-unignored files: commit or ignore work in progress first), with the package as
it is in the working tree (the stubs; the release refuses to run if a stub has drifted from
its solution), EXCEPT the instructor-only paths:

    solutions/    reference code            autograder/   hidden tests and grading
    tools/        stubs, overlay, release   tests/kit/    tests of those tools
    .ci/          CI entry point (runs the instructor test suite)

and except assignments/<hw>/ of homeworks not selected with --homework; README.md is the students'
(tools/student_readme.py). Each selected homework's nbgrader notebook (homework.json "notebook") is
nbgrader's student version (`nbgrader generate_assignment` in a temporary course folder: solution cells
cleared, hidden tests removed), without its percent source (tools.notebooks: it holds the answers); one
that does not exist yet is skipped with a warning. Lecture notebooks ship with their outputs (and their
percent sources), executed at release time under the solutions overlay (they call the reference code).
A homework that runs on an earlier one's code (homework.json builds_on: hw3 on hw2's
BucketedDDP) gets that reference code with --reference <earlier hw>, an instructor's choice once
the earlier homework is due; without it the stubs stay and the release warns. Finally the copy is
scanned for solution markers and solution lines; any hit fails the release and nothing is
written. A provided reference file may hold its homework's solution lines and no other's. No archive
ships either: build products (Gradescope uploads, submission zips) live in the ignored dist/ and are
never copied (tools.overlay.build_product); an archive found in the copy all the same (any name; found
by its bytes too) fails the release, with what its members would leak (tools.archives).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

from tools.archives import is_archive, members
from tools.notebooks import source_of
from tools.overlay import ROOT, copy_kit, homework_manifest, overlay
from tools.stubs import BEGIN, END, SOLUTIONS, drifted, lay_provided, solution_files
from tools.student_readme import student_readme

INSTRUCTOR_ONLY = ("solutions", "autograder", "tools", os.path.join("tests", "kit"), ".ci")
MARKERS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS", "BEGIN MARK SCHEME")
SCANNED = (".py", ".ipynb", ".md", ".txt", ".json", ".cfg", ".toml", ".sh")


class ReleaseError(RuntimeError):
    """The release cannot be written safely (drifted stubs, nbgrader failure, a leak)."""


def homeworks(root: str = ROOT) -> list[str]:
    """Every homework with an assignments/<hw>/homework.json."""
    base = os.path.join(root, "assignments")
    if not os.path.isdir(base):
        return []
    return sorted(d for d in os.listdir(base) if os.path.exists(os.path.join(base, d, "homework.json")))


def solution_regions(root: str = ROOT, leave_out: str | None = None) -> list[list[str]]:
    """The telling lines (is_telling) of every solution region, stripped, in order (but those of the
    homework `leave_out`, e.g. "hw2": its regions are marked "(HW2 task ...)")."""
    regions = []
    for rel in solution_files(root):
        current = None
        with open(os.path.join(root, SOLUTIONS, rel)) as f:
            for line in f:
                begin = BEGIN.match(line)
                if begin:
                    current = None if leave_out and begin.group("hw").lower() == leave_out.lower() else []
                elif END.match(line):
                    if current is not None:
                        regions.append(current)
                    current = None
                elif current is not None and is_telling(line):
                    current.append(line.strip())
    return regions


# Lines of a solution region that carry no answer: rank/neighbour bookkeeping that the kit's
# runtime tests, lectures and benchmarks write the same way. Shorter lines (`return x`) are skipped.
GENERIC = {
    "p, r = group.size, group.rank",
    "right, left = (r + 1) % p, (r - 1) % p",
    "for step in range(p - 1):",
    "if group.rank == 0:",
    "if group.rank != 0:",
    "if group.size < 2:",
    "start = group.now()",
}


LONG_LINE = 60     # a solution line this long found anywhere is a leak by itself


def is_telling(line: str) -> bool:
    """A line long and specific enough that finding it elsewhere means the solution leaked."""
    text = line.strip()
    return len(text) >= 16 and not text.startswith("#") and text not in GENERIC


def _nbgrader_release(source_nb: str, homework: str, dest_nb: str) -> None:
    """Write nbgrader's student version of `source_nb` to `dest_nb`."""
    with tempfile.TemporaryDirectory(prefix="release-nbgrader-") as course:
        src_dir = os.path.join(course, "source", homework)
        os.makedirs(src_dir)
        name = os.path.basename(source_nb)
        shutil.copyfile(source_nb, os.path.join(src_dir, name))
        cmd = [sys.executable, "-m", "nbgrader", "generate_assignment", homework, "--course-dir", course,
               "--no-db", "--force"]
        out = subprocess.run(cmd, cwd=course, capture_output=True, text=True)
        released = os.path.join(course, "release", homework, name)
        if out.returncode or not os.path.exists(released):
            raise ReleaseError(f"nbgrader generate_assignment failed on {source_nb} (exit {out.returncode}):\n"
                               f"{out.stderr[-3000:]}")
        shutil.copyfile(released, dest_nb)
    if os.path.exists(source_of(dest_nb)):              # the notebook's percent source holds the answers
        os.remove(source_of(dest_nb))


def execute_notebook(path: str, env: dict, timeout: float = 600):
    """Run the notebook at `path` under a real Jupyter kernel (cwd: its folder) with `env`;
    return it with its outputs. Raises nbclient's CellExecutionError on the first failing cell."""
    import nbclient
    import nbformat
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=False,
                                     resources={"metadata": {"path": os.path.dirname(path)}})
    client.execute(env=env)
    return nb


def _execute_lectures(lectures: list[str], dest: str, root: str, timeout: float, executed: dict) -> None:
    """Write each lecture (path relative to the kit) with outputs: taken from `executed` when it is
    there, else run now under the solutions overlay."""
    import nbformat
    with overlay("solutions", root=root) as ov:
        for rel in lectures:
            nb = executed.get(rel)
            if nb is None:
                try:
                    nb = execute_notebook(os.path.join(ov.root, rel), ov.env(), timeout)
                except Exception as exc:  # noqa: BLE001 - any cell error stops the release with its text
                    raise ReleaseError(f"lecture {rel} failed under the solutions overlay: "
                                       f"{type(exc).__name__}: {str(exc)[-2000:]}") from None
            nbformat.write(nb, os.path.join(dest, rel))


def readable_text(path: str) -> str:
    """A file's text as a reader sees it: a notebook's JSON strings decoded (quotes unescaped)."""
    with open(path, errors="replace") as f:
        return readable(f.read(), path)


def readable(text: str, name: str) -> str:
    """`text`, the content of the file `name`, as a reader sees it (readable_text)."""
    if not name.endswith(".ipynb"):
        return text

    def strings(node) -> str:
        if isinstance(node, str):
            return node
        if isinstance(node, list) and all(isinstance(item, str) for item in node):
            return "".join(node)                   # a cell's source lines
        items = node.values() if isinstance(node, dict) else node if isinstance(node, list) else []
        return "\n".join(strings(item) for item in items)
    try:
        return text + "\n" + strings(json.loads(text))
    except ValueError:
        return text


def leak_index(root: str = ROOT, leave_out: str | None = None) -> tuple[set[str], set[tuple[str, str]]]:
    """(long telling lines, pairs of telling lines in a row) of every solution region (but those of the
    homework `leave_out`): what leaks_in_text looks for. Build it once to scan many files."""
    regions = solution_regions(root, leave_out)
    long_lines = {line for region in regions for line in region if len(line) >= LONG_LINE}
    pairs = {pair for region in regions for pair in zip(region, region[1:])}
    return long_lines, pairs


def leaks_in_text(text: str, root: str = ROOT, index: tuple | None = None) -> list[str]:
    """The solution markers and solution text in `text` (a file as a reader sees it).

    Solution text is two telling lines that follow each other in a solution region and follow
    each other in the text (other lines skipped on both sides), or one telling line of
    LONG_LINE characters or more. A single short line (`for h in handles:`, `if group.size == 1:`)
    is ordinary code that provided files write the same way, not a leak. `index`: leak_index(root),
    when the caller scans many texts.
    """
    long_lines, pairs = index or leak_index(root)
    telling = [line.strip() for line in text.splitlines() if is_telling(line)]
    found = {line for line in telling if line in long_lines}
    found |= {f"{a} / {b}" for a, b in zip(telling, telling[1:]) if (a, b) in pairs}
    return [f"marker {m!r}" for m in MARKERS if m in text] + [f"solution text {t!r}" for t in sorted(found)]


ARCHIVE_FOUND = ("an archive, and no archive may ship (build products belong in the ignored dist/, which "
                 "is never copied): delete it from the kit, or move it to dist/")


def find_leaks(folder: str, root: str = ROOT, provided: dict[str, str] | None = None) -> list[str]:
    """'path: what' for every solution marker or solution text (leaks_in_text) under `folder`, and
    for every archive (tools.archives.is_archive, hidden files included): the archive itself, then
    'path!member: what' for what its members hold.

    `provided`: {kit path: homework} of the reference code shipped for a later homework (builds_on,
    --reference): such a file may hold that (due) homework's solutions and no other's; every other
    file is scanned for every solution, those included.
    """
    leaks, index, provided = [], leak_index(root), provided or {}
    paths = sorted(os.path.join(top, name) for top, _, names in os.walk(folder) for name in names)
    for path in paths:
        rel = os.path.relpath(path, folder)
        if not os.path.isfile(path) or os.path.islink(path):
            continue
        if is_archive(path):
            leaks.append(f"{rel}: {ARCHIVE_FOUND}")
            for name, data in members(path):
                if name.endswith(SCANNED):
                    text = readable(data.decode(errors="replace"), name)
                    leaks += [f"{rel}!{name}: {what}" for what in leaks_in_text(text, root, index)]
        elif path.endswith(SCANNED):
            own = leak_index(root, leave_out=provided[rel]) if rel in provided else index
            leaks += [f"{rel}: {what}" for what in leaks_in_text(readable_text(path), root, own)]
    return leaks


def release(outdir: str, selected: list[str] | None = None, execute_lectures: bool = True,
            lecture_timeout: float = 600, root: str = ROOT, log=print, executed: dict | None = None,
            references: list[str] = ()) -> dict:
    """Write the student copy to `outdir` (must not exist or be empty); returns what was done.

    `executed`: {lecture path relative to the kit: notebook} of lectures already run under the
    solutions overlay (the test suite runs each once and shares it); the others run here.
    """
    if os.path.exists(outdir) and os.listdir(outdir):
        raise ReleaseError(f"{outdir} exists and is not empty; remove it or pick another folder")
    bad = drifted(root)
    if bad:
        raise ReleaseError(f"stubs out of date: {bad}; run python -m tools.stubs first")
    known = homeworks(root)
    selected = known if selected is None else selected
    unknown = sorted(set(selected) - set(known))
    if unknown:
        raise ReleaseError(f"unknown homework(s) {unknown}; known: {known}")
    parent = os.path.dirname(os.path.abspath(outdir))
    os.makedirs(parent, exist_ok=True)
    build = tempfile.mkdtemp(prefix=".release-", dir=parent)
    report = {"homeworks": selected, "notebooks": [], "skipped_notebooks": [], "lectures": []}
    try:
        copy_kit(build, root)                              # 1. pristine kit (no solutions/)
        if os.path.islink(os.path.join(build, ".venv")):
            os.unlink(os.path.join(build, ".venv"))        # copy_kit links the venv for overlays; not here
        dropped = list(INSTRUCTOR_ONLY) + [os.path.join("assignments", hw) for hw in known if hw not in selected]
        for rel in dropped:                                # 2. minus instructor-only paths
            shutil.rmtree(os.path.join(build, rel), ignore_errors=True)
        with open(os.path.join(build, "README.md"), "w") as f:     # 2b. the students' README
            f.write(student_readme(selected, root))
        provided = lay_provided(build, selected, list(references), root, log)   # 2c. earlier homeworks' code
        report["provided"] = provided
        for hw in selected:                                # 3. nbgrader student notebooks
            nb_rel = homework_manifest(hw, root).get("notebook")
            if not nb_rel:
                continue
            source = os.path.join(root, nb_rel)
            if not os.path.exists(source):
                log(f"tools.release: WARNING: {nb_rel} does not exist yet; {hw} ships without its notebook")
                report["skipped_notebooks"].append(nb_rel)
                continue
            _nbgrader_release(source, hw, os.path.join(build, nb_rel))
            report["notebooks"].append(nb_rel)
        lectures = sorted(os.path.relpath(p, build) for p in glob.glob(os.path.join(build, "lectures", "**",
                                                                                    "*.ipynb"), recursive=True))
        if lectures and execute_lectures:                  # 4. lectures with outputs
            log(f"tools.release: executing {len(lectures)} lecture notebook(s) under the solutions overlay")
            _execute_lectures(lectures, build, root, lecture_timeout, executed or {})
        report["lectures"] = lectures
        leaks = find_leaks(build, root, provided)          # 5. nothing secret, no archive
        if leaks:
            raise ReleaseError("the release would leak solutions or ship an archive:\n  " + "\n  ".join(leaks[:20]))
        if os.path.exists(outdir):
            os.rmdir(outdir)
        os.rename(build, outdir)
    finally:
        shutil.rmtree(build, ignore_errors=True)
    return report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("outdir", help="folder to write (must not exist, or be empty)")
    parser.add_argument("--homework", action="append", help="release only this homework (repeatable)")
    parser.add_argument("--no-execute-lectures", action="store_true",
                        help="ship lecture notebooks as they are instead of executing them")
    parser.add_argument("--reference", action="append", default=[], metavar="HW",
                        help="ship HW's reference code that a selected homework builds on (homework.json "
                             "builds_on), once HW is due (repeatable)")
    parser.add_argument("--lecture-timeout", type=float, default=600, help="seconds per lecture cell")
    args = parser.parse_args(argv)
    try:
        report = release(args.outdir, args.homework, not args.no_execute_lectures, args.lecture_timeout,
                         references=args.reference)
    except ReleaseError as exc:
        print(f"tools.release: {exc}", file=sys.stderr)
        return 1
    print(f"tools.release: wrote {args.outdir}: homeworks {report['homeworks']}, "
          f"notebooks {report['notebooks']}, lectures {len(report['lectures'])}"
          + (f", notebooks skipped (missing) {report['skipped_notebooks']}" if report["skipped_notebooks"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Generate the student stubs in minitorch_dist/ from the reference files in solutions/.

    python -m tools.stubs            # rewrite every stub from its solution
    python -m tools.stubs --check    # exit 1 and list the files that drifted (CI)

A solution region sits inside a function body:

        # BEGIN SOLUTION  (HW1 task 1.4)
        ...reference code...
        # END SOLUTION

and becomes, at the same indentation, a region the student replaces:

        # BEGIN YOUR CODE  (HW1 task 1.4)
        raise NotImplementedError("HW1 task 1.4: naive_all_reduce is not implemented yet (see ...)")
        # END YOUR CODE

Everything outside the regions is copied unchanged, so signatures and docstrings match.
"""

from __future__ import annotations

import argparse
import os
import re
import sys

from tools.overlay import homework_manifest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOLUTIONS = "solutions"
BEGIN = re.compile(r"^(?P<indent>\s*)# BEGIN SOLUTION\s+\((?P<hw>HW\d+) task (?P<task>[\w.]+)\)\s*$")
END = re.compile(r"^\s*# END SOLUTION\s*$")
DEF = re.compile(r"^(?P<indent>\s*)(async\s+)?def\s+(?P<name>\w+)\s*\(")
HANDOUT = {"HW1": "assignments/hw1/README.md", "HW2": "assignments/hw2/README.md",
           "HW3": "assignments/hw3/README.md", "HW4": "assignments/hw4/README.md",
           "HW5": "assignments/hw5/README.md", "HW6": "assignments/hw6/README.md"}


class MarkerError(ValueError):
    """A solution file whose markers are unbalanced or outside a function."""


def _enclosing_function(lines: list[str], index: int, indent: str) -> str:
    for line in reversed(lines[:index]):
        m = DEF.match(line)
        if m and len(m.group("indent")) < len(indent):
            return m.group("name")
    return "this code"


def stub_text(solution: str, path: str = "<solution>") -> str:
    """The stub for one solution file's text (raises MarkerError on bad markers)."""
    lines = solution.splitlines(keepends=True)
    out: list[str] = []
    inside = None
    for i, line in enumerate(lines):
        begin = BEGIN.match(line)
        if inside is not None:
            if begin:
                raise MarkerError(f"{path}:{i + 1}: BEGIN SOLUTION inside the region opened at line {inside + 1}")
            if END.match(line):
                inside = None
            continue
        if begin:
            indent, hw, task = begin.group("indent"), begin.group("hw"), begin.group("task")
            if not indent:
                raise MarkerError(f"{path}:{i + 1}: solution regions go inside function bodies")
            name = _enclosing_function(lines, i, indent)
            where = HANDOUT.get(hw, "the handout")
            out.append(f"{indent}# BEGIN YOUR CODE  ({hw} task {task})\n")
            out.append(f'{indent}raise NotImplementedError("{hw} task {task}: {name} is not implemented yet '
                       f'(see {where})")\n')
            out.append(f"{indent}# END YOUR CODE\n")
            inside = i
            continue
        if END.match(line):
            raise MarkerError(f"{path}:{i + 1}: END SOLUTION without a BEGIN SOLUTION")
        out.append(line)
    if inside is not None:
        raise MarkerError(f"{path}:{inside + 1}: BEGIN SOLUTION is never closed by END SOLUTION")
    return "".join(out)


def reference_text(solution: str) -> str:
    """A solution file as provided code: its regions' code kept, the marker lines dropped."""
    return "".join(line for line in solution.splitlines(keepends=True) if not (BEGIN.match(line) or END.match(line)))


def lay_references(dest: str, files: list[str], root: str = ROOT) -> list[str]:
    """Write the reference of each kit path in `files` (reference_text of solutions/<path>) into the
    kit copy `dest`; returns the paths written. A homework that runs on an earlier one's code lists
    that code in its homework.json, key builds_on ({homework: [paths]})."""
    for rel in files:
        with open(os.path.join(root, SOLUTIONS, rel)) as f:
            text = reference_text(f.read())
        with open(os.path.join(dest, rel), "w") as f:
            f.write(text)
    return list(files)


def lay_provided(build: str, selected: list[str], references: list[str], root: str, log) -> dict[str, str]:
    """Lay into `build` the earlier homeworks' reference code the selected ones build on, for the
    homeworks named in `references` (those already due); warn about the others.
    Returns {kit path laid: the homework it comes from}."""
    laid = {}
    for hw in selected:
        for earlier, files in homework_manifest(hw, root).get("builds_on", {}).items():
            if earlier in references:
                laid.update(dict.fromkeys(lay_references(build, files, root), earlier))
            else:
                log(f"tools.release: WARNING: {hw} runs on {earlier}'s {', '.join(files)}; the copy holds the stubs "
                    f"(students need their own {earlier}). Once {earlier} is due, add --reference {earlier}.")
    return laid


def builds_on(manifest: dict) -> list[str]:
    """The kit paths of earlier homeworks' reference code a homework runs on (homework.json builds_on)."""
    return [rel for files in manifest.get("builds_on", {}).values() for rel in files]


def solution_files(root: str = ROOT) -> list[str]:
    """Paths (relative to the kit root, e.g. minitorch_dist/collectives/tree.py) with a solution."""
    base = os.path.join(root, SOLUTIONS)
    found = []
    for folder, _, files in os.walk(base):
        for name in files:
            if name.endswith(".py"):
                found.append(os.path.relpath(os.path.join(folder, name), base))
    return sorted(found)


def drifted(root: str = ROOT) -> list[str]:
    """Stubs whose text differs from what their solution generates (missing ones included)."""
    bad = []
    for rel in solution_files(root):
        with open(os.path.join(root, SOLUTIONS, rel)) as f:
            want = stub_text(f.read(), rel)
        target = os.path.join(root, rel)
        if not os.path.exists(target):
            bad.append(rel)
            continue
        with open(target) as f:
            if f.read() != want:
                bad.append(rel)
    return bad


def write_stubs(root: str = ROOT) -> list[str]:
    """Rewrite every stub from its solution; returns the paths written."""
    written = []
    for rel in solution_files(root):
        with open(os.path.join(root, SOLUTIONS, rel)) as f:
            text = stub_text(f.read(), rel)
        target = os.path.join(root, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w") as f:
            f.write(text)
        written.append(rel)
    return written


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only report stubs that differ from their solutions")
    args = parser.parse_args(argv)
    try:
        if args.check:
            bad = drifted()
            for rel in bad:
                print(f"stub out of date: {rel} (run: python -m tools.stubs)", file=sys.stderr)
            return 1 if bad else 0
        for rel in write_stubs():
            print(f"wrote {rel}")
    except MarkerError as exc:
        print(f"tools.stubs: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Run anything against an implementation without touching the working tree.

    python -m tools.overlay solutions -- python -m pytest assignments/hw1/tests
    python -m tools.overlay path/to/submission.zip --homework hw1 -- python assignments/hw1/bench_allreduce.py

The kit is copied to a temporary folder (the pristine package, with its stubs), the
implementation's files are laid over it, and the command runs there with that copy
first on PYTHONPATH; the copy is deleted afterwards (--keep keeps it).

An implementation is `solutions` (every reference file), a folder, or a zip. With
--homework, only that homework's editable files (assignments/<hw>/homework.json) are
taken from it; a submission may hold them at their kit paths or flat by file name; and the
earlier homeworks' reference code the homework runs on (homework.json builds_on) is laid too,
by the code the autograder lays it with (tools.stubs.lay_references).

Build products never reach a copy: the top-level dist/ and build/ folders (where
tools.gradescope and minitorch_dist.submit write) and archives anywhere (build_product).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import posixpath
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

from tools.intake import SKIP_DIRS, Entry, Intake, Limits, OverCap, Refused, human

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIST = "dist"               # build products (Gradescope uploads, submission zips): ignored, never copied
BUILD_DIRS = (DIST, "build")
ARCHIVES = (".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".gz", ".bz2", ".xz",
            ".7z", ".rar", ".whl", ".egg")


@dataclass
class Overlay:
    """What an overlay holds: its folder, the files laid over the kit, and the ones not found."""

    root: str
    overlaid: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)    # kit path -> why it was not taken, what to do
    notes: list[str] = field(default_factory=list)           # about the submission as a whole
    provided: list[str] = field(default_factory=list)        # earlier homeworks' reference laid (builds_on)

    def env(self, base: dict | None = None) -> dict:
        """Environment that imports minitorch_dist from the overlay first."""
        env = dict(os.environ if base is None else base)
        env["PYTHONPATH"] = os.pathsep.join([self.root] + [p for p in [env.get("PYTHONPATH")] if p])
        return env


def homework_manifest(homework: str, root: str = ROOT) -> dict:
    """assignments/<homework>/homework.json as a dict (ValueError if there is none)."""
    path = os.path.join(root, "assignments", homework, "homework.json")
    if not os.path.exists(path):
        known = sorted(d for d in os.listdir(os.path.join(root, "assignments"))
                       if os.path.exists(os.path.join(root, "assignments", d, "homework.json")))
        raise ValueError(f"unknown homework {homework!r}: no {path}; known: {known}")
    with open(path) as f:
        return json.load(f)


def build_product(rel: str) -> bool:
    """True for a kit path under a top-level build folder (dist/, build/) or an archive anywhere."""
    parts = rel.replace(os.sep, "/").split("/")
    return (len(parts) > 1 and parts[0] in BUILD_DIRS) or parts[-1].lower().endswith(ARCHIVES)


def kit_files(root: str = ROOT) -> list[str]:
    """The kit's files relative to `root`: git's tracked and unignored files, else a walk; never
    solutions/ or a build product (build_product)."""
    try:
        out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
                             cwd=root, capture_output=True, check=True).stdout.decode()
        files = [f for f in out.split("\0") if f and os.path.isfile(os.path.join(root, f))]
        files = [f for f in files if not f.startswith("solutions/")]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for folder, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not (folder == root and d == "solutions")]
            files += [os.path.relpath(os.path.join(folder, n), root) for n in names if not n.endswith(".pyc")]
    return sorted(f for f in files if not build_product(f))


def copy_kit(dest: str, root: str = ROOT, skip: tuple[str, ...] = ()) -> None:
    """Copy the pristine kit (no solutions/) to `dest`, linking its .venv if there is one; `skip`:
    folders (kit paths ending in "/") left out."""
    for rel in kit_files(root):
        if rel.startswith(skip):
            continue
        target = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(os.path.join(root, rel), target)
    venv = os.path.join(root, ".venv")
    if os.path.isdir(venv) and not os.path.exists(os.path.join(dest, ".venv")):
        os.symlink(venv, os.path.join(dest, ".venv"))


def _find(entries: dict[str, Entry], rel: str) -> Entry | None:
    """The submitted entry for kit path `rel`: same path, a path ending in it, or a unique base name."""
    if rel in entries:
        return entries[rel]
    tails = [k for k in entries if k.endswith("/" + rel)]
    if len(tails) == 1:
        return entries[tails[0]]
    names = [k for k in entries if posixpath.basename(k) == posixpath.basename(rel)]
    return entries[names[0]] if len(names) == 1 else None


ONLY_SOURCES = "submit only your source files"
NOTED_ENTRIES = 5       # ignored links, special files, unsafe paths named in the notes; the rest are counted


def apply(impl: str, dest: str, editable: list[str] | None = None, root: str = ROOT,
          limits: Limits = Limits()) -> Overlay:
    """Lay `impl` ("solutions", a folder or a zip) over the kit copy in `dest`.

    Only the `editable` kit paths are taken (every regular file when None), and each one only
    within `limits` (tools.intake): sizes are checked as declared before anything is read, and
    again while reading. A file that is refused leaves the kit's file (the stub) in place and is
    listed in `refused` with a sentence that says why and what to do.
    """
    result = Overlay(dest)
    if impl == "solutions":
        impl = os.path.join(root, "solutions")

    def refuse(rel: str, entry: Entry, why: str) -> None:
        shown = rel if entry.name == rel else f"{rel} (submitted as {entry.name})"
        result.refused[rel] = f"{shown} {why}"

    with Intake(impl, limits) as sub:
        usable = {e.name: e for e in sub.entries if not e.problem}
        unusable = {e.name: e for e in sub.entries if e.problem}
        wanted = editable if editable is not None else sorted(usable)
        chosen: dict[str, Entry] = {}
        for rel in wanted:
            entry = _find(usable, rel) or _find(unusable, rel)
            if entry is None:
                result.missing.append(rel)
            else:
                chosen[rel] = entry
        matched = [id(e) for e in chosen.values()]
        declared = 0                                      # the declared sizes, before anything is read
        for rel, entry in list(chosen.items()):
            if entry.problem:
                refuse(rel, entry, entry.problem)
            elif entry.size > limits.file_bytes:
                refuse(rel, entry, f"is {human(entry.size)}, over the {human(limits.file_bytes)} limit per file: "
                                   f"{ONLY_SOURCES}")
            elif declared + entry.size > limits.total_bytes:
                refuse(rel, entry, f"is {human(entry.size)}, which would bring the files read from the submission "
                                   f"to {human(declared + entry.size)}, over the {human(limits.total_bytes)} limit "
                                   f"in total: {ONLY_SOURCES}")
            else:
                declared += entry.size
                continue
            del chosen[rel]
        taken = 0
        for rel, entry in chosen.items():
            per_file = limits.file_bytes <= limits.total_bytes - taken
            cap = limits.file_bytes if per_file else limits.total_bytes - taken
            try:
                data = sub.read(entry, cap)
            except OverCap:
                limit = f"the {human(limits.file_bytes)} limit per file" if per_file else \
                    f"the {human(limits.total_bytes)} limit on the files read from the submission in total"
                refuse(rel, entry, f"holds more than {human(cap)} although it declared {human(entry.size)}, over "
                                   f"{limit}: {ONLY_SOURCES}")
                continue
            except Refused as exc:
                refuse(rel, entry, str(exc))
                continue
            taken += len(data)
            target = os.path.join(dest, rel)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as f:
                f.write(data)
            result.overlaid.append(rel)
        if sub.overflow:
            result.notes.append(f"the submission holds more than {limits.entries} files and folders; only the "
                                f"first {limits.entries} were looked at: {ONLY_SOURCES}")
        ignored = [e for e in unusable.values() if id(e) not in matched]
        result.notes += [f"ignored {e.name}, which {e.problem}" for e in ignored[:NOTED_ENTRIES]]
        if len(ignored) > NOTED_ENTRIES:
            result.notes.append(f"{len(ignored) - NOTED_ENTRIES} more links, special files or unsafe paths were "
                                f"ignored")
    return result


@contextlib.contextmanager
def overlay(impl: str, homework: str | None = None, keep: bool = False, root: str = ROOT,
            prefix: str = "minitorch-overlay-"):
    """Context manager: a temporary kit copy with `impl` laid over it; yields an Overlay. With
    `homework`, only its editable files are taken, and the reference code of the earlier homeworks it
    runs on (builds_on) is laid as the grader lays it."""
    from tools.stubs import builds_on, lay_references      # tools.stubs imports this module
    manifest = homework_manifest(homework, root) if homework else None
    dest = tempfile.mkdtemp(prefix=prefix)
    try:
        copy_kit(dest, root)
        ov = apply(impl, dest, manifest["editable"] if manifest else None, root)
        if manifest:
            ov.provided = lay_references(dest, builds_on(manifest), root)
        yield ov
    finally:
        if not keep:
            shutil.rmtree(dest, ignore_errors=True)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv[argv.index("--") + 1:] if "--" in argv else []
    own = argv[:argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     usage="python -m tools.overlay IMPL [--homework HW] [--keep] -- COMMAND ...")
    parser.add_argument("impl", help='"solutions", a folder, or a zip file')
    parser.add_argument("--homework", help="take only this homework's editable files (e.g. hw1)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary copy and print its path")
    args = parser.parse_args(own)
    if not command:
        parser.error("give the command to run after --")
    try:
        with overlay(args.impl, args.homework, args.keep) as ov:
            for rel in ov.missing:
                print(f"tools.overlay: {rel} is not in {args.impl}; the stub is used", file=sys.stderr)
            for rel, why in ov.refused.items():
                print(f"tools.overlay: refused {why}; the stub is used", file=sys.stderr)
            for note in ov.notes:
                print(f"tools.overlay: note: {note}", file=sys.stderr)
            if args.keep:
                print(f"tools.overlay: kit copy at {ov.root}", file=sys.stderr)
            return subprocess.call(command, cwd=ov.root, env=ov.env())
    except ValueError as exc:
        print(f"tools.overlay: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

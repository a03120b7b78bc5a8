"""Run anything against an implementation without touching the working tree.

    python -m tools.overlay solutions -- python -m pytest assignments/hw1/tests
    python -m tools.overlay path/to/submission.zip --homework hw1 -- python assignments/hw1/bench_allreduce.py

The kit is copied to a temporary folder (the pristine package, with its stubs), the
implementation's files are laid over it, and the command runs there with that copy
first on PYTHONPATH; the copy is deleted afterwards (--keep keeps it).

An implementation is `solutions` (every reference file), a folder, or a zip. With
--homework, only that homework's editable files (assignments/<hw>/homework.json) are
taken from it; a submission may hold them at their kit paths or flat by file name.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIP_DIRS = {".git", ".venv", "__pycache__", ".pytest_cache", ".ipynb_checkpoints", "minitorch_dist.egg-info"}


@dataclass
class Overlay:
    """What an overlay holds: its folder, the files laid over the kit, and the ones not found."""

    root: str
    overlaid: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)

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


def kit_files(root: str = ROOT) -> list[str]:
    """The kit's files relative to `root`: git's tracked and unignored files, else a walk."""
    try:
        out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
                             cwd=root, capture_output=True, check=True).stdout.decode()
        files = [f for f in out.split("\0") if f and os.path.isfile(os.path.join(root, f))]
        return sorted(f for f in files if not f.startswith("solutions/"))
    except (OSError, subprocess.CalledProcessError):
        found = []
        for folder, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not (folder == root and d == "solutions")]
            found += [os.path.relpath(os.path.join(folder, n), root) for n in names if not n.endswith(".pyc")]
        return sorted(found)


def copy_kit(dest: str, root: str = ROOT) -> None:
    """Copy the pristine kit (no solutions/) to `dest`, linking its .venv if there is one."""
    for rel in kit_files(root):
        target = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(os.path.join(root, rel), target)
    venv = os.path.join(root, ".venv")
    if os.path.isdir(venv) and not os.path.exists(os.path.join(dest, ".venv")):
        os.symlink(venv, os.path.join(dest, ".venv"))


def _find(files: dict[str, str], rel: str) -> str | None:
    """The submitted file for kit path `rel`: same path, a path ending in it, or a unique base name."""
    if rel in files:
        return files[rel]
    tails = [k for k in files if k.endswith("/" + rel)]
    if len(tails) == 1:
        return files[tails[0]]
    names = [k for k in files if os.path.basename(k) == os.path.basename(rel)]
    return files[names[0]] if len(names) == 1 else None


def _submitted_files(impl: str, scratch: str) -> dict[str, str]:
    """{relative path: absolute path} of every file of an implementation folder or zip."""
    if zipfile.is_zipfile(impl):
        with zipfile.ZipFile(impl) as z:
            for info in z.infolist():
                name = os.path.normpath(info.filename)
                if info.is_dir() or name.startswith(("..", "/")) or "__MACOSX" in name:
                    continue
                z.extract(info, scratch)
        impl = scratch
    elif not os.path.isdir(impl):
        raise ValueError(f"implementation {impl!r} is neither a folder nor a zip file")
    files = {}
    for folder, dirs, names in os.walk(impl):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
        for n in names:
            path = os.path.join(folder, n)
            files[os.path.relpath(path, impl).replace(os.sep, "/")] = path
    return files


def apply(impl: str, dest: str, editable: list[str] | None = None, root: str = ROOT) -> Overlay:
    """Lay `impl` ("solutions", a folder or a zip) over the kit copy in `dest`."""
    result = Overlay(dest)
    if impl == "solutions":
        impl = os.path.join(root, "solutions")
    with tempfile.TemporaryDirectory(prefix="overlay-unzip-") as scratch:
        files = _submitted_files(impl, scratch)
        wanted = editable if editable is not None else sorted(files)
        for rel in wanted:
            src = _find(files, rel)
            if src is None:
                result.missing.append(rel)
                continue
            target = os.path.join(dest, rel)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copyfile(src, target)
            result.overlaid.append(rel)
    return result


@contextlib.contextmanager
def overlay(impl: str, homework: str | None = None, keep: bool = False, root: str = ROOT):
    """Context manager: a temporary kit copy with `impl` laid over it; yields an Overlay."""
    editable = homework_manifest(homework, root)["editable"] if homework else None
    dest = tempfile.mkdtemp(prefix="minitorch-overlay-")
    try:
        copy_kit(dest, root)
        yield apply(impl, dest, editable, root)
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
            if args.keep:
                print(f"tools.overlay: kit copy at {ov.root}", file=sys.stderr)
            return subprocess.call(command, cwd=ov.root, env=ov.env())
    except ValueError as exc:
        print(f"tools.overlay: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

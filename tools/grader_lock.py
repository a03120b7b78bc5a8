"""The grader's lock file: the exact version of every package the Gradescope upload installs.

    python -m tools.grader_lock            # write autograder/requirements.lock from this venv
    python -m tools.grader_lock --check    # exit 1, saying what differs, when the lock is not this venv's

What the grader needs is pyproject.toml's dependencies (torch, numpy, cloudpickle, matplotlib) and
GRADER (pytest, pytest-timeout, psutil, mpi4py, mpich), with everything those require in turn, as
this venv has them installed (importlib.metadata; a requirement whose marker is false here, or that
belongs to an extra, is left out). torch keeps its local version (2.13.0+cpu: the build of the CPU
index, which setup.sh names). The lock records the Python it was made with: its wheels are that
Python's, so setup.sh builds the grader's venv with that Python (tools/gradescope.py). The lock sits
in autograder/ (it ships in the upload, never to students); tools.gradescope writes it into the
upload as requirements.txt, and setup.sh installs it with --no-deps and then checks every version.
"""

from __future__ import annotations

import argparse
import importlib.metadata as metadata
import os
import sys

from tools.overlay import ROOT

LOCK = "autograder/requirements.lock"
GRADER = ["pytest", "pytest-timeout", "psutil", "mpi4py>=4.0", "mpich"]
HEADER = "# The grader's packages, exact (python -m tools.grader_lock). Made with Python {python}.\n"


def needed(root: str = ROOT) -> list[str]:
    """The requirements the grader starts from: pyproject's dependencies, then GRADER's others."""
    from tools.gradescope import load_toml
    deps = load_toml(os.path.join(root, "pyproject.toml"))["project"]["dependencies"]
    names = {_name(d) for d in deps}
    return deps + [g for g in GRADER if _name(g) not in names]


def _name(requirement: str) -> str:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
    return canonicalize_name(Requirement(requirement).name)


def frozen(root: str = ROOT) -> list[str]:
    """["name==version", ...]: needed() and what it requires, as installed in this venv, sorted."""
    from packaging.requirements import Requirement
    found: dict[str, str] = {}
    todo = [Requirement(r) for r in needed(root)]
    while todo:
        req = todo.pop()
        key = _name(req.name)
        if key in found:
            continue
        try:
            dist = metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            raise RuntimeError(f"{req.name} is not installed in {sys.prefix}, so its version cannot be locked: "
                               f"bash scripts/setup.sh, then run this again") from None
        found[key] = f"{dist.metadata['Name']}=={dist.version}"
        for text in dist.requires or []:
            sub = Requirement(text)
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in (req.extras or {""})):
                todo.append(sub)
    return sorted(found.values(), key=str.lower)


def python_version() -> str:
    return f"{sys.version_info[0]}.{sys.version_info[1]}"


def read(root: str = ROOT) -> tuple[str, list[str]]:
    """(the Python version the lock was made with, its "name==version" lines)."""
    path = os.path.join(root, LOCK)
    if not os.path.exists(path):
        raise RuntimeError(f"{LOCK} is missing: python -m tools.grader_lock writes it from the kit's venv")
    with open(path) as f:
        text = f.read()
    head = text.splitlines()[0] if text else ""
    python = head.rsplit("Made with Python ", 1)[-1].rstrip(".") if "Made with Python " in head else ""
    return python, [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def write(root: str = ROOT) -> str:
    path = os.path.join(root, LOCK)
    with open(path, "w") as f:
        f.write(HEADER.format(python=python_version()) + "\n".join(frozen(root)) + "\n")
    return path


def differences(root: str = ROOT) -> list[str]:
    """What differs between the lock and this venv (empty: the lock is current)."""
    python, lines = read(root)
    now = frozen(root)
    out = [f"Python {python} in the lock, {python_version()} here"] if python != python_version() else []
    out += [f"only in the lock: {line}" for line in lines if line not in now]
    return out + [f"not in the lock: {line}" for line in now if line not in lines]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare the lock with this venv instead of writing it")
    args = parser.parse_args(argv)
    if args.check:
        diff = differences()
        for line in diff:
            print(f"tools.grader_lock: {line}", file=sys.stderr)
        if diff:
            print(f"tools.grader_lock: {LOCK} is not this venv's: python -m tools.grader_lock rewrites it",
                  file=sys.stderr)
        return 1 if diff else 0
    print(f"tools.grader_lock: wrote {write()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

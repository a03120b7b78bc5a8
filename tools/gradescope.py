"""Build a homework's Gradescope autograder upload (the zip of "Configure Autograder").

    python -m tools.gradescope hw1                        # writes dist/gradescope-hw1.zip (in the kit)
    python -m tools.gradescope hw3 --out /tmp/hw3.zip

The upload holds hidden tests and the grader: it is written to the kit's dist/ folder, which git
ignores and no kit copy (tools.release's student copy, a grading's copies) ever takes.

Gradescope unpacks the zip into /autograder/source, runs `setup.sh` once when it builds the image
(Ubuntu; as root), then `run_autograder` for every submission, which finds the student's files in
/autograder/submission and must leave /autograder/results/results.json.

What the zip holds: setup.sh, run_autograder, requirements.txt (autograder/requirements.lock: the exact
version of every package the grader needs, torch 2.13.0+cpu from its CPU index; tools/grader_lock.py)
and the part of the kit that grades this homework: the package with
its stubs (minitorch_dist/), the grader (autograder/ with only this homework's hidden tests),
assignments/common and assignments/<hw> (harness and public tests), the tools the grader imports,
pyproject.toml. Not in it: solutions/ (but the reference files the homework builds on, homework.json
builds_on, which the grader lays under the student's code), other homeworks, the kit's own tests,
lectures, notebooks (nbgrader grades those; the homework's source notebook and its percent file hold the
answers), .git.
The zip is checked for solution text (tools.release's leak scan) before it is written.

setup.sh makes /autograder/source/.venv with the lock's Python (python3.11; apt-get installs it and
its venv module when the image lacks them, and setup.sh stops with what to do when it cannot),
installs requirements.txt into it with --no-deps (nothing is resolved on Gradescope) and checks that
every installed version is the lock's, then builds the sim's compiled sendrecv
(minitorch_dist/runtime/sim/express.py; apt-get installs g++ and Python's headers when the build
lacks them; without them the sim grades on its Python path, to the same points, slower).
AUTOGRADER_ROOT (default /autograder) moves the
whole layout, which is how tests run it in a temporary folder.

AUTOGRADER_ARGS, for instructors and the kit's tests only (Gradescope sets neither variable, and a
submission cannot set the environment run_autograder starts with): more autograder.grade options,
after the upload's own, e.g. AUTOGRADER_ARGS='--only test_comm_ops$ --jobs 1' for a quick pass over a
few tests (no spaces or glob characters in the regular expression: the shell splits the value into
words). Unset, run_autograder grades every test.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import zipfile

from tools.grader_lock import read as read_lock
from tools.notebooks import notebooks, source_of
from tools.overlay import DIST, ROOT, homework_manifest, kit_files
from tools.release import find_leaks, homeworks
from tools.stubs import SOLUTIONS, builds_on

TOOLS_NEEDED = ("tools/__init__.py", "tools/overlay.py", "tools/intake.py", "tools/stubs.py")
TORCH_INDEX = "https://download.pytorch.org/whl/cpu"     # the CPU build: no CUDA packages (several GB)

SETUP = r"""#!/usr/bin/env bash
# Gradescope: build the grader's environment once (as root, on Ubuntu): Python __PYTHON__ (the lock's),
# then exactly the versions of requirements.txt (tools/grader_lock.py), nothing resolved here.
set -euo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
cd "$ROOT/source"
PY=python__PYTHON__
if [ ! -x .venv/bin/python ]; then
  if ! command -v "$PY" >/dev/null 2>&1 || ! "$PY" -c "import ensurepip, venv" >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$PY" "$PY-venv" || {
      echo "setup.sh: requirements.txt pins wheels for Python __PYTHON__ and this image has no $PY (apt could not" \
           "install it): pick an Ubuntu image that has it (22.04: python3.11 in universe), or make the lock" \
           "with this image's Python (python -m tools.grader_lock) and build the upload again" >&2
      exit 1
    }
  fi
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --no-deps --extra-index-url "__TORCH_INDEX__" -r requirements.txt
.venv/bin/python - requirements.txt <<'CHECK'
import importlib.metadata as md, sys
def installed(name):
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return "missing"
want = [line.split("==") for line in open(sys.argv[1]).read().split("\n") if line and not line.startswith("#")]
bad = [f"{name} {installed(name)} (the lock: {version})" for name, version in want if installed(name) != version]
if sys.version_info[:2] != tuple(map(int, "__PYTHON__".split("."))) or bad:
    sys.exit(f"setup.sh: the venv differs from requirements.txt: Python {sys.version.split()[0]} "
             f"(the lock's: __PYTHON__); {', '.join(bad) or 'every package as locked'}")
CHECK
.venv/bin/python -c "import torch, mpi4py, pytest; print('autograder ready: torch', torch.__version__)"
# The sim's compiled sendrecv (minitorch_dist/runtime/sim/express.py): a C++ compiler and Python's headers, which
# apt installs when the image lacks them; without them the sim runs its Python path (the same grades, slower).
BUILT='^sim compiled sendrecv (already )?built:'
if ! .venv/bin/python -m minitorch_dist.runtime.sim.express_build | tee /dev/stderr | grep -Eq "$BUILT"; then
  if command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq g++ "$PY-dev") >/dev/null 2>&1 || true
  fi
  .venv/bin/python -m minitorch_dist.runtime.sim.express_build || true
fi
"""

RUN = r"""#!/usr/bin/env bash
# Gradescope: grade the submission in $ROOT/submission, write $ROOT/results/results.json.
set -uo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
mkdir -p "$ROOT/results"
cd "$ROOT/source"
exec .venv/bin/python -m autograder.grade __HW__ "$ROOT/submission" --out "$ROOT/results/results.json" \
    --jobs 2 ${AUTOGRADER_ARGS:-}     # 2 tests at once: the 2 CPUs the README's container settings give
"""


def load_toml(path: str) -> dict:
    """A TOML file as a dict: tomllib (Python 3.11+), else the tomli package (pyproject's dev extra on 3.10)."""
    try:
        import tomllib
    except ModuleNotFoundError:
        try:
            import tomli as tomllib
        except ModuleNotFoundError:
            raise RuntimeError(f"reading {path} needs Python 3.11+ (tomllib) or the tomli package on 3.10: "
                               f"{sys.executable} -m pip install tomli") from None
    with open(path, "rb") as f:
        return tomllib.load(f)


def requirements(root: str = ROOT) -> list[str]:
    """Every package the grader installs, exact ("torch==2.13.0+cpu", ...): the lock (tools/grader_lock.py)."""
    return read_lock(root)[1]


def upload_files(hw: str, root: str = ROOT) -> list[str]:
    """The kit paths that go into the upload of `hw` (see the module docstring)."""
    others = [h for h in homeworks(root) if h != hw]
    dropped = tuple(f"{top}/{h}/" for h in others for top in ("assignments", "autograder"))
    keep = ("minitorch_dist/", "autograder/", "assignments/")
    sources = {source_of(rel) for rel in notebooks(root).values()}    # a notebook's percent file: the answers too
    return [rel for rel in kit_files(root)
            if (rel.startswith(keep) and not rel.startswith(dropped) and not rel.startswith("autograder/mutants/")
                and not rel.endswith(".ipynb") and rel not in sources)   # the nbgrader source holds the answers
            or rel in TOOLS_NEEDED or rel == "pyproject.toml"]


def build(hw: str, out: str, root: str = ROOT) -> dict:
    """Write the upload zip of `hw` to `out`; returns {"files": n, "provided": [paths], "bytes": size}."""
    homework_manifest(hw, root)                                   # a clear error for an unknown homework
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gradescope-") as tmp:
        files = upload_files(hw, root)
        for rel in files:
            os.makedirs(os.path.dirname(os.path.join(tmp, rel)) or tmp, exist_ok=True)
            shutil.copy2(os.path.join(root, rel), os.path.join(tmp, rel))
        provided = builds_on(homework_manifest(hw, root))
        for rel in provided:                                      # the grader reads them from solutions/
            dest = os.path.join(tmp, SOLUTIONS, rel)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.copy2(os.path.join(root, SOLUTIONS, rel), dest)
        leaks = [leak for leak in find_leaks(tmp, root)        # the grader's tools name the markers
                 if not leak.startswith(SOLUTIONS + "/") and not (leak.startswith("tools/") and ": marker " in leak)]
        if leaks:
            raise RuntimeError("the upload would leak solutions:\n  " + "\n  ".join(leaks[:20]))
        python, locked = read_lock(root)
        scripts = {"setup.sh": SETUP.replace("__TORCH_INDEX__", TORCH_INDEX).replace("__PYTHON__", python),
                   "run_autograder": RUN.replace("__HW__", hw),
                   "requirements.txt": "\n".join(locked) + "\n"}
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
            for name, text in scripts.items():
                info = zipfile.ZipInfo(name)
                info.external_attr = (0o755 if name != "requirements.txt" else 0o644) << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(info, text)
            for rel in files + [os.path.join(SOLUTIONS, p) for p in provided]:
                z.write(os.path.join(tmp, rel), rel)
    return {"files": len(files) + len(provided), "provided": provided, "bytes": os.path.getsize(out)}


def default_out(hw: str, root: str = ROOT) -> str:
    """Where the upload of `hw` goes without --out: the kit's dist/ (ignored, never copied)."""
    return os.path.join(root, DIST, f"gradescope-{hw}.zip")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("homework", help="hw1, hw2, ...")
    parser.add_argument("--out", help="the zip to write (default dist/gradescope-<hw>.zip in the kit)")
    args = parser.parse_args(argv)
    out = args.out or default_out(args.homework)
    try:
        info = build(args.homework, out)
    except (ValueError, RuntimeError) as exc:
        print(f"tools.gradescope: {exc}", file=sys.stderr)
        return 1
    shown = os.path.relpath(out) if not os.path.relpath(out).startswith("..") else os.path.abspath(out)
    print(f"tools.gradescope: wrote {shown} ({info['files']} files, {info['bytes'] / 2**20:.1f} MB); upload it "
          "under Configure Autograder (Ubuntu base image)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

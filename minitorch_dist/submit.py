"""Build your submission zip for a homework, after running its public tests once more.

    .venv/bin/python -m minitorch_dist.submit hw1            # writes dist/hw1_submission.zip in the kit
    .venv/bin/python -m minitorch_dist.submit hw3 --out ~/hw3.zip
    .venv/bin/python -m minitorch_dist.submit hw1 --skip-tests

The zip holds exactly the files you edit for that homework (assignments/<hw>/homework.json, key
"editable"), stored flat by file name, which is what the grader reads. Before writing it, the
public tests run (`pytest assignments/<hw>/tests`) and their summary is printed, and every task whose
region still raises the stub's NotImplementedError is named: the zip is written either way, so you
can hand in part of a homework, but you see what is missing first. The zip goes to the kit's dist/
folder (git ignores it; build products are kept out of the kit's own files).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import zipfile

STUB = re.compile(r"raise NotImplementedError\(\"(HW\d+ task [\d.]+): ")


def kit_root() -> str:
    """The kit folder: the current folder if it holds assignments/, else the one above this package."""
    here = os.getcwd()
    if os.path.isdir(os.path.join(here, "assignments")):
        return here
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def manifest(root: str, hw: str) -> dict:
    path = os.path.join(root, "assignments", hw, "homework.json")
    if not os.path.exists(path):
        known = sorted(d for d in os.listdir(os.path.join(root, "assignments"))
                       if os.path.exists(os.path.join(root, "assignments", d, "homework.json")))
        raise SystemExit(f"submit: no homework {hw!r} in {root} (found: {', '.join(known) or 'none'})")
    with open(path) as f:
        return json.load(f)


def unfinished(root: str, files: list[str]) -> list[str]:
    """'HW1 task 1.4 (all_reduce.py)' for every region that still raises the stub's error."""
    out = []
    for rel in files:
        with open(os.path.join(root, rel)) as f:
            out += [f"{m} ({os.path.basename(rel)})" for m in dict.fromkeys(STUB.findall(f.read()))]
    return out


def public_tests(root: str, folder: str) -> tuple[int, str]:
    """Run the homework's public tests; (exit code, pytest's last line)."""
    proc = subprocess.run([sys.executable, "-m", "pytest", folder, "-q", "-p", "no:cacheprovider"], cwd=root,
                          capture_output=True, text=True)
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    return proc.returncode, (lines[-1] if lines else proc.stderr.strip()[-300:])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("homework", help="hw1, hw2, ...")
    parser.add_argument("--out", help="the zip to write (default dist/<hw>_submission.zip in the kit)")
    parser.add_argument("--skip-tests", action="store_true", help="do not run the public tests first")
    args = parser.parse_args(argv)
    root = kit_root()
    info = manifest(root, args.homework)
    files = info["editable"]
    missing = [rel for rel in files if not os.path.isfile(os.path.join(root, rel))]
    if missing:
        print(f"submit: these files are missing from {root}: {', '.join(missing)}", file=sys.stderr)
        return 1
    if not args.skip_tests:
        print(f"submit: running the public tests of {args.homework} ({info['public_tests']}) ...", flush=True)
        code, summary = public_tests(root, info["public_tests"])
        print(f"submit: public tests: {summary}" + ("" if code == 0 else "  (some fail: read their messages "
                                                     f"with .venv/bin/python -m pytest {info['public_tests']})"))
    todo = unfinished(root, files)
    if todo:
        print("submit: not written yet (still the stub): " + "; ".join(todo))
    out = os.path.abspath(args.out or os.path.join(root, "dist", f"{args.homework}_submission.zip"))
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for rel in files:
            z.write(os.path.join(root, rel), os.path.basename(rel))
    print(f"submit: wrote {out}: " + ", ".join(os.path.basename(rel) for rel in files))
    print("submit: upload this zip (and only it) where your course collects homework.")
    return 0


if __name__ == "__main__":
    sys.exit(main())

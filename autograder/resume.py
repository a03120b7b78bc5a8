"""When autograder.batch may keep a student's results.json instead of grading again.

    key = grading_key("hw3", options)          # tests, kit and options: what decides a score besides the code
    why = why_regrade(previous, digest, key)   # None: keep it; else why it must be graded again

A results.json is kept only when it was graded from the same submission (its digest), the same test
files (the public and hidden tests, or --tests), the same kit (the version in pyproject.toml and every
file of the kit that grades the homework: tools.gradescope.upload_files, the reference code it builds on)
and the same score options (autograder.options: --only, --tests, --device as resolved, --limit,
--deadline). Anything else, a quick pass with --only included, is graded again.
"""

from __future__ import annotations

import hashlib
import json
import os

from autograder.devices import resolve_device
from autograder.options import SCORE_OPTIONS
from tools.overlay import ROOT, homework_manifest
from tools.stubs import SOLUTIONS, builds_on

SKIPPED = ("__pycache__", ".pyc")
FLAGS = {"suites": "tests"}             # a score option's command-line name, where it differs


def files_digest(base: str, files: list[str]) -> str:
    """sha256 over each file's path relative to `base` and its bytes, in the order given."""
    h = hashlib.sha256()
    for rel in files:
        h.update(rel.replace(os.sep, "/").encode() + b"\0")
        with open(os.path.join(base, rel), "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def tree(path: str) -> list[str]:
    """The files of a folder, sorted, relative to it, without __pycache__ or .pyc."""
    found = []
    for folder, dirs, names in os.walk(path):
        dirs[:] = [d for d in dirs if d not in SKIPPED]
        found += [os.path.relpath(os.path.join(folder, n), path) for n in names if not n.endswith(SKIPPED)]
    return sorted(found)


def digest(path: str) -> str:
    """A file's name and bytes (a zip), or a folder's relative paths and file bytes (tree)."""
    if os.path.isdir(path):
        return files_digest(path, tree(path))
    return files_digest(os.path.dirname(path), [os.path.basename(path)])


def grading_key(homework: str, options: dict, root: str = ROOT) -> dict:
    """What decides a score besides the submission: {"tests", "kit", "options"} (see the module doc)."""
    from tools.gradescope import load_toml, upload_files
    manifest = homework_manifest(homework, root)
    suites = options.get("suites") or [(manifest["public_tests"], "visible"),
                                       (manifest["hidden_tests"], "after_published")]
    tests = hashlib.sha256()
    for path, visibility in suites:
        tests.update(f"{path}:{visibility}\0".encode())
        if os.path.exists(os.path.join(root, path)):
            tests.update(digest(os.path.join(root, path)).encode())
    kit_files = upload_files(homework, root) + [os.path.join(SOLUTIONS, rel) for rel in builds_on(manifest)]
    version = load_toml(os.path.join(root, "pyproject.toml"))["project"]["version"]
    chosen = {name: options.get(name) for name in SCORE_OPTIONS}
    chosen["device"] = resolve_device(chosen["device"] or "auto")
    chosen["suites"] = [list(s) for s in options.get("suites") or []] or None
    return json.loads(json.dumps({"tests": tests.hexdigest(), "kit": f"{version} {files_digest(root, kit_files)}",
                                  "options": chosen}))


def why_regrade(previous: dict | None, submission_digest: str, key: dict) -> str | None:
    """None when `previous` (a results.json written by batch) was graded from the same submission with
    the same key; else what differs, in a few words."""
    batch = ((previous or {}).get("extra_data") or {}).get("batch") or {}
    if not batch:
        return "not graded yet"
    if batch.get("digest") != submission_digest:
        return "the submission changed"
    old = batch.get("key")
    if not isinstance(old, dict):
        return "graded before the resume key held the tests, kit and options"
    changed = [f"the {what} changed" for what in ("tests", "kit") if old.get(what) != key[what]]
    before = old.get("options") or {}
    changed += [f"--{FLAGS.get(name, name)} {before.get(name)!r} -> {value!r}"
                for name, value in key["options"].items() if before.get(name) != value]
    return "; ".join(changed) or None


def previous_results(path: str) -> dict | None:
    """The results.json at `path`, or None when there is none or it cannot be read."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None

"""Lay a submission's editable files over the kit copy, and check them before anything runs.

    check = lay_submission("sub.zip", kit_copy, homework_manifest)   # -> SubmissionCheck

Only the files listed as editable in assignments/<hw>/homework.json are taken (tools.overlay),
and only within the limits of tools.intake (size per file, size in total, entries looked at;
no links, special files, or zip entries with absolute or `..` paths). Each one is compiled; a
file that is missing, refused, or does not compile is replaced by the kit's stub, so only the
tasks in that file score zero and the others are still graded. The check becomes a
"submission check" entry (max_score 0) in results.json that says which file, which line or
which limit, and what to do.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field

from tools.intake import Limits
from tools.overlay import ROOT, apply


@dataclass
class SubmissionCheck:
    """What was taken from a submission and what was wrong with it."""

    source: str
    overlaid: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    broken: dict[str, str] = field(default_factory=dict)     # kit path -> compile error text
    refused: dict[str, str] = field(default_factory=dict)    # kit path -> why it was not taken, what to do
    notes: list[str] = field(default_factory=list)           # about the submission as a whole
    tasks_of: dict[str, list[str]] = field(default_factory=dict)
    error: str = ""                                          # the submission could not be read at all

    @property
    def ok(self) -> bool:
        return not (self.missing or self.broken or self.refused or self.error)

    def replaced_tasks(self) -> dict[str, str]:
        """{task "1.3": why its file is the stub} for the missing and broken files."""
        out = {}
        for rel in self.missing:
            for task in self.tasks_of.get(rel, []):
                out[task] = f"{rel} was not found in the submission, so the stub was graded"
        for rel in self.refused:
            for task in self.tasks_of.get(rel, []):
                out[task] = f"{rel} was refused (see the submission check), so the stub was graded"
        for rel in self.broken:
            for task in self.tasks_of.get(rel, []):
                out[task] = f"{rel} does not compile (see the submission check), so the stub was graded"
        return out

    def report(self) -> str:
        """The text of the "submission check" entry."""
        lines = [f"Submission: {self.source}"]
        if self.error:
            lines.append(f"ERROR: {self.error}")
        for rel in self.overlaid:
            if rel not in self.broken:
                lines.append(f"  ok       {rel}")
        for rel, text in self.broken.items():
            tasks = ", ".join(self.tasks_of.get(rel, [])) or "its tasks"
            lines.append(f"  BROKEN   {rel}: {text}\n           The kit's stub was graded instead, so task(s) {tasks} score 0;"
                         f" the other files are graded as usual.\n           Fix it (python -m py_compile {rel} "
                         f"shows the same error) and resubmit.")
        for rel, why in self.refused.items():
            tasks = ", ".join(self.tasks_of.get(rel, [])) or "its tasks"
            lines.append(f"  REFUSED  {why}.\n           The kit's stub was graded instead, so task(s) {tasks} score 0;"
                         f" the other files are graded as usual.")
        for rel in self.missing:
            tasks = ", ".join(self.tasks_of.get(rel, [])) or "its tasks"
            lines.append(f"  MISSING  {rel}: not in the submission; the stub was graded, so task(s) {tasks} score 0.\n"
                         f"           Submit it at this path, or at the top level of the zip "
                         f"({os.path.basename(rel)}).")
        lines += [f"  NOTE     {note}" for note in self.notes]
        if impl_is_stubs(self.source):
            lines.append("The kit's stubs are graded (nothing was taken from a submission).")
        elif self.ok:
            lines.append("All editable files were found and compile.")
        return "\n".join(lines)


def impl_is_stubs(impl: str) -> bool:
    return impl == "stubs"


def tasks_in(path: str) -> list[str]:
    """The task numbers ("1.3") whose student regions are in the file at `path`."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return []
    return sorted(set(re.findall(r"HW\d+ task (\d+\.\d+)", text)), key=lambda t: [int(x) for x in t.split(".")])


def compile_error(path: str, rel: str) -> str | None:
    """None if the file compiles, else "line N: SyntaxError: msg" and the submitted file's line N.

    The line is taken from the submitted bytes, never from `exc.text`: for errors found after
    parsing ("'return' outside function", "nonlocal ... at module level") CPython fills
    `exc.text` by reading the file named `rel` from the current folder, which is the kit's stub.
    """
    try:
        with open(path, "rb") as f:
            source = f.read()
        compile(source, rel, "exec", dont_inherit=True)
    except SyntaxError as exc:
        lines = re.split(r"\r\n|\r|\n", source.decode("utf-8", errors="replace"))   # as the tokenizer counts
        text = lines[exc.lineno - 1].strip() if exc.lineno and 0 < exc.lineno <= len(lines) else ""
        where = f"line {exc.lineno}: " if exc.lineno else ""
        return f"{where}{type(exc).__name__}: {exc.msg}" + (f"\n               {text}" if text else "")
    except (ValueError, UnicodeDecodeError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def lay_submission(impl: str, dest: str, manifest: dict, root: str = ROOT,
                   limits: Limits = Limits()) -> SubmissionCheck:
    """Overlay `impl` ("solutions", "stubs", a folder or a zip) on the kit copy `dest`; check it.

    `limits` are tools.intake's module constants unless a test passes smaller ones.
    """
    editable = list(manifest["editable"])
    check = SubmissionCheck(source=impl)
    check.tasks_of = {rel: tasks_in(os.path.join(root, rel)) for rel in editable}
    if impl == "stubs":
        return check
    try:
        ov = apply(impl, dest, editable, root, limits)
    except Exception as exc:  # noqa: BLE001 - a bad zip, a missing folder: the grade is 0, not a crash
        check.error = f"could not read the submission ({type(exc).__name__}: {exc}); submit a zip or a folder " \
                      f"holding {', '.join(os.path.basename(e) for e in editable)}"
        check.missing = editable
        for rel in editable:                                 # undo whatever was laid before the error
            shutil.copyfile(os.path.join(root, rel), os.path.join(dest, rel))
        return check
    check.overlaid, check.missing, check.refused, check.notes = ov.overlaid, ov.missing, ov.refused, ov.notes
    for rel in ov.refused:                                   # never laid; make sure the stub is what runs
        shutil.copyfile(os.path.join(root, rel), os.path.join(dest, rel))
    for rel in ov.overlaid:
        problem = compile_error(os.path.join(dest, rel), rel)
        if problem:
            check.broken[rel] = problem
            shutil.copyfile(os.path.join(root, rel), os.path.join(dest, rel))
    return check

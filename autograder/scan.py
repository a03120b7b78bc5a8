"""A static scan of submitted files for code that could tamper with how grading measures them.

Counters and traces are measured inside the rank processes, which run the student's code, so a
submission that patches the runtime, walks frames, or talks to its peers outside the kit's
`Group` could misreport how it communicated. This scan reads each submitted file with `ast`
(plus a plain-text pass for strings such as "/proc") and lists what an instructor should look
at. It runs nothing and scores nothing: a finding is a reason to read the code, not a verdict.

How the grader calls it (instructor-only output; never shown to students):

    from autograder.scan import format_findings, scan_submission
    check = lay_submission(submission, kit_copy, manifest)
    findings = scan_submission(kit_copy, check.overlaid)    # after the overlay, before any test
    instructor_text = format_findings(findings)             # a short table, or "no findings"

Every import the reference solutions use is allowed (tests/kit/test_scan.py scans solutions/
and expects no finding). A file that does not parse gives no findings: the submission check
reports it and the stub is graded instead.
"""

from __future__ import annotations

import ast
import functools
import os
import re
from dataclasses import dataclass

from autograder.scan_rules import (COMPUTE_WHY, DUNDER, ENV_WRITES, FRAME_ATTRS, NAMES, RUNTIME, RUNTIME_MODULES_ALLOWED,
                                   RUNTIME_STATE, STATE_WHY, TEXT)
from tools.overlay import ROOT


@dataclass(frozen=True)
class Finding:
    """Something in a submitted file an instructor should read: where, which family, and why."""

    file: str       # kit-relative path
    line: int
    kind: str       # the family: "gc", "frames", "runtime-private", ...
    text: str       # one line: what the code does and why it matters to grading


@functools.lru_cache(maxsize=1)
def runtime_public() -> frozenset[str]:
    """The names `minitorch_dist.runtime` exports (its __all__), read without importing it."""
    try:
        with open(os.path.join(ROOT, "minitorch_dist", "runtime", "__init__.py"), encoding="utf-8") as f:
            tree = ast.parse(f.read())
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
                return frozenset(ast.literal_eval(node.value))
    except (OSError, SyntaxError, ValueError):
        pass
    return frozenset()


def rule_for(dotted: str) -> tuple[str, str] | None:
    """(kind, why) for a fully resolved dotted name, or None if homework code may use it."""
    if dotted == RUNTIME + ".world_group" or dotted.startswith(RUNTIME + ".world_group."):
        return NAMES[RUNTIME + ".world_group"]
    if dotted == RUNTIME or dotted.startswith(RUNTIME + "."):
        rest = dotted[len(RUNTIME) + 1:].split(".") if dotted != RUNTIME else []
        if any(p.startswith("_") and not DUNDER.match(p) for p in rest):
            return ("runtime-private", "a private name of the runtime, which measures the counters and traces "
                                       "grading reads")
        if rest and rest[0] not in runtime_public() | RUNTIME_MODULES_ALLOWED:
            return ("runtime-internal", "a runtime module homework code does not need (it needs only `group` and the "
                                        "names minitorch_dist exports)")
        return None
    for key, rule in NAMES.items():
        if key.endswith("*"):
            parent, _, prefix = key[:-1].rpartition(".")
            head, _, last = dotted.partition(parent + ".")
            if not head and last.split(".")[0].startswith(prefix):
                return rule
        elif dotted == key or dotted.startswith(key + "."):
            return rule
    return None


def _chain(node: ast.AST) -> tuple[ast.AST, list[str]]:
    """(the base expression, [attribute names]) of `a.b.c` -> (Name a, ["b", "c"])."""
    attrs = []
    while isinstance(node, ast.Attribute):
        attrs.append(node.attr)
        node = node.value
    return node, attrs[::-1]


def _leading_text(node: ast.AST) -> str | None:
    """The constant start of a string expression ("/proc/" of f"/proc/{pid}/mem"), or None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values:
        return _leading_text(node.values[0])
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _leading_text(node.left)
    return None


class _Scanner(ast.NodeVisitor):
    def __init__(self, rel: str):
        self.rel, self.found = rel, []
        self.aliases: dict[str, str] = {}
        self.package = os.path.dirname(rel).replace("/", ".").replace(os.sep, ".")

    def add(self, node: ast.AST, kind: str, text: str) -> None:
        self.found.append(Finding(self.rel, getattr(node, "lineno", 0), kind, text))

    def check(self, node: ast.AST, dotted: str, verb: str = "uses") -> None:
        rule = rule_for(dotted)
        if rule:
            self.add(node, rule[0], f"{verb} `{dotted}`: {rule[1]}")

    def resolve(self, node: ast.AST) -> str | None:
        """The dotted name `node` stands for, through this file's imports, or None."""
        base, attrs = _chain(node)
        if isinstance(base, ast.Name) and base.id in self.aliases:
            return ".".join([self.aliases[base.id], *attrs])
        return None

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self.check(node, a.name, "imports")
            if a.asname:
                self.aliases[a.asname] = a.name
            else:
                self.aliases[a.name.split(".")[0]] = a.name.split(".")[0]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level:
            parts = self.package.split(".") if self.package else []
            base = parts[:len(parts) - node.level + 1] if node.level <= len(parts) else []
            module = ".".join(base + ([module] if module else []))
        for a in node.names:
            full = module if a.name == "*" else f"{module}.{a.name}" if module else a.name
            self.check(node, full, "imports")
            if a.name != "*":
                self.aliases[a.asname or a.name] = full

    def visit_Attribute(self, node: ast.Attribute) -> None:
        base, attrs = _chain(node)
        dotted = self.resolve(node)
        if dotted:
            self.check(node, dotted)
        for i, attr in enumerate(attrs):
            owner = base if i == 0 else ast.Attribute(base, ".".join(attrs[:i]), ast.Load())
            self.attribute(node, owner, attr, dotted)
        self.visit(base)                          # the chain is handled here, once; go on below it

    def attribute(self, node: ast.AST, owner: ast.AST, attr: str, dotted: str | None) -> None:
        """Flag `owner.attr` if `attr` is a frame internal, or private and `owner` is not this object."""
        if attr in FRAME_ATTRS:
            self.add(node, "frames", f"uses `.{attr}`, a frame or code internal: it reaches other functions' "
                                     f"variables, the runtime's included")
        elif attr.startswith("_") and not DUNDER.match(attr) and dotted is None:
            own = isinstance(owner, ast.Name) and owner.id in ("self", "cls")
            own = own or isinstance(owner, ast.Call) and getattr(owner.func, "id", "") == "super"
            if not own:
                shown = ast.unparse(owner)
                shown = shown if len(shown) <= 40 else shown[:37] + "..."
                self.add(node, "private-attribute",
                         f"uses `.{attr}` of `{shown}`, a private attribute of an object this file did not "
                         f"define (the runtime's Group and handles keep counters there); harmless if it is "
                         f"the student's own class")

    def visit_Name(self, node: ast.Name) -> None:
        if node.id == "__builtins__":
            self.add(node, "builtins", "uses `__builtins__`: changing builtins changes every module's code")

    def visit_Call(self, node: ast.Call) -> None:
        func, args = node.func, node.args
        name = func.id if isinstance(func, ast.Name) and func.id not in self.aliases else None
        dotted = self.resolve(func) or ""
        if name in ("exec", "eval", "compile"):
            self.add(node, "dynamic-code", f"calls `{name}`: it runs code built at run time, out of this scan's sight")
        elif name == "__import__":
            self.add(node, "dynamic-import", "calls `__import__`: it loads modules by name, out of this scan's sight")
        elif name in ("setattr", "delattr") and args and not (isinstance(args[0], ast.Name) and args[0].id == "self"):
            self.add(node, "setattr", f"calls `{name}` on something other than self: it can patch modules and "
                                      f"classes, the runtime's included")
        if name in ("getattr", "hasattr", "setattr", "delattr") and len(args) > 1:
            attr, owner = _leading_text(args[1]), self.resolve(args[0])
            if attr:
                if owner:
                    self.check(node, f"{owner}.{attr}")
                self.attribute(node, args[0], attr, owner)
        if isinstance(func, ast.Attribute) and func.attr == "compute":
            self.add(node, "sim-clock", f"calls `{ast.unparse(func)}(...)`: {COMPUTE_WHY}")
        if name == "open" or dotted in ("io.open", "os.open", "builtins.open", "codecs.open"):
            path = _leading_text(args[0]) if args else None
            if path and (path.startswith(("/", "~")) or "/proc" in path or "/dev" in path):
                self.add(node, "open-path", f"opens {path!r}: an absolute or system path, outside the submission")
        if dotted.startswith("os.environ.") and dotted.rsplit(".", 1)[1] in ENV_WRITES:
            self.add(node, "environ", f"calls `{dotted}`: it changes the environment the runtime reads its "
                                      f"settings from")
        self.generic_visit(node)

    def targets(self, node: ast.AST, targets: list[ast.AST], verb: str) -> None:
        for target in targets:
            for t in (target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]):
                if isinstance(t, ast.Subscript) and self.resolve(t.value) == "os.environ":
                    self.add(node, "environ", f"{verb} `os.environ[...]`: it changes the environment the runtime "
                                              f"reads its settings from")
                elif isinstance(t, ast.Attribute):
                    base, attrs = _chain(t)
                    dotted = self.resolve(t)
                    if RUNTIME_STATE & set(attrs):
                        self.add(node, "runtime-state", f"{verb} `{ast.unparse(t)}`: {STATE_WHY}")
                    retyped = "__class__" in attrs or (isinstance(base, ast.Call) and getattr(base.func, "id", "")
                                                       == "type")
                    if dotted or retyped:
                        self.add(node, "monkeypatch", f"{verb} `{dotted or ast.unparse(t)}`, an attribute of an "
                                                      f"imported module or class: this changes code every rank "
                                                      f"runs, the runtime's included")
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        self.targets(node, node.targets, "assigns")

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.targets(node, [node.target], "assigns")

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.targets(node, [node.target], "assigns")

    def visit_Delete(self, node: ast.Delete) -> None:
        self.targets(node, node.targets, "deletes")


def scan_file(path: str, rel: str) -> list[Finding]:
    """The findings in the file at `path` (reported as kit path `rel`), by line; [] if it does not parse."""
    try:
        with open(path, "rb") as f:
            source = f.read()
        tree = ast.parse(source, filename=rel)
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    scanner = _Scanner(rel)
    try:
        scanner.visit(tree)
    except RecursionError:
        scanner.add(tree, "unscannable", "the code is nested too deeply to scan: read it by hand")
    text = source.decode("utf-8", errors="replace")
    flagged = {f.line for f in scanner.found}
    for number, line in enumerate(re.split(r"\r\n|\r|\n", text), start=1):
        for pattern, kind, why in TEXT:
            if number not in flagged and pattern.search(line):
                scanner.found.append(Finding(rel, number, kind, why))
    unique = {(f.line, f.kind): f for f in scanner.found}
    return sorted(unique.values(), key=lambda f: (f.line, f.kind))


def scan_submission(kit_copy: str, editable_rels: list[str], allow=()) -> list[Finding]:
    """The findings in each of `editable_rels` as laid in `kit_copy` (pass SubmissionCheck.overlaid),
    but those of the kinds in `allow` (homework.json "scan_allow": what the homework itself needs, as
    homework 6's FSDP swaps module parameters with setattr and `_parameters`)."""
    return [f for rel in editable_rels for f in scan_file(os.path.join(kit_copy, rel), rel) if f.kind not in allow]


def format_findings(findings: list[Finding]) -> str:
    """A short table for instructors: file, line, kind, why; or "no findings"."""
    if not findings:
        return "no findings"
    width = max(len(f.file) for f in findings)
    kind = max(len(f.kind) for f in findings)
    lines = [f"{'file':<{width}}  {'line':>5}  {'kind':<{kind}}  why"]
    lines += [f"{f.file:<{width}}  {f.line:>5}  {f.kind:<{kind}}  {f.text}" for f in findings]
    return "\n".join(lines)

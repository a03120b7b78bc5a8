"""Scores and feedback of graded tests, Gradescope's results.json, and the summary table.

A graded test is one test function; its parametrized cases share its points:
score = points * passed_cases / total_cases. Gradescope fields used (per test): name, score,
max_score, status ("passed" | "failed"; none for a test not run), output, visibility ("visible" for public tests,
"after_published" for hidden ones); top level: score, execution_time, visibility,
stdout_visibility, output.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

MAX_CASE_OUTPUT = 1500
MAX_TEST_OUTPUT = 12000


@dataclass
class GradedTest:
    """One test function: its cases, points, limit, and (after running) its outcomes."""

    function: str                      # pytest node id without the parameter part
    name: str                          # "HW1 1.4 naive all-reduce: test_naive_matches_reference"
    points: float
    limit: float
    visibility: str
    cases: list[str] = field(default_factory=list)
    case_tasks: dict[str, str | None] = field(default_factory=dict)    # node id -> its task marker (task1_4)
    outcomes: dict[str, dict] = field(default_factory=dict)    # node id -> {"outcome", "message", ...}
    notes: list[str] = field(default_factory=list)             # timeouts, crashes, replaced files
    wall: float = 0.0
    memory_mib: float = 0.0          # the test process's peak memory above the zygote's (kernel's count)
    needs_gpu: bool = False            # marked gpu
    not_run: str = ""                  # why it was not run (a gpu test on a cpu grading): 0 of 0 points
    bound_to: tuple[str, ...] = ()     # real-process tests its (sim) cases rest on (bindings.py)

    @property
    def max_score(self) -> float:
        """What the test counts in the total's maximum: its points, 0 when it was not run."""
        return 0.0 if self.not_run else self.points

    @property
    def passed(self) -> int:
        return sum(1 for c in self.cases if self.outcomes.get(c, {}).get("outcome") == "passed")

    @property
    def score(self) -> float:
        if not self.cases:
            return 0.0
        return round(self.points * self.passed / len(self.cases), 4)

    def case_label(self, nodeid: str) -> str:
        return nodeid.split("::")[-1]

    def cases_label(self, nodeids: list[str]) -> str:
        """"test_x[2, 3]" for some parametrized cases, "test_x (all 8 cases)" for all of them."""
        base = self.function.split("::")[-1]
        if len(nodeids) > 1 and len(nodeids) == len(self.cases):
            return f"{base} (all {len(nodeids)} cases)"
        params = [c[len(self.function) + 1:-1] for c in nodeids if c.startswith(self.function + "[")]
        if len(params) == len(nodeids) and len(self.cases) > 1:
            return f"{base}[{', '.join(params)}]"
        return ", ".join(self.case_label(c) for c in nodeids)

    def output(self) -> str:
        """Feedback text: how many cases passed, why the others failed, and the run's notes."""
        total, passed = len(self.cases), self.passed
        lines = [f"{passed}/{total} cases passed." if total > 1 else ("Passed." if passed else "Failed.")]
        failed: dict[str, list[str]] = {}            # message -> the cases that failed with it
        for nodeid in self.cases:
            res = self.outcomes.get(nodeid, {})
            if res.get("outcome") != "passed":
                failed.setdefault(res.get("message") or "no result was reported for this case", []).append(nodeid)
        for message, nodeids in failed.items():
            labels = self.cases_label(nodeids)
            lines.append(f"\nFAILED {labels}:\n{_indent(message)}")
            outputs = [self.outcomes.get(c, {}).get("output") for c in nodeids]
            for nodeid, out in zip(nodeids, outputs):
                if out:
                    lines.append(f"  output of {self.case_label(nodeid)}:\n{_indent(out, 4)}")
                    break
        lines += [f"\n{note}" for note in self.notes]
        text = "\n".join(lines)
        if len(text) > MAX_TEST_OUTPUT:
            text = text[:MAX_TEST_OUTPUT - 200] + "\n... (feedback cut) ...\n" + text[-150:]
        return text

    def entry(self) -> dict:
        if self.not_run:                 # neither passed nor failed: Gradescope shows 0 / 0 without a status
            return {"name": f"{self.name} [{self.not_run}]", "score": 0.0, "max_score": 0.0,
                    "output": f"Not run: {self.not_run.split(': ', 1)[1]}. It counts 0 of 0 points here; a "
                              f"grading on a GPU grades it for its {self.points:g} point(s).",
                    "output_format": "text", "visibility": self.visibility, "extra_data": {"not_run": self.not_run}}
        return {"name": self.name, "score": self.score, "max_score": self.points,
                "status": "passed" if self.cases and self.passed == len(self.cases) else "failed",
                "output": self.output(), "output_format": "text", "visibility": self.visibility}


def _indent(text: str, n: int = 2) -> str:
    return "\n".join(" " * n + line for line in text.splitlines())


def tail(text: str, limit: int = MAX_CASE_OUTPUT) -> str:
    text = text.strip("\n")
    return text if len(text) <= limit else "... " + text[-limit:]


def results_json(tests: list[GradedTest], check_entry: dict, execution_time: float, title: str,
                 device: str | None = None, manifest: dict | None = None) -> dict:
    """The whole results.json object.

    The top-level `output` (always shown) tables the visible tests only, with one line for the
    others; the full table is an entry of its own with the hidden tests' visibility. With the
    homework's `manifest`, the full table ends with the points per task and the bonus apart.
    """
    visible = [t for t in tests if t.visibility == "visible"]
    hidden = [t for t in tests if t.visibility != "visible"]
    summary = summary_table(visible, f"{title}: public tests", execution_time, device,
                            None if hidden else manifest)
    entries = [check_entry]
    if hidden:
        summary += (f"\n{len(hidden)} hidden test(s) worth {sum(t.max_score for t in hidden):g} points are shown "
                    f"when grades are published.")
        entries.append({"name": "summary of every test", "score": 0, "max_score": 0, "status": "passed",
                        "output": summary_table(tests, title, execution_time, device, manifest), "output_format": "text",
                        "visibility": hidden[0].visibility})
    return {"score": round(sum(t.score for t in tests), 4),
            "execution_time": round(execution_time, 1),
            "output": summary,
            "visibility": "visible",
            "stdout_visibility": "hidden",
            "tests": entries + [t.entry() for t in tests]}


def write_results(path: str, results: dict) -> None:
    with open(path, "w") as f:
        json.dump(results, f, indent=2)
        f.write("\n")


def summary_table(tests: list[GradedTest], title: str, total_time: float, device: str | None = None,
                  manifest: dict | None = None) -> str:
    """A table for a terminal, one line per test, then a one-line total (saying the device, when given).
    With the homework's `manifest`: a line of points per task before the total, and the bonus apart in
    it, as autograder.rubric.points_summary counts them (the handout's table and the gradebook too)."""
    labels = [_short(t.name) for t in tests]
    width = min(max([len(x) for x in labels] + [10]), 90)
    rows = [title, f"{'score':>7} {'max':>5}  {'cases':>5}  {'time':>6}  name", "-" * (width + 30)]
    for t, label in zip(tests, labels):
        if t.not_run:
            rows.append(f"{'-':>7} {0:5g}  {'-':>5}  {'':>6}  {label[:width]:<{width}}  ({t.not_run})")
            continue
        flag = "" if t.cases and t.passed == len(t.cases) else "  <-- " + _why(t)
        rows.append(f"{t.score:7.2f} {t.points:5g}  {t.passed:>2}/{len(t.cases):<2}  {t.wall:5.1f}s  "
                    f"{label[:width]:<{width}}{flag}")
    score, top = sum(t.score for t in tests), f"{sum(t.max_score for t in tests):g}"
    skipped = sum(1 for t in tests if t.not_run)
    rows.append("-" * (width + 30))
    if manifest is not None:
        from autograder.rubric import points_summary          # rubric builds on this module
        points = points_summary(tests, manifest)
        rows.append("per task: " + ", ".join(f"{task}{' (bonus)' * bool(row.get('bonus'))} {row['score']:.2f} / "
                                             f"{row['max']:g}" for task, row in points["tasks"].items()))
        top = out_of(points)
    rows.append(f"TOTAL {score:.2f} / {top}   ({len(tests)} tests"
                + (f", {skipped} not run" if skipped else "") + f", {total_time:.1f} s"
                + (f", on {device}" if device else "") + ")")
    return "\n".join(rows)


def out_of(points: dict) -> str:
    """"135 + 8 bonus" (or "230") from points_summary's "code" and "bonus" (results.json extra_data has them)."""
    bonus = points["bonus"]["max"]
    return f"{points['code']['max']:g}" + (f" + {bonus:g} bonus" if bonus else "")


def _short(name: str) -> str:
    """"HW1 1.4 test_naive_all_reduce" from "HW1 1.4 naive all-reduce through rank 0: test_naive_all_reduce"."""
    head, _, function = name.rpartition(": ")
    return " ".join(head.split()[:2] + [function]) if head else name


def _why(t: GradedTest) -> str:
    for note in t.notes:
        if note.startswith(("Timed out", "The test process", "Internal")):
            return note.split(";")[0].split("\n")[0][:60]
    for c in t.cases:
        msg = t.outcomes.get(c, {}).get("message", "")
        if msg:
            return msg.splitlines()[0][:60]
    return "failed"

"""Run the graded test functions: one job per function, its records turned into outcomes and notes.

    run_all(runners, tests, kit, records, deadline, replaced, quiet, boxes)

Each test function runs as one pytest job in the grader's copy of the kit (`kit`), with its
records and output in the root-only folder `records`; with a sandbox per runner (`boxes`), the
job's code under test runs in that sandbox's rank host. Outcomes come only from the plugin's
records that carry the job's nonce and name a collected case; anything missing fails.
"""

from __future__ import annotations

import json
import os
import queue
import re
import secrets
import sys
import threading

from autograder import feedback
from autograder.collect import pytest_args
from autograder.results import GradedTest, tail

INPUT_SECRET = "input-secret"     # this grading's secret for the tests' inputs, a root-only file in `records`


def _records(path: str, nonce: str, cases: list[str]) -> tuple[dict, str | None, list[str]]:
    """({node id: outcome record}, node id of the last case started, collection errors) from a run."""
    outcomes, started, errors = {}, None, []
    if not os.path.exists(path):
        return outcomes, started, errors
    with open(path, errors="replace") as f:
        for line in f:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if not isinstance(rec, dict) or rec.get("nonce") != nonce:
                continue
            if rec.get("kind") == "collect_error":
                errors.append(str(rec.get("message", "")))
            elif rec.get("nodeid") not in cases:
                continue
            elif rec.get("kind") == "start":
                started = rec["nodeid"]
            elif rec.get("kind") == "case":
                old = outcomes.get(rec["nodeid"])
                if old is None or rec.get("outcome") != "passed":       # any failure report wins
                    outcomes[rec["nodeid"]] = {k: rec.get(k) for k in ("outcome", "message", "out_start", "out_end")}
    return outcomes, started, errors


def _slice(text: bytes, start, end) -> str:
    if not isinstance(start, int) or start < 0:
        return ""
    end = end if isinstance(end, int) and end >= start else len(text)
    return text[start:end].decode(errors="replace")


def run_test(runner, root: str, test: GradedTest, records: str, deadline: float, replaced: dict,
             box=None, prefixes: tuple[str, ...] = (), device: str = "cpu") -> None:
    """Run one graded test function and fill in its outcomes and notes (never raises).

    The pytest process runs in the grader's kit copy (`root`, stubs only) and writes its records to
    `records` (root-only); with a sandbox `box`, the code under test runs in that test's rank host.
    MINITORCH_DIST_DEVICE=`device` reaches the test and its rank processes (launch()'s default device).
    """
    nonce = secrets.token_hex(8)
    results = os.path.join(records, f"{nonce}.jsonl")
    output = os.path.join(records, f"{nonce}.out")
    env = {"AUTOGRADER_RESULTS": results, "AUTOGRADER_NONCE": nonce,
           "MINITORCH_DIST_DEADLINE": f"{min(deadline, max(1.0, test.limit / 2)):g}",
           "MINITORCH_DIST_DEVICE": device, "AUTOGRADER_INPUT_SECRET_FILE": os.path.join(records, INPUT_SECRET)}
    scratch = box.job_scratch(nonce) if box is not None else None
    try:
        reply = runner.run(pytest_args(root, test.cases), env, output, test.limit, box=box, scratch=scratch)
        test.wall = float(reply.get("wall", 0.0))
        test.memory_mib = float(reply.get("memory_mib", 0.0))
        outcomes, started, errors = _records(results, nonce, test.cases)
        with open(output, "rb") as f:
            text = f.read()
        for nodeid, res in outcomes.items():
            if res["outcome"] != "passed":
                res["output"] = tail(_slice(text, res.get("out_start"), res.get("out_end")))
        test.outcomes = outcomes
        unreported = [c for c in test.cases if c not in outcomes]
        if reply["status"] == "timeout":
            running = started if started in unreported else None
            where = f" while running {test.case_label(running)}" if running else ""
            out = _slice(text, outcomes.get(running, {}).get("out_start", 0) if running else 0, None)
            test.notes.append(f"Timed out after {test.limit:g} s{where}; all of the test's processes were killed. "
                              f"Look for an infinite loop or a receive that nothing sends to." +
                              (f"\nOutput before the limit:\n{tail(out, 3000)}" if out.strip() else ""))
        elif reply["status"] == "error":
            test.notes.append(f"Internal grader error while running this test ({reply.get('error', '')[:1500]}); "
                              f"it is marked failed: please tell the course staff.")
        elif unreported:
            why = "\n".join(errors) or tail(text.decode(errors="replace"), 3000) or "(no output)"
            test.notes.append(f"The test process ended (exit code {reply.get('code')}) before reporting "
                              f"{len(unreported)} case(s): the code under test may have crashed, exited "
                              f"(sys.exit / os._exit) or failed to import.\n{why}")
        for c in unreported:
            test.outcomes[c] = {"outcome": "failed", "message": "did not finish (see below)"}
        text = " ".join(str(r.get(k, "")) for r in test.outcomes.values() for k in ("message", "output"))
        hint = feedback.limit_hint(text, box.limits if box is not None else None)
        if hint and test.passed < len(test.cases):
            test.notes.append(hint)
        host_output = str(reply.get("host_output") or "").strip()
        if host_output and test.passed < len(test.cases):
            test.notes.append(f"Output the rank processes wrote outside Python's print:\n{tail(host_output, 2000)}")
        for prefix in (root, *prefixes):                          # kit-relative paths in the feedback
            prefix = prefix.rstrip(os.sep) + os.sep
            for res in test.outcomes.values():
                for key in ("message", "output"):
                    if isinstance(res.get(key), str):
                        res[key] = res[key].replace(prefix, "")
            test.notes = [note.replace(prefix, "") for note in test.notes]
        messages = " ".join(str(r.get("message", "")) for r in test.outcomes.values()) + " " + test.name
        for task, why in replaced.items():
            if test.passed < len(test.cases) and re.search(rf"\b{re.escape(task)}\b", messages):
                test.notes.append(f"Note: {why}.")
    except Exception as exc:  # noqa: BLE001 - one broken test never stops the grading
        test.outcomes = {c: {"outcome": "failed", "message": "internal grader error"} for c in test.cases}
        test.notes.append(f"Internal grader error ({type(exc).__name__}: {exc}); please tell the course staff.")


def draw_input_secret(records: str) -> str:
    """Write a fresh secret for this grading's test inputs to `records`/INPUT_SECRET (mode 600); its path.

    The test processes read it (AUTOGRADER_INPUT_SECRET_FILE, assignments/common/rank_inputs.py) and
    make every rank's input from it. A file, not the secret itself in the job's environment: the zygote
    holds each job it reads in its memory, and the rank hosts it forks (and their ranks) inherit that
    memory; the records folder is root-only, out of the sandbox uid's reach."""
    path = os.path.join(records, INPUT_SECRET)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32))
    return path


def task_order(test: GradedTest) -> tuple:
    """Sort key: the task numbers in the test's name (1.2 before 1.10), unnamed last."""
    m = re.search(r" (\d+)\.(\d+) ", test.name)
    return (int(m.group(1)), int(m.group(2))) if m else (999, 0)


def run_all(runners, tests, kit, records, deadline, replaced, quiet, boxes=None, prefixes=(),
            stop_at_first_failure=False, device: str = "cpu") -> None:
    """Run every test, one per runner at a time; the longest time limits start first.
    stop_at_first_failure: no test starts once one has lost points (those left are not run and
    count as failed, "not run")."""
    draw_input_secret(records)
    todo = queue.Queue()
    for test in sorted(tests, key=lambda t: -t.limit) if len(runners) > 1 else tests:
        todo.put(test)
    lock, done = threading.Lock(), []

    def work(runner, box):
        while True:
            try:
                test = todo.get_nowait()
            except queue.Empty:
                return
            if stop_at_first_failure and any(t.passed < len(t.cases) for t in done):
                test.outcomes = {c: {"outcome": "failed", "message": "not run (an earlier test failed)"}
                                 for c in test.cases}
                continue
            run_test(runner, kit, test, records, deadline, replaced, box, prefixes, device)
            with lock:
                done.append(test)
                if not quiet:
                    print(f"[{len(done)}/{len(tests)}] {test.score:g}/{test.points:g}  {test.wall:5.1f}s  "
                          f"{test.name}", file=sys.stderr, flush=True)

    boxes = boxes or [None] * len(runners)
    threads = [threading.Thread(target=work, args=(r, b), daemon=True) for r, b in zip(runners, boxes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

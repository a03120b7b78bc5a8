"""Hostile submissions: ranks that hand each other their inputs outside the measured sockets
(files in a shared folder, a sibling's memory through /proc/PID/mem, abstract unix sockets) and
send the naive all-reduce's messages with garbage inside score no more than p = 1 deserves.

Every rank of a test runs as the same sandbox uid, so without the isolation layer
(minitorch_dist/runtime/launching/isolation.py: a Landlock domain per rank) each of these ways takes
the hidden test_naive_all_reduce's full marks: right values, and the traffic the kernel measures is
the naive algorithm's. With the layer every exchange fails, and so does every case but p = 1.
"""

import json
import os
import re

import pytest

from tests.kit.forgeries import EXCHANGE, WAYS
from tests.kit.submissions import insert_after_marker, make_submission, shared_session
from tests.kit.test_hostile import correct_neighbour, sandboxed_processes, uids_of

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox's user layer needs root (CI runs as root)")]


SIZES = (1, 2, 3, 4)          # p = 1, then one world size per way (files, memory, sockets)


def test_inputs_exchanged_outside_the_sockets_score_only_p1(tmp_path):
    """One grading of the hidden test_naive_all_reduce at p = 1-4 (files at p = 2, memory at 3, abstract
    sockets at 4). Graded at every p (2-8 spread over the three ways) before the layer, the same code
    took 8 of 8 (the test's 6 and the task's rubric entry 2); with it, what p = 1 deserves. About 15 s."""
    assert {WAYS[p] for p in SIZES[1:]} == {"file", "mem", "sock"}
    sub = make_submission(tmp_path / "exchange", {"all_reduce.py": insert_after_marker("1.4", EXCHANGE)})
    out = tmp_path / "results.json"
    session = shared_session("hw1", suites=None, jobs=2)
    tests = session.select(r"HW1 1\.4 .*: test_naive_all_reduce$")
    tests[0].cases = [c for c in tests[0].cases if c.endswith(tuple(f"[{p}]" for p in SIZES))]
    assert len(tests[0].cases) == len(SIZES), tests[0].cases
    with correct_neighbour(tmp_path) as beside:
        results = session.grade(str(sub), out=str(out), tests=tests, show=False)
        beside.append(results)
    naive = [t for t in results["tests"][1:] if t["name"].endswith(": test_naive_all_reduce")][0]
    shown = naive["output"]
    assert "ATTACK-DONE: EXCHANGE" in shown and "ATTACK-BLOCKED file" in shown, shown[-3000:]   # p = 2's output
    exchanged = sorted(set(re.findall(r"ATTACK-EXCHANGED (\w+)", shown)))
    assert exchanged == [], f"inputs went through {exchanged}:\n{shown[-3000:]}"
    # every case but p = 1 failing means every way failed
    assert results["score"] <= naive["max_score"] / len(SIZES) + 1e-3, [(t["name"], t["score"]) for t in results["tests"]]
    assert results["extra_data"]["sandbox"]["isolation"].startswith("active"), results["extra_data"]["sandbox"]
    assert json.loads(out.read_text())["score"] == results["score"]
    assert sandboxed_processes(uids_of(results)) == [], "sandboxed processes outlived the grading"

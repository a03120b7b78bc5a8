"""Hostile submissions against "how" the result was computed: counters and the simulated clock are
written in the rank processes, so a verdict must not rest on them alone.

The ring all-reduce (task 1.7) is done with a binomial tree (right values), its counters rewritten
to a ring's 2(p-1) chunk messages and, on the sim backend, its clock padded with group.compute()
up to the ring's cost (alpha and beta measured in-band). The traffic tests compare the counters
with the bytes the kernel counted between the rank processes (RunResult.wire); the sim-time tests
also need the same function's traffic on gloo, measured that way, to be a ring's.
"""

import os

import pytest

from tests.kit.attacks import attack
from tests.kit.submissions import by_name, insert_after_marker, make_submission
from tests.kit.test_hostile import run
from tests.kit.test_hostile_sandbox import check_nothing_left

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox's user layer needs root (CI runs as root)")]


def test_forged_counters_and_a_padded_clock_score_nothing(tmp_path):
    sub = make_submission(tmp_path / "forged", {"all_reduce.py": insert_after_marker("1.7", attack("FORGED_RING"))})
    results = run(sub, "hw1", only=r": test_ring_all_reduce_(messages|sim_time)$", suites=None, jobs=2)
    tests = by_name(results)
    messages, sim_time = tests["test_ring_all_reduce_messages"], tests["test_ring_all_reduce_sim_time"]
    assert "ATTACK-DONE: FORGED_RING" in messages["output"] + sim_time["output"]
    assert messages["score"] == 0 and "the kernel counted" in messages["output"], messages["output"][-2000:]
    assert sim_time["score"] == 0 and "the kernel counted" in sim_time["output"], sim_time["output"][-2000:]
    assert results["score"] == 0
    check_nothing_left(results)

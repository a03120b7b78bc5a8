"""A grading where the kernel refuses Landlock (a container's seccomp profile may: Docker's refused
landlock_create_ruleset with EPERM until its profile allowed it; kernels before 5.13 lack it).

The rank isolation layer (minitorch_dist/runtime/launching/isolation.py) then cannot be made: the
grading must carry on with the other layers, state "isolation: unavailable" with the reason in
results.json, and what the statement says a submission can then do must be true (the ranks of a
test, one uid, hand each other inputs through a file, outside the measured sockets), and what it
says still holds must hold: a sim run's clock stays in the engine process, which no rank can
trace, read or write (test_hostile_sim_clock.py's forgery scores nothing here too). The grader
runs in a child process under a seccomp filter that refuses the three Landlock calls, as such a
container would; every process of the grading inherits it.
"""

import json
import os
import subprocess
import sys

import pytest

from tests.kit.forgeries import EXCHANGE, WAYS
from tests.kit.submissions import insert_after_marker, make_submission
from tests.kit.test_hostile import correct_neighbour, sandboxed_processes, uids_of
from tests.kit.test_hostile_sim_clock import FORGE_THE_CLOCK

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox's user layer needs root (CI runs as root)"),
              pytest.mark.skipif(os.uname().machine != "x86_64", reason="the filter below uses x86_64's numbers")]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# the child: refuse landlock_create_ruleset, _add_rule and _restrict_self (444-446) with EPERM, then
# grade the hidden test_naive_all_reduce at p = 1 and 2 (p = 2 exchanges its inputs through files)
# and test_ring_all_reduce_sim_time (its sim runs forge the clock)
GRADE_WITHOUT_LANDLOCK = r"""
import json, sys
from minitorch_dist.runtime.launching import isolation as iso, seccomp
prog = [("ld", 4), ("jeq", 0xC000003E, None, "allow"), ("ld", 0), ("jge", 444, None, "allow"),
        ("jge", 447, "allow", "deny"), "allow", ("ret", 0x7FFF0000), "deny", ("ret", 0x00050000 | 1)]
assert iso._libc.prctl(iso.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
seccomp.install(prog)
assert iso.abi()[0] == 0, "the filter did not refuse Landlock"
from autograder.session import GradingSession
with GradingSession("hw1", quiet=True, suites=None) as session:
    tests = session.select(r": test_(naive_all_reduce|ring_all_reduce_sim_time)$")
    naive = [t for t in tests if t.name.endswith("naive_all_reduce")][0]
    naive.cases = [c for c in naive.cases if c.endswith(("[1]", "[2]"))]
    assert len(naive.cases) == 2, naive.cases
    results = session.grade(sys.argv[1], out=sys.argv[2], tests=tests, show=False)
"""


def test_without_landlock_the_grading_says_so_and_the_other_layers_hold(tmp_path):
    """One grading in a fresh session: two naive cases, and the ring's sim times (p = 64, rounds at p = 5
    and 8; each with the gloo traffic at p = 5). About 20 s."""
    assert WAYS[2] == "file"
    exchange, forge = insert_after_marker("1.4", EXCHANGE), insert_after_marker("1.7", FORGE_THE_CLOCK)
    sub = make_submission(tmp_path / "exchange", {"all_reduce.py": lambda text: forge(exchange(text))})
    out = tmp_path / "results.json"
    with correct_neighbour(tmp_path) as beside:
        done = subprocess.run([sys.executable, "-c", GRADE_WITHOUT_LANDLOCK, str(sub), str(out)], cwd=ROOT,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        results = json.loads(out.read_text())
        beside.append(results)
    layers = results["extra_data"]["sandbox"]
    assert layers["isolation"].startswith("unavailable: landlock_create_ruleset refused (Operation not permitted"), layers
    assert "hand each other inputs outside the measured sockets" in layers["isolation"], layers
    for layer in ("user", "processes", "network"):                 # the rest of the sandbox is unchanged
        assert layers[layer].startswith("active"), (layer, layers)
    naive = [t for t in results["tests"] if t["name"].endswith(": test_naive_all_reduce")][0]
    # what the line says is what happens: p = 2 sent garbage in every message, so its right values came
    # through the file its ranks swapped (with the layer, test_hostile_isolation.py, the case fails)
    assert naive["score"] == naive["max_score"], naive
    timed = [t for t in results["tests"] if t["name"].endswith(": test_ring_all_reduce_sim_time")][0]
    shown = timed["output"]
    assert timed["score"] == 0, shown[-3000:]
    assert "ATTACK-CLOCK-WRITTEN" not in shown and "group.compute() was called" in shown, shown[-3000:]
    assert "ATTACK-ENGINE-OPENED" not in shown, shown[-3000:]
    assert sandboxed_processes(uids_of(results)) == [], "sandboxed processes outlived the grading"

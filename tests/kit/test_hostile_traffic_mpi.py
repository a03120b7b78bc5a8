"""A hostile submission against the traffic of a bucketed DDP, on mpi and on gloo. MPICH's ranks on one machine talk through
shared memory, which the kernel does not count; in a grading they talk over TCP instead
(run_meter.MPI_OVER_TCP), and their counters are held to the bytes the kernel counted as gloo's are.

Homework 2's BucketedDDP all-reduces every gradient a second time after the real synchronisation, and
takes each extra call out of group.counters and the trace: right values, the counters and the steps'
snapshots of a correct bucketed DDP, twice the bytes on the wire. On gloo the same code took 9 of 9 on
test_ddp_how_gradients_are_averaged while the kernel's upper bound allowed 4x a reduction's bytes (a
widened dtype); homework 2's step suites reduce float32 only and say so (widest=1).
"""

import json
import os

import pytest

from tests.kit.submissions import by_name, make_submission, run
from tests.kit.test_hostile import correct_neighbour
from tests.kit.test_hostile_inputs_hw36 import in_function
from tests.kit.test_hostile_sandbox import check_nothing_left

pytestmark = [pytest.mark.slow, pytest.mark.mpi,
              pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox's user layer needs root (CI runs as root)")]

REDUCES_TWICE = '''
if self.require_sync and not getattr(self, "_again", False):
    self._again = True
    try:
        self.finish_gradient_synchronization()          # the real synchronisation, then the same again
    finally:
        self._again = False
    _g = self.group
    for _p in [q for q in self.params if q.grad is not None]:
        _g.all_reduce(_p.grad.clone())                  # blocking, nothing else in flight: the last event
        _c = _g.counters.by_op["all_reduce"]
        _c.calls, _c.tensor_bytes = _c.calls - 1, _c.tensor_bytes - _p.grad.nbytes
        del _g.events[-1]
    print("ATTACK-DONE: MPI_REDUCES_TWICE", flush=True)
    return
'''


def test_a_bucketed_ddp_on_mpi_that_hides_a_second_all_reduce_scores_only_the_rest(tmp_path):
    """test_on_mpi's bucketed case (p = 3; 1 of its 3 points) and task 2.4's rubric entry. While mpi
    runs were not measured this took both; now the bucketed case fails with the kernel's count (its
    ring gossip and push-sum cases, untouched, keep theirs). One grading of one test (about 20 s)."""
    forged = in_function("finish_gradient_synchronization", REDUCES_TWICE, "HW2", "2.4")
    sub = make_submission(tmp_path / "twice", {"bucketed.py": forged}, homework="hw2")
    out = tmp_path / "results.json"
    with correct_neighbour(tmp_path) as beside:
        results = run(sub, "hw2", only=r"HW2 2\.4-2\.6: test_on_mpi$", out=str(out), jobs=2)
        beside.append(results)
    tests = by_name(results)
    on_mpi = tests["test_on_mpi"]
    assert "ATTACK-DONE: MPI_REDUCES_TWICE" in on_mpi["output"], on_mpi["output"][-2000:]
    assert "the kernel counted" in on_mpi["output"], on_mpi["output"][-2000:]
    assert on_mpi["score"] == pytest.approx(on_mpi["max_score"] * 2 / 3), on_mpi["output"][-2000:]
    scores = {t["name"]: t["score"] for t in results["tests"]}
    rubric = [s for n, s in scores.items() if n.startswith("HW2 2.4 ") and n.endswith("every case of the task passes")]
    assert rubric == [0], scores
    assert json.loads(out.read_text())["score"] == results["score"]
    check_nothing_left(results)


def test_the_same_on_gloo_loses_the_bucketed_cases_and_the_rubric_entry(tmp_path):
    """test_ddp_how_gradients_are_averaged (2.2-2.4): the all-reduce and overlapped versions' cases keep
    their points (6 of 9), the bucketed ones fail with the kernel's count, and 2.4's rubric entry is 0.
    One grading of one test (about 10 s)."""
    forged = in_function("finish_gradient_synchronization", REDUCES_TWICE, "HW2", "2.4")
    sub = make_submission(tmp_path / "twice", {"bucketed.py": forged}, homework="hw2")
    results = run(sub, "hw2", only=r"HW2 2\.2-2\.4: test_ddp_how_gradients_are_averaged$", jobs=2)
    how = by_name(results)["test_ddp_how_gradients_are_averaged"]
    assert "the kernel counted" in how["output"] and "bucketed(" in how["output"], how["output"][-2000:]
    assert how["score"] == pytest.approx(how["max_score"] * 2 / 3), how["output"][-2000:]
    scores = {t["name"]: t["score"] for t in results["tests"]}
    rubric = [s for n, s in scores.items() if n.startswith("HW2 2.4 ") and n.endswith("every case of the task passes")]
    assert rubric == [0], scores
    check_nothing_left(results)

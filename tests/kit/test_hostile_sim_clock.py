"""Hostile submission: a ring all-reduce that is right on gloo (values, and the traffic the kernel
counts), while on sim it runs the naive algorithm, rewrites its counters to the ring's, and makes
the clock show the ring's time: it writes the scheduler's clocks where it can find them (the thread
sim: every rank a thread of the process that holds them), else pads its own clock with
group.compute().

On the thread sim the clock write took the hidden test_ring_all_reduce_sim_time's full marks. In
a grading each sim rank is a process and the scheduler lives in an engine process out of its reach
(minitorch_dist/runtime/sim/processes.py): the write finds nothing, the padding is counted by the
engine, and homework 1, whose times come from messages alone, fails every case that called it.
At p = 1024 (the thread sim, past the engine's 64 ranks) the clock write would work: that test
scores only when the same function passes at p = 64 on the engine too.
Homework 5's bubble check holds each case to the run's own simulated time, not only to the step
times its ranks recorded: a GPipe without overlap whose ranks patch Group.now so that the recorded
steps are the formula's scores nothing on the bubble, for that reason alone.
"""

import os

import pytest

from tests.kit.submissions import insert_after_marker, make_submission, shared_session
from tests.kit.test_hostile import NAMESPACES, correct_neighbour, sandboxed_processes, uids_of

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox's user layer needs root (CI runs as root)")]

FORGE_THE_CLOCK = '''
if group.backend == "sim":                  # on sim: the naive algorithm, then the ring's time on the clock
    import gc as _gc
    from minitorch_dist import cost_model as _cm
    import copy as _copy
    _p, _acc, _before = group.size, x.clone(), _copy.deepcopy(group.counters.by_op)
    if group.rank == 0:
        for _src in range(1, _p):
            _got = torch.empty_like(x)
            group.recv(_got, _src)
            _acc += _got
        for _dst in range(1, _p):
            group.send(_acc, _dst)
    else:
        group.send(x, 0)
        group.recv(_acc, 0)
    x.copy_(_acc)
    group.counters.by_op.clear()           # the counters the ring would show: 2(p-1) chunks each way
    group.counters.by_op.update(_before)
    from minitorch_dist.runtime.observe.trace import OpCount as _OpCount
    _ring, _steps = group.counters.by_op.setdefault("sendrecv", _OpCount()), 2 * (_p - 1)
    _chunk = -(-x.numel() // _p) * x.element_size()
    _ring.calls += _steps
    _ring.messages_sent += _steps
    _ring.messages_recv += _steps
    _ring.bytes_sent += _steps * _chunk
    _ring.bytes_recv += _steps * _chunk
    _found = [o for o in _gc.get_objects() if type(o).__name__ == "Scheduler" and o.world_size == _p]
    if _found:
        _net = _found[0].network
        _want = _cm.ring_all_reduce(_p, x.numel() * x.element_size(), _net.alpha, _net.beta)
        for _slot in _found[0].slots:
            _slot.clock = _want
        print("ATTACK-CLOCK-WRITTEN", flush=True)
    else:
        try:                               # the engine is this process's parent: its memory holds the clock
            open("/proc/%d/mem" % __import__("os").getppid(), "rb").close()
            print("ATTACK-ENGINE-OPENED", flush=True)
        except OSError:
            pass
        group.compute(1e-3)
        print("ATTACK-PADDED", flush=True)
    return x
'''


@pytest.mark.parametrize("namespaces", NAMESPACES)
def test_a_ring_that_forges_its_sim_time_scores_nothing_there(tmp_path, namespaces):
    """One grading of test_ring_all_reduce_sim_time (p = 64, and rounds at p = 5 and 8; each case also
    checks the function's traffic on gloo at p = 5), with namespaces and without (the engine needs
    none); and of the p = 1024 test, which runs on the thread sim (the clock write would work there)
    and so scores only when p = 64 passes on the engine too. About 20 s each."""
    sub = make_submission(tmp_path / "forge", {"all_reduce.py": insert_after_marker("1.7", FORGE_THE_CLOCK)})
    session = shared_session("hw1", suites=None, jobs=2, **({} if namespaces else {"namespaces": False}))
    with correct_neighbour(tmp_path, namespaces) as beside:
        results = session.grade(str(sub), out=str(tmp_path / "results.json"),
                                only=r"test_ring_all_reduce_sim_time(_p1024)?$", show=False)
        beside.append(results)
    assert results["extra_data"]["sandbox"]["isolation"].startswith("active"), results["extra_data"]["sandbox"]
    timed = [t for t in results["tests"] if t["name"].endswith(": test_ring_all_reduce_sim_time")]
    large = [t for t in results["tests"] if t["name"].endswith(": test_ring_all_reduce_sim_time_p1024")]
    assert len(timed) == 1 and len(large) == 1, [t["name"] for t in results["tests"]]
    assert large[0]["score"] == 0, large[0]["output"][-3000:]      # the thread sim: gated on p = 64's engine
    assert "also passes at p = 64" in large[0]["output"], large[0]["output"][-3000:]
    shown = timed[0]["output"]
    assert timed[0]["score"] == 0, shown[-3000:]
    assert "ATTACK-CLOCK-WRITTEN" not in shown and "group.compute() was called" in shown, shown[-3000:]
    assert "ATTACK-ENGINE-OPENED" not in shown, shown[-3000:]
    assert "on gloo" not in shown, shown[-3000:]               # the traffic the kernel counted was the ring's
    assert sandboxed_processes(uids_of(results)) == [], "sandboxed processes outlived the grading"


# GPipe without overlap (each stage receives all m micro-batches before its first forward, and all m
# gradients before its first backward: p m (t_f + t_b) a step, right values and messages), whose
# ranks patch Group.now so that the step times the harness records are (m+p-1)(t_f+t_b) apart
GPIPE_FORGING_ITS_STEP_TIMES = '''
import sys as _y
from minitorch_dist.runtime.group import Group as _G
from assignments.hw5.tests.hw5_setup import STAGE_TIME as _ST
_calls = _y.__dict__.setdefault("_forged_now", {})
if stage.group.backend == "sim" and not _calls:
    _ideal = (n_microbatches + stage.group.size - 1) * sum(_ST)
    def _now(self):
        _k = _calls.setdefault(self.rank, [0])
        _k[0] += 1                              # this step's end, the next one's start, ...
        return ((_k[0] + 1) // 2) * _ideal
    _G.now = _now
    _calls["installed"] = [0]
    print("ATTACK-NOW-PATCHED", flush=True)
m = n_microbatches
optimizer.zero_grad()
handles, losses = [], []
xs = [inputs[i] if stage.is_first else recv_forward(stage, i) for i in range(m)]
for i in range(m):
    y = forward_step(stage, i, xs[i], targets[i], 1.0 / m)
    if stage.is_last:
        losses.append(y.detach())
    else:
        handles.append(send_forward(stage, y, i))
gs = [None if stage.is_last else recv_backward(stage, i) for i in range(m)]
for i in range(m):
    grad_input = backward_step(stage, i, gs[i])
    if not stage.is_first:
        handles.append(send_backward(stage, grad_input, i))
for h in handles:
    h.wait()
optimizer.step()
return sum(losses) if stage.is_last else None
'''


def test_a_gpipe_without_overlap_that_forges_its_step_times_scores_nothing_on_the_bubble(tmp_path):
    """Homework 5's hidden test_gpipe_bubble_on_sim, graded beside the GPipe test on gloo (which the
    code passes: its values and messages are right). The step times the ranks recorded are the formula's
    (no "step s: took" problem), but the engine's clock says how long the run took. About 20 s."""
    sub = make_submission(tmp_path / "gpipe", {"gpipe.py": insert_after_marker("5.2", GPIPE_FORGING_ITS_STEP_TIMES,
                                                                              homework="HW5")}, homework="hw5")
    session = shared_session("hw5", suites=None, jobs=2)
    only = r"5\.2 GPipe: test_gpipe_(bubble_on_sim|matches_one_process_forwards_then_backwards)$"
    with correct_neighbour(tmp_path) as beside:
        results = session.grade(str(sub), out=str(tmp_path / "results.json"), only=only, show=False)
        beside.append(results)
    bubble = [t for t in results["tests"] if t["name"].endswith("test_gpipe_bubble_on_sim")]
    assert len(bubble) == 1, [t["name"] for t in results["tests"]]
    shown = bubble[0]["output"]
    assert bubble[0]["score"] == 0, shown[-3000:]
    assert "ATTACK-NOW-PATCHED" in shown, shown[-3000:]
    assert "simulated in all" in shown and "took" not in shown.replace("the run took", ""), shown[-3000:]
    gloo = [t for t in results["tests"] if "test_gpipe_matches" in t["name"]]
    assert gloo and all(t["score"] == t["max_score"] for t in gloo), [(t["name"], t["output"][-500:]) for t in gloo]
    assert sandboxed_processes(uids_of(results)) == [], "sandboxed processes outlived the grading"


def test_hw5s_bubble_check_holds_the_run_to_its_own_clock():
    """The bubble tests' step times are recorded by the ranks (forgeable: a rank can patch Group.now); a
    case that runs alone also has the run's simulated time, the engine's in a grading, and a run slower
    than STEPS back-to-back steps of (m+p-1)(t_f+t_b) fails whatever the ranks recorded."""
    from assignments.common.case_suites import Outcome
    from assignments.hw5.tests.hw5_checks import timing_problems
    from assignments.hw5.tests.hw5_harness import Case
    from assignments.hw5.tests.hw5_setup import STAGE_TIME, STEPS
    p, m = 3, 5
    step = (m + p - 1) * sum(STAGE_TIME)
    ideal = [{"times": [(s * step, (s + 1) * step) for s in range(STEPS)]} for _ in range(p)]
    honest = Outcome(Case("1f1b", "mlp", m), p, "sim", ideal, sim_time=STEPS * step)
    assert timing_problems(honest) == []
    sequential = Outcome(Case("1f1b", "mlp", m), p, "sim", ideal, sim_time=STEPS * m * p * sum(STAGE_TIME))
    problems = timing_problems(sequential)
    assert len(problems) == 1 and "simulated in all" in problems[0], problems
    from assignments.hw5.tests.hw5_bonus_checks import CHUNKS, interleaved_formula, interleaved_timing_problems
    p, m = 2, 3                                       # the interleaved bonus: its own step time
    step = interleaved_formula(p, CHUNKS, m)[0]
    ideal = [{"times": [(s * step, (s + 1) * step) for s in range(STEPS)]} for _ in range(p)]
    assert interleaved_timing_problems(Outcome(Case("interleaved", "deep_mlp", m), p, "sim", ideal,
                                               sim_time=STEPS * step)) == []
    assert len(interleaved_timing_problems(Outcome(Case("interleaved", "deep_mlp", m), p, "sim", ideal,
                                                   sim_time=2 * STEPS * step))) == 1

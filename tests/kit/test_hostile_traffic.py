"""Hostile submissions against "how" the result was computed: counters and the simulated clock are
written in the rank processes, so a verdict must not rest on them alone.

The ring all-reduce (task 1.7) is done with a binomial tree (right values), its counters rewritten
to a ring's 2(p-1) chunk messages and, on the sim backend, its clock padded with group.compute()
up to the ring's cost (alpha and beta measured in-band). The traffic tests compare the counters
with the bytes the kernel counted between the rank processes (RunResult.wire); the sim-time tests
also need the same function's traffic on gloo, measured that way, to be a ring's.

Homeworks 3-5 (their cases batched several to a launch): a GPipe that hides extra messages in its
counters (caught by the kernel check homework 5 now has), and forgeries that leave the counters
true and rewrite the harness's per-case report instead (a hw5 GPipe, hw4's reduce_from_region as
an all-gather, hw3's compressed all-reduce of the dense tensor): caught because a case whose traffic
is scored runs in a launch of its own and its report must add up to that launch's counters
(rank_runs.run_batched apart=/counted=, case_suites.counted_by). Homeworks 2, 3 and 6's cases scored by
per-step snapshots: the same, with what the run does besides its steps computed in the grader (besides=).
A collective claimed on a one-rank group in the trace, in a launch whose groups all have two ranks or
more, keeps the kernel's lower bound (the grader knows which groups a correct run makes).
"""

import json
import os
import re

import pytest
import torch

from tests.kit.attacks import attack
from tests.kit.submissions import by_name, insert_after_marker, make_submission
from tests.kit.test_hostile import NAMESPACES, correct_neighbour, run
from tests.kit.test_hostile_sandbox import check_nothing_left

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox's user layer needs root (CI runs as root)")]


@pytest.mark.parametrize("namespaces", NAMESPACES)
def test_forged_counters_and_a_padded_clock_score_nothing(tmp_path, namespaces):
    """The kernel's counts come from the rank processes' own sockets (sock_diag), so they hold without a
    network namespace too (as in a container that refuses them)."""
    sub = make_submission(tmp_path / "forged", {"all_reduce.py": insert_after_marker("1.7", attack("FORGED_RING"))})
    with correct_neighbour(tmp_path, namespaces) as beside:
        results = run(sub, "hw1", only=r": test_ring_all_reduce_(messages|sim_time)$", suites=None, jobs=2,
                      namespaces=namespaces)
        beside.append(results)
    assert results["extra_data"]["sandbox"]["network"].startswith("active" if namespaces else "unavailable")
    tests = by_name(results)
    messages, sim_time = tests["test_ring_all_reduce_messages"], tests["test_ring_all_reduce_sim_time"]
    assert "ATTACK-DONE: FORGED_RING" in messages["output"] + sim_time["output"]
    assert messages["score"] == 0 and "the kernel counted" in messages["output"], messages["output"][-2000:]
    assert sim_time["score"] == 0 and "the kernel counted" in sim_time["output"], sim_time["output"][-2000:]
    assert results["score"] == 0
    check_nothing_left(results)


# Homework 5: every activation sent twice (a second copy on another tag, received and dropped), the
# second message taken out of the counters and the trace on both ends: right values, right order in
# the trace, the counters of a correct pipeline, twice its bytes on the wire.
DOUBLE_SEND = '''
_g, _tag = stage.group, 1000 + microbatch
_n = output.detach().contiguous().nbytes
_g.send(output.detach().contiguous(), stage.next_rank, tag=_tag)
_c = _g.counters.by_op["send"]
_c.calls, _c.messages_sent, _c.bytes_sent = _c.calls - 1, _c.messages_sent - 1, _c.bytes_sent - _n
_g.events[:] = [e for e in _g.events if e.tag != _tag]
print("ATTACK-DONE: DOUBLE_SEND", flush=True)
'''
DOUBLE_RECV = '''
_g, _tag = stage.group, 1000 + microbatch
_copy = stage.spec.input_buffer(_g.device)
_g.recv(_copy, stage.prev_rank, tag=_tag)
_c = _g.counters.by_op["recv"]
_c.calls, _c.messages_recv, _c.bytes_recv = _c.calls - 1, _c.messages_recv - 1, _c.bytes_recv - _copy.nbytes
_g.events[:] = [e for e in _g.events if e.tag != _tag]
'''


def test_a_pipeline_that_hides_extra_messages_in_its_counters_scores_nothing(tmp_path):
    """Homework 5's GPipe test scores 2(p-1)m messages a step of the boundary's bytes: the counters
    of the pipeline above say so, the kernel counts twice the bytes. Before homework 5's harness
    checked the counters against the kernel this took 16 of 16 (the test's 12 and the rubric entry's
    4); now 3, the p = 1 case (no message to hide). One grading of one test (about 25 s)."""
    doubled = _in_boundary(DOUBLE_SEND, DOUBLE_RECV)
    sub = make_submission(tmp_path / "double", {"boundary.py": doubled}, homework="hw5")
    out = tmp_path / "results.json"
    with correct_neighbour(tmp_path) as beside:
        results = run(sub, "hw5", only=r"HW5 5\.2 .*: test_gpipe_matches_one_process_forwards_then_backwards",
                      out=str(out), jobs=2)
        beside.append(results)
    tests = by_name(results)
    gpipe = tests["test_gpipe_matches_one_process_forwards_then_backwards"]
    assert "ATTACK-DONE: DOUBLE_SEND" in gpipe["output"], gpipe["output"][-2000:]
    deserved = gpipe["max_score"] / 4                                    # p = 1 of p = 1..4
    assert results["score"] <= deserved + 1e-9, [(t["name"], t["score"]) for t in results["tests"]]
    assert "the kernel counted" in gpipe["output"], gpipe["output"][-2000:]
    assert json.loads(out.read_text())["score"] == results["score"]
    check_nothing_left(results)


# The same extra copies (out of the trace), the counters left alone (they agree with the kernel),
# and the harness's per-case report rewritten instead: its `counts` (read before and after the
# steps) made to leave the copies out.
HIDE_IN_REPORT = """
import sys as _y
_tally = _y.__dict__.setdefault("_hidden", {})          # per rank (on sim the ranks share a process)
_t = _tally.setdefault(id(stage.group.counters), {"sent": 0, "recv": 0, "bytes_sent": 0, "bytes_recv": 0})
_h = _y.modules.get("assignments.hw5.tests.hw5_ranks")
if _h is not None and not getattr(_h.counts, "_forged", False):
    _real = _h.counts
    def _counts(group, _real=_real):
        return {k: v - _tally.get(id(group.counters), {}).get(k, 0) for k, v in _real(group).items()}
    _counts._forged = True
    _h.counts = _counts
"""
COPY_SENT = """
_g, _tag = stage.group, 1000 + microbatch
_g.send(output.detach().contiguous(), stage.next_rank, tag=_tag)
_t["sent"] += 1
_t["bytes_sent"] += output.detach().contiguous().nbytes
_g.events[:] = [e for e in _g.events if e.tag != _tag]
print("ATTACK-DONE: HIDE_IN_REPORT", flush=True)
"""
COPY_RECEIVED = """
_g, _tag = stage.group, 1000 + microbatch
_copy = stage.spec.input_buffer(_g.device)
_g.recv(_copy, stage.prev_rank, tag=_tag)
_t["recv"] += 1
_t["bytes_recv"] += _copy.nbytes
_g.events[:] = [e for e in _g.events if e.tag != _tag]
"""


def _in_boundary(send_code: str, recv_code: str):
    """A mutation of boundary.py: send_code at the start of send_forward's region, recv_code at recv_forward's."""
    def mutate(text: str) -> str:
        regions = list(re.finditer(r"^( *)# BEGIN SOLUTION  \(HW5 task 5\.1\)\n", text, re.M))
        for m, code in reversed(list(zip(regions[:2], (send_code, recv_code)))):
            text = text[:m.end()] + "".join(f"{m.group(1)}{line}\n" for line in code.strip().splitlines()) + \
                text[m.end():]
        return text
    return mutate


def graded_forgery(tmp_path, homework: str, file: str, mutation, only: str, attack: str) -> tuple[dict, dict]:
    """Grade a submission whose `file` is the solution changed by `mutation`, on the hidden test `only`
    names; (results, that test's entry), once the attack said it ran, the feedback named the run's
    counters, results.json holds the score and nothing of the sandbox is left."""
    sub = make_submission(tmp_path / attack.lower(), {file: mutation}, homework=homework)
    out = tmp_path / "results.json"
    results = run(sub, homework, only=only, out=str(out), jobs=2)
    test = by_name(results)[only.rsplit(": ", 1)[1].rstrip("$")]
    assert f"ATTACK-DONE: {attack}" in test["output"], test["output"][-2000:]
    assert "the run's counters" in test["output"], test["output"][-2000:]
    assert json.loads(out.read_text())["score"] == results["score"]
    check_nothing_left(results)
    return results, test


def test_a_pipeline_that_hides_extra_messages_in_its_report_scores_nothing(tmp_path):
    """The counters of the run are true, the per-case report is not. While the cases of a run were
    checked only by the run's totals this took 16 of 16 as above; each scored case now runs alone and
    its report must be its run's counters: 3 (p = 1). About 30 s."""
    hidden = _in_boundary(HIDE_IN_REPORT + COPY_SENT, HIDE_IN_REPORT + COPY_RECEIVED)
    results, gpipe = graded_forgery(tmp_path, "hw5", "boundary.py", hidden,
                                    r"HW5 5\.2 .*: test_gpipe_matches_one_process_forwards_then_backwards",
                                    "HIDE_IN_REPORT")
    assert results["score"] <= gpipe["max_score"] / 4 + 1e-9, [(t["name"], t["score"]) for t in results["tests"]]


# Homework 4: reduce_from_region's all-reduce done as an all-gather and a local sum (right values),
# the counters left alone, the harness's per-pass report made to say all_reduce.
GATHER_AS_REDUCE = '''
import sys as _y
_tally = _y.__dict__.setdefault("_as_reduce", {})
_h = _y.modules.get("assignments.hw4.tests.hw4_ranks")
if _h is not None and not getattr(_h.counts, "_forged", False):
    def _counts(g, _real=_h.counts):
        out, (calls, nbytes) = _real(g), _tally.get(id(g.counters), (0, 0))
        out["all_gather"] -= calls
        out["all_reduce"] += calls
        out["ar_bytes"] += nbytes
        return out
    _counts._forged = True
    _h.counts = _counts
_c, _n = _tally.get(id(group.counters), (0, 0))
_tally[id(group.counters)] = (_c + 1, _n + x.contiguous().nbytes)
print("ATTACK-DONE: GATHER_AS_REDUCE", flush=True)
return group.all_gather(x.contiguous()).view(group.size, *x.shape).sum(0)
'''


def test_an_all_gather_reported_as_an_all_reduce_scores_nothing(tmp_path):
    """Homework 4's test_comm_ops scores which collective each pass ran. While its cases were checked
    by the run's totals only, this took the test's 10 points and the task's rubric entry; each
    piece now runs alone and its passes' counts must add up to its run's counters: 0. About 30 s."""
    from tests.kit.test_hostile_inputs_hw36 import in_function
    forged = in_function("forward", GATHER_AS_REDUCE, "HW4", "4.1", after="class _ReduceFromRegion")
    results, _ = graded_forgery(tmp_path, "hw4", "comm.py", forged,
                                r"HW4 4\.1 .*: test_comm_ops_forward_and_backward$", "GATHER_AS_REDUCE")
    assert results["score"] == 0, [(t["name"], t["score"]) for t in results["tests"]]


# Homework 3: compressed_all_reduce all-gathers the dense tensor and compresses every rank's copy
# itself (right values), the counters left alone, the report's all-gathered bytes made the payload's.
DENSE_AS_PAYLOAD = '''
import sys as _y
_tally = _y.__dict__.setdefault("_dense", {})
_h = _y.modules.get("assignments.hw3.tests.hw3_ranks")
if _h is not None and not getattr(_h.counts, "_forged", False):
    def _counts(g, _real=_h.counts):
        out = _real(g)
        out["all_gather_bytes"] -= _tally.get(id(g.counters), 0)
        return out
    _counts._forged = True
    _h.counts = _counts
_flat = x.detach().reshape(-1).contiguous()
_n = _flat.numel()
_all = group.all_gather(_flat)
_tally[id(group.counters)] = _tally.get(id(group.counters), 0) + _flat.nbytes - \\
    sum(t.nbytes for t in compressor.compress(_flat.clone()))
_sum = sum(compressor.decompress(compressor.compress(_all[r * _n:(r + 1) * _n].clone()), _n, x.dtype)
           for r in range(group.size))
print("ATTACK-DONE: DENSE_AS_PAYLOAD", flush=True)
return (_sum / group.size if op == "avg" else _sum).view(x.shape)
'''


def test_a_dense_all_gather_reported_as_the_payload_scores_nothing(tmp_path):
    """Homework 3's test_compressed_all_reduce_sends_only_the_payload scores the bytes that went into
    all_gather. While its cases were checked by the run's totals only, this took its 4 points and
    the task's rubric entry; each compressed all-reduce now runs alone and its comm must be its
    run's counters: 0. About 30 s."""
    from tests.kit.test_hostile_inputs_hw36 import in_function
    forged = in_function("compressed_all_reduce", DENSE_AS_PAYLOAD, "HW3", "3.1")
    results, _ = graded_forgery(tmp_path, "hw3", "quantize.py", forged,
                                r"HW3 3\.1 .*: test_compressed_all_reduce_sends_only_the_payload$", "DENSE_AS_PAYLOAD")
    assert results["score"] == 0, [(t["name"], t["score"]) for t in results["tests"]]


# Cases scored by per-step snapshots (homeworks 2, 3 and 6): the work done right, plus traffic that does
# nothing, sent through `group` (the counters stay true), then the snapshot the harness measures the
# step from (found up the stack: run_hooked's `last`, else the step's `before`) raised by what was added.
HIDE = '''
import sys as _y
def _hide(_amounts):
    _f = _y._getframe(1)
    while _f is not None and not ("last" in _f.f_locals and "comm" in _f.f_locals) and not (
            "before" in _f.f_locals and {"counts", "first_event", "events_from"} & set(_f.f_locals)):
        _f = _f.f_back
    _snap = None if _f is None else _f.f_locals["last"][0] if "last" in _f.f_locals else _f.f_locals["before"]
    for _k, _v in (_amounts.items() if _snap is not None else ()):      # homework 6's: [calls, bytes]
        _snap[_k] = [a + b for a, b in zip(_snap[_k], _v)] if isinstance(_v, tuple) else _snap[_k] + _v
'''
HOOK_GATHERS_DENSE, POWERSGD_REDUCES_DENSE = (HIDE + f"""
_dense = bucket.buffer().clone()
state.group.{op}(_dense)
_hide({{"{op}_calls": 1, "{op}_bytes": _dense.nbytes}})
""" for op in ("all_gather", "all_reduce"))
BOUNDARY_SENDS_DENSE = HIDE + '''
_dense = activation.detach().reshape(-1).contiguous().clone()
self.group.send(_dense, self.peer, tag=777)
_hide({"p2p": 1, "p2p_bytes": _dense.nbytes})
'''
BOUNDARY_RECEIVES_DENSE = "self.group.recv(torch.empty(torch.Size(shape).numel(), dtype=dtype), self.peer, tag=777)\n"
DDP_REDUCES_TWICE = HIDE + '''
for _p in [q for q in self.params if q.grad is not None and self.require_sync]:
    self.group.all_reduce(_p.grad.clone(), "avg")
    _hide({"all_reduce": 1, "collectives": 1, "ar_bytes": _p.grad.nbytes})
'''
PS_SENDS_TWICE = HIDE + '''
_flat = flat_parameters(self.params)
for _r in ([0] if self.group.rank else range(1, self.group.size)):
    self.group.send(_flat, 0, tag=555) if self.group.rank else self.group.recv(torch.empty_like(_flat), _r, tag=555)
    _hide({"sent": 1, "bytes_sent": _flat.nbytes} if self.group.rank else {"recv": 1, "bytes_recv": _flat.nbytes})
'''
ZERO_GATHERS_DENSE = HIDE + '''
_dense = torch.cat([q.grad.reshape(-1) for q in self.params if q.grad is not None])
self.group.all_gather(_dense)
_hide({"all_gather": (1, _dense.nbytes)})
'''
# HSDP (6.6): every unit's dense gradient also all-reduced across everything (the shard group, then the
# replicas), its events taken out of the trace and the step's snapshot raised by it.
HSDP_REDUCES_DENSE = HIDE + '''
_dense = self.full.grad.detach().clone()
for _g in (self.group, self.replica_group):
    _g.all_reduce(_dense, "avg")
    del _g.events[-1]
_hide({"all_reduce": (2, 2 * _dense.nbytes)})
'''
# name: (homework, file, [(function, snippet, task)], the graded test, the share of its points the code
# deserves). Batched, each took all of its test and task's rubric entry (powersgd also 8 of 8 on
# test_powersgd_matches_torch_hook, not run here: torch's reference takes a minute; 0 now); now the share.
PER_STEP = {"hook": ("hw3", "ddp_hooks.py", [("compression_hook", HOOK_GATHERS_DENSE, "3.5")],
                     r"HW3 3\.5 .*: test_compression_hook_plugs_in_each_compressor$", 1 / 4),    # p = 1 of 1-4
            "powersgd": ("hw3", "powersgd.py", [("powersgd_hook", POWERSGD_REDUCES_DENSE, "3.4")],
                         r"HW3 3\.4 .*: test_powersgd_recovers_a_rank_one_mean$", 1 / 3),       # p = 1 of 1-3
            "boundary": ("hw3", "activations.py", [("send_activation", BOUNDARY_SENDS_DENSE, "3.6"),
                                                   ("recv_activation", BOUNDARY_RECEIVES_DENSE, "3.6")],
                         r"HW3 3\.6 .*: test_compressed_boundary_both_directions$", 0.0),
            "ddp": ("hw2", "ddp.py", [("finish_gradient_synchronization", DDP_REDUCES_TWICE, "2.2")],
                    r"HW2 2\.2-2\.4: test_ddp_how_gradients_are_averaged$", 2 / 3),             # overlap, bucketed
            "ps": ("hw2", "param_server.py", [("step", PS_SENDS_TWICE, "2.1")],
                   r"HW2 2\.1 .*: test_parameter_server_moves_everything_through_rank_0$", 0.0),
            "zero": ("hw6", "zero.py", [("reduce_gradients", ZERO_GATHERS_DENSE, "6.1")], r"HW6 6\.1 .*: test_zero1$", 0.0),
            "hsdp": ("hw6", "hybrid.py", [("reduce_gradient", HSDP_REDUCES_DENSE, "6.6")],
                     r"HW6 6\.6 .*: test_hsdp_two_shard_groups_of_two$", 0.0),
            # the public test (graded too): its harness was bound by the launch's totals only (1 of 1 then)
            "hsdp_public": ("hw6", "hybrid.py", [("reduce_gradient", HSDP_REDUCES_DENSE, "6.6")],
                            r"HW6 6\.6 .*: test_hybrid_sharding_2x2$", 0.0)}


@pytest.mark.parametrize("name", PER_STEP)
def test_per_step_traffic_hidden_in_the_report_scores_only_what_the_work_deserves(tmp_path, name):
    """Each scored case runs alone; its steps' snapshots and what the run does besides them (the model's
    broadcast, a hook's check, FSDP's final gathers) must add up to its run's counters. 10-40 s each."""
    from tests.kit.test_hostile_inputs_hw36 import both, in_function
    homework, file, places, only, share = PER_STEP[name]
    attack = f"PER_STEP_{name.upper()}"
    mutations = [in_function(fn, code + (f'print("ATTACK-DONE: {attack}", flush=True)\n' if k == 0 else ""),
                             homework.upper(), task) for k, (fn, code, task) in enumerate(places)]
    results, test = graded_forgery(tmp_path, homework, file, both(*mutations), only, attack)
    scores = {t["name"]: t["score"] for t in results["tests"]}
    assert test["score"] <= share * test["max_score"] + 1e-9, scores
    task = f"{homework.upper()} {places[0][2]} "
    assert all(s == 0 for n, s in scores.items() if n.startswith(task) and n.endswith("every case of the task passes")), scores


def claimed_alone(group, cases):
    """A student's forgery: one real all_gather, and a second one claimed (counters and trace) that never
    ran, its trace event put on a group of this rank alone, where a collective moves nothing."""
    from minitorch_dist.runtime.observe.trace import Event
    x = torch.ones(250_000)
    group.all_gather(x)
    c = group.counters.by_op["all_gather"]
    c.calls, c.tensor_bytes = c.calls + 1, c.tensor_bytes + x.nbytes
    now = group.now()
    group.events.append(Event(group.rank, "all_gather", None, None, x.nbytes, now, now, f"group[{group.rank}]"))
    print("ATTACK-DONE: CLAIMED_ALONE", flush=True)
    return [{} for _ in cases]


def test_a_collective_claimed_on_a_one_rank_group_keeps_its_lower_bound(monkeypatch):
    """The lower bound used to leave out what the trace puts on one-rank groups, and the trace is the
    ranks' to write: this claim of a 1 MB all_gather that never ran agreed with the kernel. The grader
    now exempts only what its cases run on one-rank groups (run_batched lone=; none here). About 3 s."""
    from assignments.common import rank_runs
    from minitorch_dist.runtime.observe import kernel_traffic, run_meter
    if not kernel_traffic.available():
        pytest.skip("sock_diag (Linux) is needed to read the kernel's per-socket counts")
    monkeypatch.setenv(run_meter.VAR, "1")
    res = rank_runs.launch_for_tests(claimed_alone, 2, ([None],), collectives=True, trace=True)
    assert rank_runs.wire_problems(res, traced=True) is None              # the trace's word: it escapes
    case = type("Case", (), {"kind": "claim"})()
    def graded(**lone):
        return rank_runs.run_batched(claimed_alone, [case], 2, key=lambda c: c.kind, describe=lambda c, p: "claim",
                                     check_wire=True, collectives=True, trace=True, **lone)[0]
    got = graded()
    assert got[0] == "error" and all(f"rank {r}'s counters say" in got[1] for r in range(2)), got
    assert graded(lone=lambda c, p: [{"all_gather": (1, 10 ** 6)}] * p)[0] == "ok"    # declared: exempt, as before


def test_hsdp_verdict_takes_groups_from_the_case_and_the_trace_must_add_up():
    """hw6_hybrid_checks on made-up reports (no launch): a correct step of one shard group of 3 passes; a
    dense all-reduce traced as on the one-rank replica group, a collective left out of the trace, or one
    traced on a group no correct run makes (whatever the report says it holds) fails."""
    from assignments.hw6.tests.hw6_harness import Case, Outcome
    from assignments.hw6.tests.hw6_hybrid_checks import hybrid_comm_problems
    from assignments.hw6.tests.hw6_hybrid_groups import group_name, step_comm
    case, p = Case("hsdp", "adamw", "tied", shard_size=3, steps=1), 3

    def report(rank, extra=(), traced=True, lone_as=None):
        comm = {op: [0, 0] for op in ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "p2p")}
        events = []
        for (op, members), (calls, nbytes) in [*step_comm(case, rank, p).items(), *extra]:
            name = lone_as if lone_as and len(members) == 1 else group_name(members)
            events += [[op, 0.0, 0.0, nbytes // calls, name]] * calls
            comm[op] = [comm[op][0] + calls, comm[op][1] + nbytes]
        return {"steps": [{"comm": comm, "events": events if traced else events[:-1]}],
                "groups": {lone_as: [0]} if lone_as else {}}

    def first_problem(rank0):
        return hybrid_comm_problems(Outcome(case, p, "gloo", [rank0] + [report(r) for r in range(1, p)]))[0]

    assert hybrid_comm_problems(Outcome(case, p, "gloo", [report(r) for r in range(p)])) == []
    assert "group of one rank" in first_problem(report(0, [(("all_reduce", (0,)), [1, 4096])]))
    assert "in the trace" in first_problem(report(0, traced=False))
    assert "over ranks ['group[7]']" in first_problem(report(0, lone_as="group[7]"))

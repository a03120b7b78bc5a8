"""Homework 4's scripts assignments/hw4/bench_tp.py and bench_tp_torch.py, run as a student or instructor
runs them: against the reference (an overlay of solutions/) and against the stubs (an overlay of nothing:
the pristine kit), with a tiny model; bench_tp.py once under mpirun. The verdicts come from what the
scripts print, compared with minitorch_dist.cost_model's tensor-parallel formulas computed here (bench_tp)
and with the dense block (bench_tp_torch checks both versions against it and prints the difference).
"""

from __future__ import annotations

import os
import re
import sys

import pytest
import torch

from assignments.hw4.bench_tp_torch import heads_by_rank
from minitorch_dist import cost_model as cm
from tests.conftest import find_mpirun
from tests.kit.conftest import run_in

BENCH = os.path.join("assignments", "hw4", "bench_tp.py")
BENCH_TORCH = os.path.join("assignments", "hw4", "bench_tp_torch.py")
VOCAB, D, HEADS, LAYERS, BATCH, SEQ = 16, 16, 4, 1, 2, 8
TINY = ["--tp-sizes", "1,2,4", "--vocab", str(VOCAB), "--d-model", str(D), "--heads", str(HEADS),
        "--layers", str(LAYERS), "--batch", str(BATCH), "--seq", str(SEQ), "--bandwidth", "1e9", "--flop-rate", "1e8"]
ALPHA, BETA, RATE = 1e-5, 1e-9, 1e8
TINY_BLOCK = ["--d-model", str(D), "--heads", str(HEADS), "--batch", str(BATCH), "--seq", str(SEQ), "--warmup", "1"]
COUNTER_ROW = re.compile(r"^\s*(\d+) (forward|backward|step)\s+(\d+)\s+(\d+)\s+([\d,]+)\s+([\d,]+)\s+([\d,]+)\s+"
                         r"([\d,]+)\s+(\d+)\s+(\d+)\s+([0-9.]+)$", re.M)
PARAM_ROW = re.compile(r"^\s*(\d+)\s+([\d,]+)\s+([\d,]+)\s+([\d,]+)\s+([0-9.]+)\s+([0-9.]+)\s+(ok|NOT OK)", re.M)
SIM_ROW = re.compile(r"^\s*(\d+)" + r"\s+([0-9.]+)" * 6 + r"$", re.M)


def number(text: str) -> int:
    return int(text.replace(",", ""))


def check_counter_rows(out: str, sizes: list[int]) -> None:
    """Every counters row equals the formula, both the printed 'formula' column and ours."""
    rows = COUNTER_ROW.findall(out)
    assert [(int(r[0]), r[1]) for r in rows] == [(p, ph) for p in sizes for ph in ("forward", "backward", "step")], out
    for p, phase, calls, f_calls, payload, f_payload, sent, f_sent, msgs, f_msgs, ratio in rows:
        p = int(p)
        t = cm.tp_step_traffic(BATCH, SEQ, D, LAYERS, p)
        ring = cm.traffic("ring_all_reduce", p, 1.0)
        want_calls = {"forward": t.forward_all_reduces, "backward": t.backward_all_reduces,
                      "step": t.all_reduces}[phase]
        want_bytes = {"forward": t.forward_payload_bytes, "backward": t.backward_payload_bytes,
                      "step": t.payload_bytes}[phase]
        assert int(calls) == int(f_calls) == want_calls, (p, phase, out)
        assert number(payload) == number(f_payload) == want_bytes, (p, phase, out)
        assert number(sent) == number(f_sent) == round(want_bytes * ring.bytes), (p, phase, out)
        assert int(msgs) == int(f_msgs) == want_calls * ring.messages, (p, phase, out)
        assert float(ratio) == 1.0
    # by hand for this model: 2L + 4 = 6 forward, 2L + 1 = 3 backward; b s h e = 1024 B, b s e = 64 B
    assert ("2", "forward", "6", "6", "3,264") == rows[0][:5] and rows[1][2:5] == ("3", "3", "3,072")


def check_param_rows(out: str, sizes: list[int]) -> None:
    rows = PARAM_ROW.findall(out)
    assert [int(r[0]) for r in rows] == sizes, out
    for p, params, f_params, dense, loss, dense_loss, verdict in rows:
        assert number(params) == number(f_params) == cm.tp_parameters_per_rank(VOCAB, D, LAYERS, SEQ, int(p))
        assert number(dense) == cm.tp_parameters_per_rank(VOCAB, D, LAYERS, SEQ, 1)
        assert verdict == "ok" and abs(float(loss) - float(dense_loss)) <= 2e-5


def check_sim_rows(out: str) -> None:
    rows = SIM_ROW.findall(out)
    assert [int(r[0]) for r in rows] == [1, 2, 4], out
    base = cm.tp_step_time(BATCH, SEQ, D, VOCAB, LAYERS, 1, ALPHA, BETA, RATE).total
    for p, compute, comm, total, sim, ratio, speedup in rows:
        t = cm.tp_step_time(BATCH, SEQ, D, VOCAB, LAYERS, int(p), ALPHA, BETA, RATE)
        assert float(compute) == pytest.approx(t.compute * 1e3, abs=1e-4)
        assert float(comm) == pytest.approx(t.comm * 1e3, abs=1e-4)
        assert float(total) == pytest.approx(t.total * 1e3, abs=1e-4) == pytest.approx(float(sim), abs=1e-4)
        assert float(ratio) == 1.0 and float(speedup) == pytest.approx(base / t.total, abs=0.01)
    best = min((1, 2, 4), key=lambda p: cm.tp_step_time(BATCH, SEQ, D, VOCAB, LAYERS, p, ALPHA, BETA, RATE).total)
    assert re.search(rf"^fastest: TP={best} ", out, re.M), out


@pytest.mark.slow
def test_bench_tp_on_the_reference_prints_the_formulas_numbers(reference):
    code, out = run_in(reference, sys.executable, BENCH, "--world-sizes", "2,4", *TINY)
    assert code == 0, out[-3000:]
    assert "Counters of one training step on gloo" in out and "link 1 GB/s (beta 1e-09 s/B)" in out, out
    check_counter_rows(out, [2, 4])
    check_param_rows(out, [2, 4])
    check_sim_rows(out)
    assert "counters equal the formula: yes; sim step time equals the formula: yes" in out, out


@pytest.mark.slow
def test_bench_tp_on_the_stubs_names_the_task_in_one_line(stubs):
    code, out = run_in(stubs, sys.executable, BENCH, "--world-sizes", "2", *TINY)
    assert code == 1, out[-3000:]
    lines = [line for line in out.splitlines() if "not implemented" in line]
    assert len(lines) == 1, out[-3000:]
    assert re.match(r"bench_tp: not implemented yet: HW4 task 4\.\d: .* -> fill in task 4\.\d in "
                    r"minitorch_dist/tensor_parallel/\w+\.py, then run again$", lines[0]), lines[0]
    assert "Traceback" not in out and "Counters of one" not in out, out[-3000:]


@pytest.mark.slow
def test_bench_tp_rejects_a_tp_size_that_does_not_divide_the_model(reference):
    code, out = run_in(reference, sys.executable, BENCH, "--world-sizes", "3", *TINY)
    assert code == 2 and "TP size 3 must divide --vocab 16, --d-model 16, --heads 4" in out, out[-3000:]


# -- bench_tp_torch.py: against torch's tensor parallel ------------------------------------------------

@pytest.mark.slow
def test_bench_tp_torch_on_the_reference_times_both_and_checks_them_against_the_dense_block(reference):
    code, out = run_in(reference, sys.executable, BENCH_TORCH, "--world-sizes", "2,4", "--steps", "3", *TINY_BLOCK)
    assert code == 0, out[-3000:]
    for p in (2, 4):
        assert f"gloo, {p} ranks: Block C={D} heads={HEADS}, activations {BATCH} x {SEQ} x {D}" in out, out
    rows = re.findall(r"^\s*(ParallelBlock 4\.3|torch TP)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)$", out, re.M)
    assert [r[0] for r in rows] == ["ParallelBlock 4.3", "torch TP"] * 2, out
    assert all(float(best) <= float(median) for _, median, best, _ in rows) and rows[1][3] == rows[3][3] == "1.00"
    spreads = re.findall(r"ParallelBlock 4\.3 / torch TP per step: ([0-9.]+)x \(quartiles .*, 3 pairs\)", out)
    assert spreads == [r[3] for r in rows[::2]], out           # the table's ratio is the pairs' median
    checks = re.findall(r"^\s*(ParallelBlock 4\.3|torch TP): max \|output, input and layer-norm gradients - "
                        r"the dense block's\| = ([0-9.e+-]+): (ok|NOT OK.*)$", out, re.M)
    assert len(checks) == 4 and all(verdict == "ok" and float(d) <= 1e-4 for _, d, verdict in checks), out
    assert re.search(r"^ParallelBlock vs torch's tensor parallel \(no target\): p=2: [0-9.]+x, p=4: [0-9.]+x$",
                     out, re.M), out


@pytest.mark.slow
def test_bench_tp_torch_on_the_stubs_names_the_task_in_one_line(stubs):
    code, out = run_in(stubs, sys.executable, BENCH_TORCH, "--world-sizes", "2", "--steps", "1", *TINY_BLOCK)
    assert code == 1, out[-3000:]
    assert re.fullmatch(r"bench_tp_torch: HW4 task 4\.\d: .* not implemented yet .*: nothing to measure yet\n",
                        out), out


def test_torch_tp_qkv_rows_hold_each_ranks_heads_as_column_parallel_parts_do():
    """heads_by_rank's block r is [q_r; k_r; v_r], the rows ColumnParallelLinear(parts=3) keeps on rank r."""
    rows = torch.arange(12.0)                                   # q = 0..3, k = 4..7, v = 8..11
    assert heads_by_rank(rows, 2).tolist() == [0, 1, 4, 5, 8, 9, 2, 3, 6, 7, 10, 11]
    weight = torch.arange(24.0).view(12, 2)
    assert torch.equal(heads_by_rank(weight, 2)[:6], weight[[0, 1, 4, 5, 8, 9]])


# -- under mpirun ----------------------------------------------------------------------------------

@pytest.mark.mpi
@pytest.mark.skipif(find_mpirun() is None, reason="no mpirun next to this Python or on PATH")
@pytest.mark.slow
def test_bench_tp_under_mpirun(reference):
    pytest.importorskip("mpi4py")
    code, out = run_in(reference, find_mpirun(), "-n", "2", sys.executable, BENCH, *TINY)
    assert code == 0, out[-3000:]
    assert out.count("Counters of one training step on mpi") == 1, "only rank 0 prints"
    check_counter_rows(out, [2])
    check_param_rows(out, [2])
    check_sim_rows(out)

"""Homework 5's scripts, run as a student or instructor runs them, against the reference (an overlay of
solutions/) and against the stubs, with tiny settings: bench_pipeline.py (gradients equal to
torch.distributed.pipelining's, a ratio per schedule, the sim step times against (m + p - 1)(t_f + t_b)
computed here, and interleaved 1F1B's against (m v + p - 1)(t_f + t_b)/v) and train_pipeline.py (on gloo and under mpirun: parameters equal to one process's,
2(p-1)m messages per step).
"""

from __future__ import annotations

import os
import re
import sys

import pytest

from tests.conftest import find_mpirun
from tests.kit.conftest import run_in

BENCH = os.path.join("assignments", "hw5", "bench_pipeline.py")
TRAIN = os.path.join("assignments", "hw5", "train_pipeline.py")
TINY = ["--world-sizes", "2", "--width", "16", "--depth", "3", "--batch", "8", "--microbatches", "4",
        "--steps", "2", "--sim-stages", "1,2,4", "--sim-microbatches", "4,8"]
GLOO_ROW = re.compile(r"^\s*(\d+)\s+(gpipe|1f1b)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.e+-]+)$", re.M)
INTERLEAVED_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)$", re.M)
SIM_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)$", re.M)


@pytest.mark.slow
def test_bench_pipeline_on_the_reference(reference):
    code, out = run_in(reference, sys.executable, BENCH, *TINY, timeout=300)
    assert code == 0, out[-3000:]
    rows = GLOO_ROW.findall(out)
    assert [(int(r[0]), r[1]) for r in rows] == [(2, "gpipe"), (2, "1f1b")], out
    for _p, _name, ours, theirs, ratio, diff in rows:
        assert float(diff) <= 1e-5 and float(ours) > 0 and float(theirs) > 0, out
        assert float(ratio) == pytest.approx(float(ours) / float(theirs), abs=0.01)
    sim = SIM_ROW.findall(out)
    assert [(int(r[0]), int(r[1])) for r in sim] == [(p, m) for p in (1, 2, 4) for m in (4, 8)], out
    for p, m, took, formula, bubble, bubble_formula in sim:
        p, m = int(p), int(m)
        assert float(took) == float(formula) == pytest.approx((m + p - 1) * 3.0, abs=1e-3), out
        assert float(bubble) == float(bubble_formula) == pytest.approx((p - 1) / (m + p - 1), abs=1e-4), out
    rows = INTERLEAVED_ROW.findall(out)
    assert [(int(r[0]), int(r[1])) for r in rows] == [(2, 2), (2, 4), (4, 4), (4, 8)], out
    for p, m, took, formula, bubble, bubble_formula, one_f_one_b in rows:
        p, m = int(p), int(m)
        assert float(took) == float(formula) == pytest.approx((2 * m + p - 1) * 1.5, abs=1e-3), out
        assert float(bubble) == float(bubble_formula) == pytest.approx((p - 1) / (2 * m + p - 1), abs=1e-4), out
        assert float(one_f_one_b) == pytest.approx((p - 1) / (m + p - 1), abs=1e-4), out
    assert "sim step times equal (m+p-1)(t_f+t_b) (interleaved: (mv+p-1)(t_f+t_b)/v): yes" in out and "ours / torch step time: worst" in out, out


@pytest.mark.slow
def test_bench_pipeline_on_the_stubs_names_the_task_in_one_line(stubs):
    code, out = run_in(stubs, sys.executable, BENCH, *TINY, timeout=300)
    assert code == 1, out[-3000:]
    lines = [line for line in out.splitlines() if "not implemented" in line]
    assert len(lines) == 1, out[-3000:]
    assert re.match(r"bench_pipeline: not implemented yet: HW5 task 5\.\d: .* -> fill in task 5\.\d in "
                    r"minitorch_dist/pipeline/\w+\.py, then run again$", lines[0]), lines[0]
    assert "Traceback" not in out, out[-3000:]


def check_training(out: str, schedule: str, p: int, m: int) -> None:
    assert re.search(rf"^{schedule}.*, {p} stages, m = {m}: loss ([0-9.]+) -> ([0-9.]+) in 3 steps$", out, re.M), out
    diff = float(re.search(r"largest \|parameter - one process's\| after training: ([0-9.e+-]+)", out).group(1))
    assert diff < 1e-12, out
    assert f"messages per step: {2 * (p - 1) * m} (2(p-1)m = {2 * (p - 1) * m})" in out, out
    assert "pipeline equals one process: yes" in out, out


@pytest.mark.parametrize("schedule", ["1f1b", "sched_gpipe"])
@pytest.mark.slow
def test_train_pipeline_on_the_reference(reference, schedule):
    code, out = run_in(reference, sys.executable, TRAIN, "-n", "3", "--schedule", schedule, "--checkpoint",
                       "--steps", "3", "--batch", "8", "--microbatches", "4", timeout=300)
    assert code == 0, out[-3000:]
    check_training(out, schedule, 3, 4)


@pytest.mark.slow
def test_train_pipeline_on_the_stubs_names_the_task(stubs):
    code, out = run_in(stubs, sys.executable, TRAIN, "-n", "2", "--steps", "1", timeout=300)
    assert code == 1 and "Traceback" not in out, out[-3000:]
    assert re.search(r"^--schedule 1f1b: not implemented yet: HW5 task 5\.\d: .* -> fill in task 5\.\d in "
                     r"minitorch_dist/pipeline/\w+\.py, then run again$", out, re.M), out[-3000:]


@pytest.mark.mpi
@pytest.mark.skipif(find_mpirun() is None, reason="no mpirun next to this Python or on PATH")
@pytest.mark.slow
def test_train_pipeline_under_mpirun(reference):
    pytest.importorskip("mpi4py")
    code, out = run_in(reference, find_mpirun(), "-n", "2", sys.executable, TRAIN, "--schedule", "gpipe",
                       "--steps", "3", "--batch", "8", "--microbatches", "4", timeout=300)
    assert code == 0, out[-3000:]
    assert out.count("pipeline equals one process") == 1, "only rank 0 prints the verdict"
    check_training(out, "gpipe", 2, 4)

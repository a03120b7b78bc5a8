"""Homework 5's script assignments/hw5/bench_pipeline.py, run as a student or instructor runs it:
against the reference (an overlay of solutions/) and against the stubs, with a tiny model. The
verdicts come from what it prints: gradients equal to torch.distributed.pipelining's, a ratio per
schedule, and the sim step times against (m + p - 1)(t_f + t_b) computed here.
"""

from __future__ import annotations

import os
import re
import sys

import pytest

from tests.kit.conftest import run_in

BENCH = os.path.join("assignments", "hw5", "bench_pipeline.py")
TINY = ["--world-sizes", "2", "--width", "16", "--depth", "3", "--batch", "8", "--microbatches", "4",
        "--steps", "2", "--sim-stages", "1,2,4", "--sim-microbatches", "4,8"]
GLOO_ROW = re.compile(r"^\s*(\d+)\s+(gpipe|1f1b)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.e+-]+)$", re.M)
SIM_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)$", re.M)


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
    assert "sim step times equal (m+p-1)(t_f+t_b): yes" in out and "ours / torch step time: worst" in out, out


def test_bench_pipeline_on_the_stubs_names_the_task_in_one_line(stubs):
    code, out = run_in(stubs, sys.executable, BENCH, *TINY, timeout=300)
    assert code == 1, out[-3000:]
    lines = [line for line in out.splitlines() if "not implemented" in line]
    assert len(lines) == 1, out[-3000:]
    assert re.match(r"bench_pipeline: not implemented yet: HW5 task 5\.\d: .* -> fill in task 5\.\d in "
                    r"minitorch_dist/pipeline/\w+\.py, then run again$", lines[0]), lines[0]
    assert "Traceback" not in out, out[-3000:]

"""Homework 3's benchmark assignments/hw3/bench_powersgd.py, run as an instructor runs it (against the
reference) with a tiny model: the bytes it reports per compressed step are the formula's, computed
here from the model's shapes, our parameters end equal to torch's DDP + powerSGD_hook's, and the sim
line shows compression winning on a 1 Gbit/s link. Against the stubs it says, in one line, which
task is not implemented yet.
"""

from __future__ import annotations

import re
import sys

import pytest

from minitorch_dist.models import MLP
from tests.kit.conftest import run_in

BENCH = "assignments/hw3/bench_powersgd.py"
TINY = ["--world-sizes", "2", "--steps", "3", "--warmup", "2", "--d-in", "64", "--d-hidden", "96", "--depth", "2",
        "--d-out", "8", "--rank", "2"]
ROW = re.compile(r"^\s*2\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+(\d+)\s+(yes|NO)\s+([0-9.e+-]+)$", re.M)


def formula_bytes(rank: int = 2) -> int:
    total = 0
    for p in MLP(64, 96, 8, 2).parameters():
        n, m = p.shape[0], p[0].numel() if p.dim() > 1 else 1
        r = min(n, m, rank)
        total += (n + m) * r if (n + m) * r * 2 < n * m else n * m
    return 4 * total


@pytest.mark.slow
def test_bench_powersgd_on_the_reference(reference):
    code, out = run_in(reference, sys.executable, BENCH, *TINY, timeout=300)
    assert code == 0, out[-3000:]
    rows = ROW.findall(out)
    assert len(rows) == 1, out
    ours, theirs, ratio, sent, ok, diff = rows[0]
    assert int(sent) == formula_bytes() and ok == "yes", out
    assert float(diff) <= 1e-4, out                 # the same steps as torch's hook
    sim = re.search(r"takes ([0-9.]+) ms uncompressed, ([0-9.]+) ms with PowerSGD", out)
    assert sim and float(sim.group(1)) > float(sim.group(2)), out


@pytest.mark.slow
def test_bench_powersgd_on_the_stubs_names_the_task(stubs):
    code, out = run_in(stubs, sys.executable, BENCH, *TINY, timeout=300)
    assert code != 0 and "is not implemented yet" in out and "nothing to measure yet" in out, out[-3000:]
    assert "Traceback" not in out, out[-3000:]

"""Homework 6's benchmark, run as a student or instructor runs it: assignments/hw6/bench_fsdp.py
against the reference (an overlay of solutions/) and the stubs, tiny settings, 2 ranks. The verdicts
come from what the script prints.
"""

from __future__ import annotations

import os
import re
import sys

import pytest

from tests.kit.conftest import run_in

BENCH = os.path.join("assignments", "hw6", "bench_fsdp.py")
TINY = ["--world-sizes", "2", "--steps", "1", "--warmup", "1", "--d-model", "16", "--layers", "2", "--seq", "8",
        "--batch", "4", "--vocab", "16"]
ROW = r"^\s*2\s+{label}\s+([0-9.]+)\s+([0-9.na]+)\s+([0-9.]+)\s+([0-9.na]+)\s*$"


@pytest.mark.slow
def test_bench_fsdp_on_the_reference_compares_with_torch_fsdp2_and_zero(reference):
    code, out = run_in(reference, sys.executable, BENCH, *TINY, timeout=300)
    assert code == 0, out[-3000:]
    rows = {}
    for label in ("FSDP 6.3 (prefetch)", "torch FSDP2", "ZeRO-1 6.1", "torch ZeRO-1"):
        row = re.search(ROW.format(label=re.escape(label)), out, re.M)
        assert row, f"no row for {label!r}:\n{out[-3000:]}"
        rows[label] = [float(v) for v in row.groups()]
    assert rows["torch FSDP2"][1] == 1.0 and rows["torch ZeRO-1"][3] == 1.0
    assert all(r[0] > 0 and r[2] > 0 for r in rows.values())
    # same units, same shards: the reference FSDP holds no more parameters + grads + state than FSDP2
    assert rows["FSDP 6.3 (prefetch)"][3] <= 1.0, out
    # the reference ZeRO-1 keeps no copy of its shard (a view of the flat parameters): no more than torch's
    assert rows["ZeRO-1 6.1"][3] <= 1.0, out
    assert re.search(r"^targets \(time <= 1\.3x, memory <= torch's\): (all met|missed by .+)$", out, re.M), out


@pytest.mark.slow
def test_bench_fsdp_on_the_stubs_skips_what_is_not_written(stubs):
    code, out = run_in(stubs, sys.executable, BENCH, *TINY, timeout=300)
    assert code == 0, out[-3000:]
    assert re.search(r"FSDP 6\.3 \(prefetch\): not run \(HW6 task 6\.3: .*not implemented", out), out[-3000:]
    assert re.search(r"ZeRO-1 6\.1: not run \(HW6 task 6\.1: .*not implemented", out), out[-3000:]
    assert re.search(ROW.format(label="torch FSDP2"), out, re.M), out[-3000:]

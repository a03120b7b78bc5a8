"""benchmarks/tmp_bench.py: what creating a file costs in the temporary folder and on tmpfs (why .ci/run
gives its run a /tmp in memory), tiny."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

from tools.overlay import ROOT

_spec = importlib.util.spec_from_file_location("tmp_bench", os.path.join(ROOT, "benchmarks", "tmp_bench.py"))
tmp_bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tmp_bench)


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm here")
def test_describe_names_the_filesystem():
    assert tmp_bench.describe("/dev/shm") == "tmpfs"
    assert tmp_bench.describe(ROOT) not in ("", "unknown filesystem")


def test_tmp_bench_prints_both_folders_before_and_after_churn():
    out = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "tmp_bench.py"), "--files", "200",
                          "--churn", "1"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [line for line in out.stdout.splitlines() if "after 1 rounds of create and remove" in line]
    assert len(rows) == (2 if os.access("/dev/shm", os.W_OK) else 1), out.stdout
    assert all(line.count(" s (CPU ") == 2 for line in rows), out.stdout

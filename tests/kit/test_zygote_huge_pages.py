"""autograder.zygote.huge_pages: the zygote's heap in transparent huge pages, so that the forks a grading
makes of it (jobs, rank hosts, ranks) copy a page table a few hundred times smaller
(benchmarks/fork_bench.py prints what a fork costs either way)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from autograder import zygote_mother
from autograder.runner import ZygoteRunner
from tools.overlay import ROOT

COLLAPSE_PROBE = """
import ctypes, mmap
libc = ctypes.CDLL(None, use_errno=True)
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
m = mmap.mmap(-1, 8 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
m.write(b"x" * (8 << 20))
base = ctypes.addressof(ctypes.c_char.from_buffer(m))
start = (base + (2 << 20) - 1) & ~((2 << 20) - 1)
libc.madvise(start, 2 << 20, 14)
print(libc.madvise(start, 2 << 20, 25), ctypes.get_errno())
"""


def _collapse_works() -> tuple[bool, str]:
    out = subprocess.run([sys.executable, "-c", COLLAPSE_PROBE], capture_output=True, text=True, timeout=60)
    code, errno = (int(x) for x in out.stdout.split())
    if code == 0:
        return True, ""
    return False, (f"this kernel cannot collapse memory into huge pages (madvise MADV_COLLAPSE: errno {errno}; "
                   f"Linux 6.1+ with /sys/kernel/mm/transparent_hugepage/enabled not 'never')")


WORKS, WHY_NOT = _collapse_works()
needs_collapse = pytest.mark.skipif(not WORKS, reason=WHY_NOT)

HEAP = """
import hashlib, json, sys
sys.path.insert(0, sys.argv[1])
from autograder.zygote import huge_pages
heap = bytearray(range(256)) * (48 << 12)                  # 48 MiB of known bytes on the heap
before = hashlib.sha256(heap).hexdigest()
collapsed = huge_pages()
with open("/proc/self/smaps_rollup") as f:
    huge = next(int(l.split()[1]) for l in f if l.startswith("AnonHugePages:"))
print(json.dumps({"collapsed": collapsed, "huge_kib": huge, "same": hashlib.sha256(heap).hexdigest() == before}))
"""


@needs_collapse
def test_huge_pages_collapses_the_heap_and_keeps_every_byte():
    out = subprocess.run([sys.executable, "-c", HEAP, ROOT], capture_output=True, text=True, timeout=120)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["same"], "the heap's bytes changed"
    assert got["collapsed"] >= 32 << 20 and got["huge_kib"] >= 32 << 10, got


PROBE = """import json
def test_probe():
    with open("/proc/self/smaps_rollup") as f:
        huge = next(int(l.split()[1]) for l in f if l.startswith("AnonHugePages:"))
    print("PROBE" + json.dumps({"huge_kib": huge}))
"""


def _anon_huge_kib(pid: int) -> int:
    with open(f"/proc/{pid}/smaps_rollup") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("AnonHugePages:"))


@needs_collapse
@pytest.mark.parametrize("mother", [True, False], ids=["forked-zygote", "fresh-zygote"])
def test_a_zygote_and_the_test_processes_it_forks_hold_its_heap_in_huge_pages(tmp_path, monkeypatch, mother):
    """The zygote collapses its heap once warm (forked from the mother or started fresh), and a job's
    test process, a fork of it, maps the same huge pages: tens of MiB of torch's and pytest's heap."""
    if not mother:
        monkeypatch.setenv("AUTOGRADER_NO_MOTHER", "1")
    zygote_mother.close_all()
    test = tmp_path / "test_probe.py"
    test.write_text(PROBE)
    out = tmp_path / "probe.out"
    runner = ZygoteRunner(ROOT, dict(os.environ, PYTHONPATH=ROOT))
    try:
        assert _anon_huge_kib(runner.proc.pid) >= 32 << 10
        if mother:       # settled before the zygote was forked: the zygote re-collapses only what it wrote
            mothers = [_anon_huge_kib(pid) for pid in zygote_mother.pids()]
            assert mothers and all(kib >= 32 << 10 for kib in mothers), f"the mothers' huge pages: {mothers} KiB"
        reply = runner.run(["-q", "-s", "-p", "no:cacheprovider", str(test)], {}, str(out), limit=120)
        text = out.read_text()
        assert reply["status"] == "exited" and reply["code"] == 0, text[-3000:]
        assert json.loads(text.split("PROBE", 1)[1].splitlines()[0])["huge_kib"] >= 32 << 10
    finally:
        runner.close()
        zygote_mother.close_all()


def test_fork_bench_prints_both_times_and_their_ratio():
    """benchmarks/fork_bench.py, tiny: one process, five forks each way."""
    out = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "fork_bench.py"), "--repeats", "1",
                          "--forks", "5"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [line for line in out.stdout.splitlines() if "4 KiB pages" in line and "collapsed" in line]
    assert len(rows) == 1 and "huge over 4 KiB pages: median" in out.stdout, out.stdout
    collapsed = float(rows[0].split("collapsed")[1].split("MiB")[0])
    assert (collapsed > 0) == WORKS, out.stdout
    assert WORKS or "collapsed nothing" in out.stdout


def test_fork_bench_times_the_zygotes_settle_under_both_mothers():
    """benchmarks/fork_bench.py --zygotes, tiny: one mother of each kind, two zygotes each."""
    out = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "fork_bench.py"), "--repeats", "1",
                          "--zygotes", "2"], capture_output=True, text=True, timeout=180, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = {line.split(":")[0].split()[1]: line.split(":")[1].split() for line in out.stdout.splitlines()
            if line.strip().startswith("mother ")}
    assert sorted(rows) == ["settled", "unsettled"] and all(len(v) == 2 for v in rows.values()), out.stdout
    assert "median settle():" in out.stdout and "under an unsettled one" in out.stdout, out.stdout

"""Part 1 of benchmarks/runtime_bench.py: cold start of 4 gloo ranks, launch() against torch's own
starts (start_processes with "fork" and "spawn"), optionally through a rank host as a grading
launches, then warm dispatch (see runtime_bench's docstring for what is timed and the targets).

    .venv/bin/python benchmarks/runtime_bench.py --cold-only [--runs N] [--host]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from minitorch_dist import launch, shutdown  # noqa: E402
from minitorch_dist.bench_timing import Spread, load_line, paired_ratios, rotated  # noqa: E402

COLD_OURS = """
import time, torch
from minitorch_dist import launch
def noop(group):
    return group.rank
t = time.perf_counter(); launch(noop, 4); print(time.perf_counter() - t)
"""

# torch's start: the ranks join a gloo process group, barrier, and tell the parent; the clock stops
# when all four have told it (as launch() returns when all four have answered), before they exit.
COLD_TORCH = """
import os, time, datetime, socket, torch
import torch.distributed as dist
import torch.multiprocessing as mp
def rank_main(rank, port, ready):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=4)
    dist.barrier()
    ready.put(rank)
    dist.barrier()
    dist.destroy_process_group()
if __name__ == "__main__":
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    ready = mp.get_context("METHOD").SimpleQueue()
    t = time.perf_counter()
    ctx = mp.start_processes(rank_main, args=(port, ready), nprocs=4, join=False, start_method="METHOD")
    for _ in range(4):
        ready.get()
    took = time.perf_counter() - t
    while not ctx.join():
        pass
    print(took)
"""
# as a grading launches: the ranks are forked by a rank host (started first, as the grader does)
COLD_HOST = """
import os, signal, socket, tempfile, time, torch
from minitorch_dist import launch
from minitorch_dist.runtime.launching.host import serve
path = os.path.join(tempfile.mkdtemp(), "host.sock")
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); server.bind(path); server.listen(64)
host = os.fork()
if host == 0:
    serve(server)
server.close()
os.environ["MINITORCH_DIST_RANK_HOST"] = path
time.sleep(0.3)
def noop(group):
    return group.rank
try:
    t = time.perf_counter(); launch(noop, 4); print(time.perf_counter() - t)
finally:
    os.kill(host, signal.SIGKILL)
"""
COLD = {"launch": COLD_OURS, "fork": COLD_TORCH.replace("METHOD", "fork"),
        "spawn": COLD_TORCH.replace("METHOD", "spawn"), "host": COLD_HOST}
COLD_LABELS = {"launch": "launch()", "fork": "torch start_processes(fork)", "spawn": "torch start_processes(spawn)",
               "host": "launch() via a rank host"}


def _time_script(code: str) -> float:
    """Run `code` as a script in a new interpreter (spawn must re-import it); return what it prints."""
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(code)
    try:
        out = subprocess.run([sys.executable, f.name], capture_output=True, text=True, cwd=ROOT, timeout=300,
                             env=dict(os.environ, PYTHONPATH=ROOT))
    finally:
        os.unlink(f.name)
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    return float(out.stdout.strip().splitlines()[-1])


def cold_starts(runs: int, starts=("launch", "fork", "spawn")) -> dict[str, list[float]]:
    """{start: [seconds per run]}: the starts take turns, run by run, each in a fresh interpreter."""
    times = {name: [] for name in starts}
    for run in range(runs):
        for name in rotated(list(starts), run):
            times[name].append(_time_script(COLD[name]))
    return times


def cold_start_lines(times: dict[str, list[float]]) -> list[str]:
    """The cold-start lines: each start's median and runs, launch's paired ratios and the targets."""
    lines = [f"cold start, 4 gloo ranks, {len(times['launch'])} runs each, taking turns; timed: the call until all "
             f"4 ranks answer, in a fresh interpreter that imported torch; {load_line()}"]
    for name, runs in times.items():
        lines.append(f"  {COLD_LABELS[name]:<30} median {statistics.median(runs):7.3f} s  "
                     f"runs {[round(x, 3) for x in runs]}")
    for name, target in (("fork", "<= 1.0x: no slower than torch's fork start"), ("spawn", "<= 0.25x: 4x faster")):
        if name in times:
            spread = Spread.of(paired_ratios(times["launch"], times[name]))
            verdict = "met" if spread.median <= (1.0 if name == "fork" else 0.25) else "NOT met"
            lines.append(f"  -> launch / {COLD_LABELS[name]}: {spread} (target {target}) -> {verdict}")
    if "host" in times and "fork" in times:
        lines.append(f"  -> {COLD_LABELS['host']} / {COLD_LABELS['fork']}: "
                     f"{Spread.of(paired_ratios(times['host'], times['fork']))} (no target)")
    return lines


def bench_start(runs: int, skip_spawn: bool, host: bool = False, warm: bool = True) -> None:
    starts = ("launch", "fork") + (() if skip_spawn else ("spawn",)) + (("host",) if host else ())
    print("\n".join(cold_start_lines(cold_starts(runs, starts))))
    if not warm:
        return

    def noop(group):
        return group.rank
    launch(noop, 4)
    warm = []
    for _ in range(30):
        t = time.perf_counter()
        launch(noop, 4)
        warm.append(time.perf_counter() - t)
    print(f"warm dispatch to 4 ranks:                    median {statistics.median(warm) * 1e3:7.2f} ms "
          f"(target < 50 ms)")
    shutdown()

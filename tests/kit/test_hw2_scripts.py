"""Homework 2's scripts, run as a student or instructor runs them: assignments/hw2/bench_ddp.py
and assignments/hw2/train.py against the reference (an overlay of solutions/) and against the
stubs (an overlay of nothing: the pristine kit), with tiny settings, 2 ranks; one train.py run
under mpirun. The verdicts come from what the scripts print.
"""

from __future__ import annotations

import os
import re
import sys

import pytest

from tests.conftest import find_mpirun
from tests.kit.conftest import run_in

BENCH = os.path.join("assignments", "hw2", "bench_ddp.py")
TRAIN = os.path.join("assignments", "hw2", "train.py")
TINY_BENCH = ["--world-sizes", "2", "--steps", "2", "--warmup", "1", "--d-in", "16", "--d-hidden", "64",
              "--depth", "2", "--d-out", "4", "--batch", "8", "--bucket-mb", "0.01"]
TASKS = {"ps": "2.1", "allreduce": "2.2", "overlap": "2.3", "bucketed": "2.4", "dpsgd": "2.5", "sgp": "2.6"}
SYNCHRONOUS = ("ps", "allreduce", "overlap", "bucketed")


def eval_losses(out: str) -> tuple[float, float]:
    found = re.search(r"eval loss, mean over ranks: ([0-9.]+) -> ([0-9.]+)", out)
    assert found, f"no eval loss line in the output:\n{out[-3000:]}"
    return float(found.group(1)), float(found.group(2))


# -- bench_ddp.py --------------------------------------------------------------------------------
@pytest.mark.slow
def test_bench_ddp_on_the_reference_prints_every_version_against_torch_ddp(reference):
    code, out = run_in(reference, sys.executable, BENCH, *TINY_BENCH, timeout=120)
    assert code == 0, out[-3000:]
    for label in ("local (no comm)", "AllReduceDDP 2.2", "OverlapDDP 2.3", "BucketedDDP 2.4", "torch DDP",
                  "torch DDP, again"):
        row = re.search(rf"^\s*{re.escape(label)}\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s*$", out, re.M)
        assert row, f"no timing row for {label!r}:\n{out[-3000:]}"
        assert float(row.group(1)) > 0 and float(row.group(3)) > 0
    assert re.search(r"torch DDP\s+[0-9.]+\s+[0-9.]+\s+1\.00\s*$", out, re.M), "torch DDP's own ratio is 1.00"
    assert out.count(": ok") == 4 and "NOT OK" not in out, f"parameters must end equal to torch DDP's:\n{out}"
    assert re.search(r"torch DDP, again: max \|param - torch DDP's\| after \d+ steps = 0\.0e\+00: ok", out), out
    assert re.search(r"^torch DDP against itself \(a second instance; .*\): p=2: [0-9.]+x$", out, re.M), out
    assert re.search(r"BucketedDDP [0-9]+ buckets, torch DDP [0-9]+: the same", out), out[-3000:]
    assert re.search(r"BucketedDDP vs torch DDP at its best, gradient_as_bucket_view=True \(target <= 1\.00x on gloo\): "
                     r"p=2: [0-9.]+x -> (met|NOT met)", out), out[-3000:]


def _plans_against_torch_ddp(group, shapes, caps_kb):
    """Rank code (1 gloo rank): [(plan_buckets's buckets, torch DDP's rebuilt ones)] per cap."""
    import torch
    import torch.nn.functional as F

    from assignments.hw2.bench_ddp import ddp_buckets
    from minitorch_dist.data_parallel import plan_buckets
    from minitorch_dist.models import MLP
    from minitorch_dist.runtime.torch_group import torch_default_group
    out = []
    with torch_default_group(group):
        for (d_in, d_hidden, d_out, depth), kb in [(s, c) for s in shapes for c in caps_kb]:
            model = MLP(d_in, d_hidden, d_out, depth, seed=0)
            ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=kb / 1024, gradient_as_bucket_view=True)
            for _ in range(3):               # DDP rebuilds its buckets after the first step (logged at the third)
                F.cross_entropy(ddp(torch.randn(4, d_in)), torch.randint(0, d_out, (4,))).backward()
            out.append((plan_buckets(list(model.parameters()), int(kb * 1024)), ddp_buckets(ddp)))
            del ddp
    return out


def test_plan_buckets_makes_the_buckets_torch_ddp_makes():
    """plan_buckets follows torch DDP's rule (a bucket closes once it holds at least the size): on
    MLPs whose gradients arrive in reverse registration order, with sizes up to 1 MB (torch's first
    bucket closes at min(1 MB, size)), its buckets are the ones DDP rebuilt, read from DDP itself."""
    from minitorch_dist import launch
    shapes = [(16, 64, 4, 2), (37, 129, 5, 3), (256, 1024, 16, 3)]
    caps_kb = [0.1, 1, 4, 16, 300, 1024]
    pairs = launch(_plans_against_torch_ddp, 1, args=(shapes, caps_kb))[0]
    assert len(pairs) == len(shapes) * len(caps_kb)
    for (shape, kb), (ours, torchs) in zip([(s, c) for s in shapes for c in caps_kb], pairs):
        assert ours == torchs, f"MLP{shape}, {kb} KB buckets: plan_buckets {ours}, torch DDP {torchs}"
    assert len({len(ours) for ours, _ in pairs}) >= 4, "the cases must give different bucket counts"


def test_plan_buckets_on_the_bench_model():
    """The bench's MLP at 2 MB: 3 buckets, the ones torch DDP makes (its first closes at 1 MB, and
    here the first holds a 4 MB weight); a small bias never gets a bucket of its own."""
    from minitorch_dist.data_parallel import plan_buckets
    from minitorch_dist.models import MLP
    params = list(MLP(256, 1024, 16, 3, seed=0).parameters())
    assert plan_buckets(params, 2 << 20) == [[7, 6, 5, 4], [3, 2], [1, 0]]
    assert plan_buckets(params, 64 << 20) == [[7, 6, 5, 4, 3, 2, 1, 0]]
    assert plan_buckets(params, 1) == [[i] for i in range(7, -1, -1)]


@pytest.mark.slow
def test_bench_ddp_on_the_stubs_skips_the_versions_to_implement(stubs):
    code, out = run_in(stubs, sys.executable, BENCH, *TINY_BENCH, timeout=120)
    assert code == 0, out[-3000:]
    for label, task in (("AllReduceDDP 2.2", "2.2"), ("OverlapDDP 2.3", "2.3"), ("BucketedDDP 2.4", "2.4")):
        assert re.search(rf"{re.escape(label)}\s+skipped: HW2 task {task}: .*not implemented", out), out[-3000:]
    assert re.search(r"torch DDP\s+[0-9.]+\s+[0-9.]+\s+1\.00", out), "torch DDP still runs on the stubs"
    assert "BucketedDDP vs torch DDP" not in out


# -- train.py ------------------------------------------------------------------------------------
# One Python process runs train.main() for every algorithm in turn (warm ranks, one torch import):
# the output of each run sits between "=== <algo>" and "=== exit <code>".
DRIVER = """
import sys
from assignments.hw2 import train
for algo in sys.argv[1].split(","):
    print("=== " + algo, flush=True)
    code = train.main(["--algo", algo, *sys.argv[2:]])
    print("=== exit %d" % code, flush=True)
"""


def train_all(ov, *args: str) -> dict[str, tuple[int, str]]:
    """{algo: (exit code, output)} of train.py with `args` for every algorithm, in one process."""
    code, out = run_in(ov, sys.executable, "-c", DRIVER, ",".join(TASKS), *args, timeout=300)
    assert code == 0, out[-3000:]
    runs = re.findall(r"^=== (\w+)\n(.*?)^=== exit (\d+)$", out, re.M | re.S)
    assert [r[0] for r in runs] == list(TASKS), out[-3000:]
    return {algo: (int(code), text) for algo, text, code in runs}


@pytest.fixture(scope="module")
def trained(reference):
    return train_all(reference, "-n", "2", "--steps", "12", "--log-every", "4")


@pytest.fixture(scope="module")
def stub_runs(stubs):
    return train_all(stubs, "-n", "2", "--steps", "2")


@pytest.mark.parametrize("algo", list(TASKS))
@pytest.mark.slow
def test_train_on_the_reference_lowers_the_loss(trained, algo):
    code, out = trained[algo]
    assert code == 0, out[-3000:]
    assert len(re.findall(r"step\s+\d+/12\s+train loss [0-9.]+", out)) == 3, out[-3000:]
    before, after = eval_losses(out)
    assert after < before - 0.05, f"{algo}: the loss did not go down ({before} -> {after})"
    assert re.search(rf"^{algo} \({TASKS[algo]}\), mlp \(\d+ params\), 2 ranks, gloo, 12 steps", out, re.M)
    rows = re.findall(r"^\s+([01])\s+[0-9.]+\s+[0-9.]+\s+(\d+)\s+([0-9.]+)\s+(\d+)\s+([0-9.]+)\s+(\d+)\s+([0-9.]+)$",
                      out, re.M)
    assert [r[0] for r in rows] == ["0", "1"], f"one table row per rank:\n{out[-3000:]}"
    if algo in ("allreduce", "overlap", "bucketed"):
        assert all(int(r[5]) > 12 and int(r[1]) == 0 for r in rows), "all-reduces counted as collectives"
    else:
        assert all(int(r[1]) >= 12 for r in rows), "point-to-point messages counted on every rank"
    if algo in SYNCHRONOUS:
        assert "replicas: bitwise equal" in out
    elif algo == "dpsgd":        # local steps after the gossip: replicas differ (SGP at p=2 averages exactly)
        assert re.search(r"replicas: max \|\|x_r - mean\|\| / \|\|mean\|\| = [0-9.]+e-0\d", out), out[-3000:]
    assert re.search(r"wall time [0-9.]+ s", out)


@pytest.mark.slow
def test_train_transformer_on_sim(reference):
    code, out = run_in(reference, sys.executable, TRAIN, "--algo", "bucketed", "--model", "transformer",
                       "--backend", "sim", "-n", "2", "--steps", "8", "--log-every", "4", timeout=120)
    assert code == 0, out[-3000:]
    before, after = eval_losses(out)
    assert after < before, (before, after)
    assert re.search(r"simulated time [0-9.]+ s", out) and "replicas: bitwise equal" in out


@pytest.mark.parametrize("algo", list(TASKS))
@pytest.mark.slow
def test_train_on_the_stubs_names_the_task_in_one_line(stub_runs, algo):
    code, out = stub_runs[algo]
    assert code == 1, out[-3000:]
    lines = [line for line in out.splitlines() if "not implemented" in line]
    assert len(lines) == 1, out[-3000:]
    assert lines[0].startswith(f"--algo {algo}: not implemented yet: HW2 task {TASKS[algo]}"), lines[0]
    assert "Traceback" not in out, out[-3000:]


# -- under mpirun ----------------------------------------------------------------------------------

@pytest.mark.mpi
@pytest.mark.skipif(find_mpirun() is None, reason="no mpirun next to this Python or on PATH")
@pytest.mark.slow
def test_train_under_mpirun(reference):
    pytest.importorskip("mpi4py")
    code, out = run_in(reference, find_mpirun(), "-n", "2", sys.executable, TRAIN, "--algo", "overlap", "--steps", "12",
                       "--log-every", "4", timeout=180)
    assert code == 0, out[-3000:]
    assert re.search(r"^overlap \(2\.3\), mlp \(\d+ params\), 2 ranks, mpi, 12 steps", out, re.M), out[-3000:]
    before, after = eval_losses(out)
    assert after < before - 0.05 and "replicas: bitwise equal" in out
    assert out.count("eval loss, mean over ranks") == 1, "only rank 0 prints the table"

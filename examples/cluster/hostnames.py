"""Across the nodes of a cluster: every rank reports its hostname and address, and the ranks
all-reduce their rank numbers, with the kit's group and with torch.distributed's own (gloo, as the
homework benchmarks build it: minitorch_dist.runtime.torch_group). Run it under a launcher (on the emulated cluster, as root):

    .venv/bin/python -m minitorch_dist.cluster torchrun examples/cluster/hostnames.py   # gloo
    .venv/bin/python -m minitorch_dist.cluster mpirun .venv/bin/python examples/cluster/hostnames.py  # mpi
    # with `up --slurm`: srun (gloo) and srun --mpi=pmi2 (mpi) inside a batch job
    .venv/bin/python -m minitorch_dist.cluster exec node0 sbatch --wait examples/cluster/slurm_job.sh

Rank 0 prints one line `CLUSTER-RESULT {json}`: each rank's hostname, the all-reduce sums (kit's and
torch's) and the expected p(p-1)/2, the backend, and how many distinct hosts took part.
"""

import json
import socket

import torch
import torch.distributed as dist

from minitorch_dist import launch
from minitorch_dist.runtime.env import detect_external
from minitorch_dist.runtime.torch_group import torch_default_group


def report(group, n: int):
    x = torch.full((n,), float(group.rank))
    total = group.all_reduce(x.clone())
    with torch_default_group(group):
        y = torch.full((n,), float(group.rank))
        dist.all_reduce(y)
    host = socket.gethostname()
    return {"rank": group.rank, "hostname": host, "address": socket.gethostbyname(host),
            "sum": total[0].item(), "all_equal": bool((total == total[0]).all()),
            "torch_sum": y[0].item(), "torch_all_equal": bool((y == y[0]).all())}


if __name__ == "__main__":
    job = detect_external()
    if job is None:
        raise SystemExit("run this under torchrun, mpirun or srun (see the docstring)")
    result = launch(report, None, args=(1 << 16,))
    if job.rank == 0:
        p = len(result)
        print("CLUSTER-RESULT " + json.dumps({
            "backend": result.backend, "world_size": p, "expected_sum": p * (p - 1) / 2,
            "hosts": sorted({v["hostname"] for v in result}), "ranks": list(result)}), flush=True)

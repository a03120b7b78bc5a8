"""A rank script for launcher tests: runs unchanged locally, under minitorch_dist.run, torchrun, srun, mpirun.

Prints one JSON line (from world rank 0) with every rank's result so the test can judge it.
    python ring_job.py [--fail-rank R] [--sleep S]
"""

import argparse
import json
import os
import time

import torch

from minitorch_dist import launch
from minitorch_dist.runtime.env import detect_external


def ring(group, fail_rank: int, sleep: float):
    if group.rank == fail_rank:
        raise RuntimeError(f"planned failure on rank {group.rank}")
    time.sleep(sleep)
    right, left = (group.rank + 1) % group.size, (group.rank - 1) % group.size
    got = torch.empty(3)
    group.sendrecv(torch.full((3,), float(group.rank)), right, got, left)
    total = group.all_reduce(torch.tensor([float(group.rank)]))
    return {"rank": group.rank, "size": group.size, "left": got[0].item(), "sum": total.item(),
            "pid": os.getpid()}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--fail-rank", type=int, default=-1)
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("-n", type=int, default=None)
    opts = parser.parse_args()
    job = detect_external()
    results = launch(ring, opts.n, args=(opts.fail_rank, opts.sleep))
    if job is None or job.rank == 0:
        print("RESULT " + json.dumps({"launcher": job.launcher if job else "local", "results": list(results),
                                      "msgs": [c.messages_sent for c in results.counters]}), flush=True)

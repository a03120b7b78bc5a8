"""Ping-pong bandwidth: Group send/recv on the mpi backend vs raw mpi4py Send/Recv.

    mpirun -n 2 python tests/runtime/mpi_scripts/bandwidth.py

For each size, rank 0 sends n bytes to rank 1 and gets them back; bandwidth is
2n / (median round-trip time). Three kinds of round trip alternate, so drift in
the machine's load hits all alike:
  raw:    mpi4py Send/Recv of x.numpy(), the very memory the Group sends;
  group:  Group.send/recv of the uint8 tensor x;
  raw_np: mpi4py Send/Recv of a separately allocated numpy buffer.
`ratio` is raw time / group time (1.0: no overhead); raw and group share their
memory because with MPICH here torch-allocated buffers move ~30% slower than numpy-
allocated ones even for raw mpi4py (compare raw with raw_np). The best (minimum)
round trips are reported too, as the least disturbed by other processes.
Rank 0 prints `MTD_RESULT {json}`: one row per size.
"""

from __future__ import annotations

import json
import statistics
import time

import numpy as np
import torch

from minitorch_dist.runtime.mpi import _mpi, run_mpi

SIZES = [1 << 10, 1 << 20, 16 << 20, 64 << 20]
REPEATS = {1 << 10: 200, 1 << 20: 40, 16 << 20: 15, 64 << 20: 7}
WARMUP = 3


def raw_round_trip(comm, buf: np.ndarray) -> float:
    MPI = _mpi()
    start = time.perf_counter()
    if comm.rank == 0:
        comm.Send([buf, MPI.BYTE], dest=1, tag=5)
        comm.Recv([buf, MPI.BYTE], source=1, tag=5)
    else:
        comm.Recv([buf, MPI.BYTE], source=0, tag=5)
        comm.Send([buf, MPI.BYTE], dest=0, tag=5)
    return time.perf_counter() - start


def group_round_trip(g, x: torch.Tensor) -> float:
    start = time.perf_counter()
    if g.rank == 0:
        g.send(x, dst=1)
        g.recv(x, src=1)
    else:
        g.recv(x, src=0)
        g.send(x, dst=0)
    return time.perf_counter() - start


def main(g):
    comm = _mpi().COMM_WORLD
    rows = []
    for n in SIZES:
        x = torch.ones(n, dtype=torch.uint8)
        own = np.ones(n, dtype=np.uint8)
        times = {"raw": [], "group": [], "raw_np": []}
        for i in range(WARMUP + REPEATS[n]):
            for name, trip in (("raw", lambda: raw_round_trip(comm, x.numpy())),
                               ("group", lambda: group_round_trip(g, x)),
                               ("raw_np", lambda: raw_round_trip(comm, own))):
                comm.Barrier()
                t = trip()
                if i >= WARMUP:
                    times[name].append(t)
        row = {"bytes": n}
        for name, ts in times.items():
            row[f"{name}_us"] = statistics.median(ts) * 1e6
            row[f"{name}_GBps"] = 2 * n / statistics.median(ts) / 1e9
            row[f"{name}_best_us"] = min(ts) * 1e6
        row["ratio"] = row["raw_us"] / row["group_us"]
        row["ratio_best"] = row["raw_best_us"] / row["group_best_us"]
        rows.append(row)
    if g.rank == 0:
        print("MTD_RESULT " + json.dumps({"rows": rows}), flush=True)


if __name__ == "__main__":
    run_mpi(main, trace=False)

"""Failures on the mpi backend: each case must end the whole job, with a useful message.

    mpirun -n 2 python tests/runtime/mpi_scripts/faults.py deadlock   # recv/recv: deadlock report
    mpirun -n 3 python tests/runtime/mpi_scripts/faults.py raise      # rank 1 raises: job aborts
    mpirun -n 2 python tests/runtime/mpi_scripts/faults.py mismatch   # wrong recv buffer: clear error

`deadlock` and `raise` end non-zero (MPI_Abort) with the report / traceback on stderr;
`mismatch` catches the errors on rank 1 and prints `MTD_RESULT {json}` with their text.
Any further arguments are ignored (the tests pass a token to find leftover processes).
"""

from __future__ import annotations

import json
import os
import sys

import torch

from minitorch_dist.runtime.errors import MessageMismatchError
from minitorch_dist import launch


def deadlock(g):
    """Ranks 0 and 1 both receive first: the wait-for cycle 0 -> 1 -> 0."""
    buf = torch.empty(4)
    if g.rank in (0, 1):
        g.recv(buf, src=1 - g.rank)


def fail(g):
    """Rank 1 raises after a barrier; the others wait for a message from it that never comes."""
    g.barrier()
    if g.rank == 1:
        raise ValueError("boom: rank 1 failed on purpose")
    g.recv(torch.empty(1), src=1)


def mismatch(g):
    """Rank 0 sends (2, 3) float32 and (4,) int64; rank 1 receives into the wrong buffers."""
    if g.rank == 0:
        g.send(torch.zeros(2, 3), dst=1, tag=0)
        g.send(torch.zeros(4, dtype=torch.int64), dst=1, tag=1)
        g.send(torch.arange(5.0), dst=1, tag=2)
    elif g.rank == 1:
        errors = []
        for buf, tag in ((torch.empty(3, 2), 0), (torch.empty(4), 1)):
            try:
                g.recv(buf, src=0, tag=tag)
                errors.append(None)
            except MessageMismatchError as exc:
                errors.append(str(exc))
        after = g.recv(torch.empty(5), src=0, tag=2).tolist()  # the channel still works
        print("MTD_RESULT " + json.dumps({"rank": 1, "errors": errors, "after": after}), flush=True)
    g.barrier()


def exits(g):
    """Rank 1 leaves without a word (os._exit: no exception, no cleanup); the others wait for it."""
    g.barrier()
    if g.rank == 1:
        os._exit(3)
    g.recv(torch.empty(1), src=1)


CASES = {"deadlock": (deadlock, 3.0), "raise": (fail, 60.0), "mismatch": (mismatch, 30.0),
         "exit": (exits, 60.0)}

if __name__ == "__main__":
    fn, deadline = CASES[sys.argv[1]]
    launch(fn, None, deadline=deadline)

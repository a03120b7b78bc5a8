"""The mpi backend's direct messages (transports/mpi_p2p.py) on 2 ranks; rank 1 prints the results.

    mpirun -n 2 python tests/runtime/mpi_scripts/p2p.py

Cases, read by tests/runtime/test_mpi.py (one `MTD_RESULT {json}` line from rank 1):
  mismatch: every mix of inline (<= 64 KiB) and payload messages on the two sides of a
      wrong-size receive: a clear error naming both shapes, the sender's send completes, and
      the next message on the tag arrives intact;
  buffered: both ranks send 64000 bytes before they receive (inline sends are buffered; MPI's
      own rendezvous would wait for the receive);
  dropped: an isend whose handle is dropped unwaited is still delivered;
  progress: rank 1 posts a 1 MiB receive, then sleeps outside MPI: rank 0's send completes
      meanwhile (the progress thread);
  stale: a message nobody received before its group closed never reaches a receive of the
      next group (MPI reuses the closed communicators' ids).
Any further arguments are ignored (the tests pass a token to find leftover processes).
"""

from __future__ import annotations

import json
import time
import warnings

import torch

from minitorch_dist import launch
from minitorch_dist.runtime.errors import MessageMismatchError
from minitorch_dist.runtime.transports.mpi import MpiBackend
from minitorch_dist.runtime.transports.mpi_progress import _mpi

BIG = 1 << 18      # float32 elements: 1 MiB, a payload message of its own
# (sent, received) element counts: payload/inline, inline/payload, payload/smaller payload,
# payload/larger payload, inline/larger inline
MIXES = [(BIG, 10), (10, BIG), (BIG, BIG // 2), (BIG // 2, BIG), (5000, 7000)]


def cases(g):
    out = {}
    peer = 1 - g.rank
    # mismatch
    errors, after, sender_s = [], [], []
    for tag, (sent, received) in enumerate(MIXES):
        if g.rank == 0:
            start = time.perf_counter()
            g.send(torch.arange(float(sent)), 1, tag=tag)
            sender_s.append(time.perf_counter() - start)
            g.send(torch.full((3,), float(tag)), 1, tag=tag)
        else:
            try:
                g.recv(torch.empty(received), 0, tag=tag)
                errors.append(None)
            except MessageMismatchError as exc:
                errors.append(str(exc))
            after.append(g.recv(torch.empty(3), 0, tag=tag).tolist())
    out["mismatch"] = {"errors": errors, "after": after}
    # buffered: both send first
    g.send(torch.full((16000,), float(g.rank)), peer, tag=20)
    out["buffered"] = g.recv(torch.empty(16000), peer, tag=20)[0].item()
    # dropped
    if g.rank == 0:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            g.isend(torch.full((BIG,), 5.0), 1, tag=21)
    else:
        out["dropped"] = g.recv(torch.empty(BIG), 0, tag=21)[0].item()
    # progress
    g.barrier()
    if g.rank == 1:
        handle = g.irecv(torch.empty(BIG), 0, tag=22)
        time.sleep(1.0)
        handle.wait()
    else:
        start = time.perf_counter()
        g.send(torch.ones(BIG), 1, tag=22)
        sender_s.append(time.perf_counter() - start)
    out["sender_s"] = g.broadcast(torch.tensor(sender_s + [0.0] * (len(MIXES) + 1 - len(sender_s))), src=0).tolist()
    return out


def stale() -> float | None:
    """Rank 0 sends 1.0 that rank 1 never receives; the next group's message (2.0) is what arrives."""
    comm = _mpi().COMM_WORLD
    first = MpiBackend(comm)
    if first.rank == 0:
        first.isend(torch.full((4,), 1.0), 1, 0, "send").wait(None)
    first.close()
    second = MpiBackend(comm)
    got = torch.empty(4)
    if second.rank == 0:
        second.isend(torch.full((4,), 2.0), 1, 0, "send").wait(None)
    else:
        second.irecv(got, 0, 0, "recv").wait(10.0)
    second.close()
    return got[0].item() if second.rank == 1 else None


if __name__ == "__main__":
    results = launch(cases, None, deadline=30.0)
    got = stale()
    if _mpi().COMM_WORLD.Get_rank() == 1:
        print("MTD_RESULT " + json.dumps({"rank": 1, **results[1], "stale": got}), flush=True)

"""What each backend puts on the wire besides the payload, as measured over TCP: the figures that
traffic_check.py turns into bounds on the bytes a rank's counters allow.

    framing = FRAMING[result.backend]        # "gloo" or "mpi"
    framing.reduce_most(p)                   # the most a rank moves per byte of an all_reduce's input

gloo (its own algorithms: rings for all_reduce and all_gather, k all-reduces for reduce_scatter, a
tree for broadcast): the figures in traffic_check.py's notes.

mpi: MPICH 5.0 from PyPI as the autograder runs it (run_meter.MPI_OVER_TCP: no shared memory,
libfabric's tcp provider over loopback), measured per rank with the kit's ops at p = 2, 3, 4, 5, 8,
n = 0 B to 4 MiB, float32, float16, int16 and uint8 (tests/runtime/test_kernel_traffic_mpi.py
repeats a sample):

    a message       sender: payload + 160-192 B; receiver: 0-16 B of acknowledgement
    barrier         32 B each way a round, ceil(log2 p) rounds (32-96 B)
    all_reduce      1.0-2.5 n each way (p = 2: n; 4: 1.5 n; 8: 1.75 n; p not a power of two: the ranks
                    beyond the largest power of two hand their input to a partner and get the
                    result back, so a partner moves up to n more: 2 n at p = 3, 2.5 n at p = 5),
                    plus 0-144 B; n = 0 moves nothing
    reduce_scatter  sent 0.5-1.0 n, received 0.2-2.0 n (received 1/p n by a rank beyond the largest
                    power of two), sent + received >= n, plus at most 63 B
    all_gather      (p-1) n each way, plus at most 336 B (p = 8)
    broadcast       the root sends up to ceil(log2 p) n (a binomial tree; 1.75 n at p = 8, large n:
                    scatter then all-gather), every other rank receives n to 1.5 n; plus at most 96 B
float16 and bfloat16 are reduced as float32 (twice the counted bytes), float8 as float32 (four times).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Framing:
    """One backend's framing and its collectives' bytes per byte of local input (see the module's notes)."""

    send_most: int          # framing a message sent adds, at most (the sender's side)
    recv_most: int          # acknowledgement a received message makes its receiver send, at most
    barrier_most: int       # each way, a barrier
    send_least: int         # framing a message sent adds, at least
    recv_least: int         # acknowledgement a message received sends back, at least
    collective_least: int   # each way, a call of all_reduce, reduce_scatter or all_gather on k >= 2 ranks
    broadcast_least: int    # each way, a broadcast on k >= 2 ranks
    reduce_scatter_sent: float     # the least share of its input a reduce_scatter's rank sends
    reduce_scatter_received: float  # ... and receives (sent + received >= the whole input either way)
    step: int               # framing of a collective call, at most step * (p - 1) + base
    base: int
    scatter_calls: bool     # gloo's reduce_scatter is k all-reduces: k times the framing a call
    name: str = ""

    def call_framing(self, p: int) -> int:
        """The most framing one call of a collective adds per rank, each way, on groups of at most p ranks."""
        return self.step * (p - 1) + self.base

    def reduce_most(self, p: int) -> float:
        """The most a rank of a group of at most p ranks sends or receives per byte of its input (as
        reduced) in an all_reduce or reduce_scatter."""
        ring = 2 * (p - 1) / p
        if self.name != "mpi":
            return ring
        return max([ring] + [_doubling(k) for k in range(2, p + 1)])

    def broadcast_most(self, p: int) -> float:
        """The most a rank sends or receives per byte of a broadcast's tensor, groups of at most p ranks."""
        if self.name != "mpi":
            return max(1, p - 1)
        return max(1, math.ceil(math.log2(max(p, 2))), 2 * (p - 1) / p)


def _doubling(k: int) -> float:
    """MPICH's recursive doubling on k ranks: log2 of the largest power of two <= k, plus one more
    round (the input handed over and the result handed back) when k is not a power of two."""
    below = 1 << (k.bit_length() - 1)
    return math.log2(below) + (below != k)


# gloo over TCP, measured (traffic_check.py's notes): a message sent 224-416 B (1,280 B for 4 MiB sent
# in parts), its acknowledgement 48-144 B, a barrier 144-432 B, a collective 144-4,032 B a call at p <= 8
GLOO = Framing(send_most=512, recv_most=192, barrier_most=512, send_least=200, recv_least=40,
               collective_least=64, broadcast_least=32, reduce_scatter_sent=1.0, reduce_scatter_received=1.0,
               step=640, base=512, scatter_calls=True, name="gloo")
# MPICH over TCP, measured (above): allowances about twice the largest seen, least framing none
MPI = Framing(send_most=256, recv_most=64, barrier_most=256, send_least=128, recv_least=0,
              collective_least=0, broadcast_least=0, reduce_scatter_sent=0.5, reduce_scatter_received=0.0,
              step=64, base=256, scatter_calls=False, name="mpi")
FRAMING = {"gloo": GLOO, "mpi": MPI}

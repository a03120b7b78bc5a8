"""The job's store as a channel between ranks: what a rank received from it, as the kernel counts it,
against what a correct run needs there.

    problems = store_problems(result.wire, subgroups)     # [] when every rank kept within its bound

Each rank holds clients of the job's TCPStore (the world's rendezvous and the deadlock board), whose
server runs in the launcher; student code can reach them (`group._backend._store`, or the garbage
collector). Rank-to-launcher bytes are not traffic between ranks (kernel_traffic.between leaves them
out), so a rank could set its input in the store, get every other rank's, compute the result
locally and send the algorithm's messages with dummy payloads: right values, right traffic.

What closes it: run_meter.RunMeter counts, per rank, the bytes it received on its connections to the
store's server (Wire.store; a client no rank's process holds, and connections to it opened and
closed during the run, Wire.store_closed, are not told apart by rank: counted against every rank). A
rank learns nothing from the store without receiving bytes, whatever it sends there. A correct run
receives nothing there once the world is up (before the meter's first count: launch() waits for it):
the board's writes get no answer, and it is read only once a deadline expired (the run then fails
anyway). Only a sub-group's rendezvous reads it: gloo's members exchange their addresses, measured
(torch 2.13, gloo over loopback, groups of k = 1..8 ranks, the same every time): 8 k^2 + 164 k B to
each member, as rendezvous_bytes(k) says. The bound of a rank is the sum over the sub-groups the
harness declares for the launch (known in the grading process from the cases, never from the ranks'
counts), each with SLACK bytes more; no declared sub-group: 0 B. mpi ranks create sub-groups through
MPI (no store bytes) but hold the same clients, so the same bound holds there. mpiexec's own
channel (PMI: MPI_Publish_name, or PMI-1 put/get on PMI_FD, through hydra off TCP) is not measured
here: in a grading it is closed after MPI_Init (launching/pmi_relay.py).
"""

from __future__ import annotations

PER_MEMBER, PER_PAIR = 164, 8      # a sub-group of k ranks: 8 k^2 + 164 k B to each member (measured)
SLACK = 64                         # per declared sub-group: a bound that is not the measure itself


def rendezvous_bytes(k: int) -> int:
    """Bytes each member of a new sub-group of k ranks receives from the store (gloo, measured)."""
    return PER_PAIR * k * k + PER_MEMBER * k


def store_bound(sizes) -> int:
    """The most a rank receives from the store in a run whose sub-groups it joins are `sizes`."""
    return sum(rendezvous_bytes(k) + SLACK for k in sizes)


def store_problems(wire, subgroups: list | None = None) -> list[str]:
    """Why the bytes each rank received from the job's store (wire.store, wire.store_closed) cannot come
    from a correct run whose ranks join the sub-groups `subgroups` (per rank, their sizes; None:
    none). [] when every rank kept within its bound, or the store was not measured."""
    received = getattr(wire, "store", None)
    if received is None:
        return []
    closed = getattr(wire, "store_closed", 0)
    if closed is None:
        return ["the kernel's announcements of closed connections overflowed during the run, so what the "
                "ranks received from the job's store cannot be bounded"]
    problems = []
    for rank, got in enumerate(received):
        sizes = list(subgroups[rank]) if subgroups is not None else []
        most = store_bound(sizes)
        if got + closed > most:
            need = (f"the rendezvous of its sub-groups of {', '.join(map(str, sizes))} ranks needs at most "
                    f"{most} B" if sizes else "a run without sub-groups receives nothing there")
            extra = f" (and {closed} B on connections to it closed during the run)" if closed else ""
            problems.append(f"rank {rank} received {got} B from the job's store (the launcher's key-value server)"
                            f"{extra}; {need}")
    return problems

"""The runtime's counters of a run against the bytes the kernel counted (kernel_traffic.py).
The figures below are gloo's; mpi runs (MPICH over TCP) get MPICH's, measured the same way
(wire_framing.py), through disagreements(backend="mpi").

    problems = disagreements(result.counters, result.wire, traced=True, events=result.events)   # [] if both can hold

The counters are written in the rank processes; the kernel's counts are not. Each rank's counters
give a lower and an upper bound on the bytes it sent to the other ranks and received from them;
the kernel's counts must lie between. The bounds of each op add up, so runs that mix point-to-point
messages and the provided collectives are checked as a whole.

Point-to-point (send, recv, isend, irecv, sendrecv, barrier): the payload plus each message's
framing, as measured (gloo over TCP, 0 B to 4 MiB): 224-416 B a message sent, up to 1,280 B for a
4 MiB message sent in parts, 48-144 B of acknowledgement a message received, a barrier 144-432 B.

Provided collectives (all_reduce, reduce_scatter, all_gather, broadcast: gloo's own algorithms; the
counters keep, per op, its calls and the bytes of the local input tensor, n). Measured per rank at
p = 2..8 ranks, n = 0 B to 4 MiB (32 MiB reduce_scatter inputs), in 9 dtypes (tests/runtime/
test_kernel_traffic_collectives.py repeats a sample), on a group of k ranks:

    all_reduce      sent = received = 2(k-1)/k * w*n + 144-4,200 B   (a ring; w = 2 for int16, uint16,
                                                                       uint32, uint64, 4 for float8: the
                                                                       kit reduces them in a wider type)
    reduce_scatter  sent = received = 2(k-1)/k * w*n + up to k times the all_reduce's framing (gloo runs
                                      k all-reduces of n/k)
    all_gather      sent = received = (k-1) * n + 144-2,100 B        (a ring)
    broadcast       the root sends fanout * n (fanout 1-3 at k <= 8: a tree), every other rank receives
                    n and relays it to its children or sends 48 B of acknowledgement; which rank is the
                    root the counters do not say
    n = 0           a barrier (144-432 B each way)

Lower bounds (what a rank must have moved; claimed traffic that did not happen fails here). On
k >= 2 ranks every all_reduce, reduce_scatter and all_gather sends and receives at least n bytes (the
smallest measured: n + 144 B); a broadcast's rank either sent n (the root) or received it, so
sent + received >= n. A collective on a group of one rank moves nothing: the counters do not record
the group, so the lower bound takes the groups from the trace (`events`, their `group` names); on an
untraced run (`traced=False`) collectives get no lower bound, only the upper one. The trace is written
in the rank processes: a grader that knows what its cases run on one-rank groups passes `lone_most`
(per rank {op: (calls, bytes)}, the most a correct run does there; {} for a launch whose groups all
have k >= 2), and what the trace puts on one-rank groups beyond it keeps its lower bound. Sub-groups' own
connections are closed at the end of the run, before the kernel's second count: what they carried
is `wire.closed` (not attributed to ranks), which every lower bound may draw on.

Upper bounds (generous; extra traffic hidden inside counted collectives fails here): the most any
group of k <= p ranks sends or receives for the call, with w = 4 (the counters do not record the
dtype): 8(p-1)/p * n for all_reduce and reduce_scatter, (p-1) * n for all_gather and broadcast,
plus 640(p-1) + 512 B of framing a call (p times that for reduce_scatter), plus 1/256 of the payload.
"""

from __future__ import annotations

from .namespace_counts import UNSEEN_ALLOWANCE
from .wire_framing import FRAMING, GLOO, Framing

# What a message and a collective add on the wire beyond the payload, per backend (wire_framing.py: gloo's
# figures above, MPICH's over TCP there); the cross-check allows the most of it per message and call,
# plus 1/256 of the payload, and requires the least, so honest framing cannot hide a claim of more
# payload than was sent.
PAYLOAD_SHARE = 1 / 256
POINT_TO_POINT = {"send", "recv", "isend", "irecv", "sendrecv", "barrier"}
COLLECTIVES = {"all_reduce", "reduce_scatter", "all_gather", "broadcast"}
WIDEST = 4                   # float8 is reduced as float32 (transports/gloo.py _WIDER): 4x the counted bytes


def collective_framing(p: int, framing: Framing = GLOO) -> int:
    """The most framing one call of a collective adds per rank, each way, on a group of at most p
    ranks (gloo, measured: up to 4,032 B at p = 8, 288 B a ring step; this allows 640 B a step)."""
    return framing.call_framing(p)


def collective_bounds(op: str, calls: int, nbytes: int, p: int, framing: Framing = GLOO,
                      widest: int = WIDEST) -> tuple[float, float]:
    """(the most a rank sends, the most it receives) for `calls` calls of `op` on groups of at most p
    ranks whose local inputs total `nbytes` (Counters' calls and tensor_bytes); `widest`: the most
    bytes the backend reduces per counted byte (the counters do not record the dtype)."""
    per_call = framing.call_framing(p)
    if op in ("all_reduce", "reduce_scatter"):
        payload = widest * framing.reduce_most(p) * nbytes
        per_call *= p if op == "reduce_scatter" and framing.scatter_calls else 1
    elif op == "broadcast":                             # moved as bytes
        payload = framing.broadcast_most(p) * nbytes
    else:
        payload = max(1, p - 1) * nbytes
    most = payload * (1 + PAYLOAD_SHARE) + per_call * calls
    return most, most


def group_size(name: str, world: int) -> int:
    """Members of a group from its trace name: "world", or "group[0, 2]" (with "#1" when made again)."""
    if not name.startswith("group["):
        return world
    inside = name[len("group["):name.find("]")]
    return len([r for r in inside.split(",") if r.strip()])


def lone_collectives(events, world: int, most: list | None = None) -> list[dict[str, tuple[int, int]]]:
    """Per rank {op: (calls, bytes)} of the collectives it ran on groups of one rank, from the trace;
    with `most` (per rank {op: (calls, bytes)}, known outside the ranks) no more than that."""
    out: list[dict[str, list[int]]] = [{} for _ in range(world)]
    if world < 2:                     # the world is one rank: every collective ran alone
        return [{op: (1 << 62, 1 << 62) for op in COLLECTIVES} for _ in range(world)]
    for e in events or ():
        if e.group != "world" and e.op in COLLECTIVES and 0 <= e.rank < world and group_size(e.group, world) < 2:
            c = out[e.rank].setdefault(e.op, [0, 0])
            c[0] += 1
            c[1] += e.nbytes
    if most is not None:              # the trace claims, the grader's knowledge caps
        out = [{op: [min(c[0], cap.get(op, (0, 0))[0]), min(c[1], cap.get(op, (0, 0))[1])] for op, c in d.items()}
               for d, cap in zip(out, most)]
    return [{op: (c[0], c[1]) for op, c in d.items()} for d in out]


def rank_bounds(c, p: int, lone: dict | None, framing: Framing = GLOO, widest: int = WIDEST) -> tuple[dict, dict]:
    """A rank's (lower bounds, upper bounds) from its Counters `c`: lower {"sent", "received",
    "either"} (either: sent + received), upper {"sent", "received"}. `lone`: its collectives on
    groups of one rank (lone_collectives), or None when the run was not traced (then collectives have
    no lower bound). framing: the backend's (wire_framing.py); widest: see collective_bounds."""
    f = framing
    p2p = {name: count for name, count in c.by_op.items() if name not in COLLECTIVES}
    msgs_sent = sum(x.messages_sent for x in p2p.values())
    msgs_recv = sum(x.messages_recv for x in p2p.values())
    bytes_sent = sum(x.bytes_sent for x in p2p.values())
    bytes_recv = sum(x.bytes_recv for x in p2p.values())
    barriers = sum(x.calls for name, x in p2p.items() if name == "barrier")
    most_sent = bytes_sent * (1 + PAYLOAD_SHARE) + f.send_most * msgs_sent + f.recv_most * msgs_recv + \
        f.barrier_most * barriers
    most_recv = bytes_recv * (1 + PAYLOAD_SHARE) + f.send_most * msgs_recv + f.recv_most * msgs_sent + \
        f.barrier_most * barriers
    least = {"sent": bytes_sent + f.send_least * msgs_sent + f.recv_least * msgs_recv,
             "received": bytes_recv + f.send_least * msgs_recv + f.recv_least * msgs_sent, "either": 0}
    for op in COLLECTIVES & set(c.by_op):
        count = c.by_op[op]
        up_sent, up_recv = collective_bounds(op, count.calls, count.tensor_bytes, p, f, widest)
        most_sent += up_sent
        most_recv += up_recv
        if lone is None:
            continue
        lone_calls, lone_bytes = lone.get(op, (0, 0))
        calls, nbytes = max(0, count.calls - lone_calls), max(0, count.tensor_bytes - lone_bytes)
        if op == "broadcast":
            least["sent"] += f.broadcast_least * calls
            least["received"] += f.broadcast_least * calls
            least["either"] += nbytes
        else:
            sent, got = (f.reduce_scatter_sent, f.reduce_scatter_received) if op == "reduce_scatter" else (1, 1)
            least["sent"] += sent * nbytes + f.collective_least * calls
            least["received"] += got * nbytes + f.collective_least * calls
            least["either"] += max(0.0, 1 - sent - got) * nbytes
    return least, {"sent": most_sent, "received": most_recv}


def disagreements(counters: list, wire: list[tuple[int, int]], unseen: int | None = None,
                  traced: bool = False, events=None, closed: int | None = None,
                  lone_most: list | None = None, backend: str = "gloo", widest: int = WIDEST) -> list[str]:
    """Where the runtime's counters of a run (Counters per rank, written in the rank processes) and the
    kernel's counts (`wire`) cannot both be true: a rank that sent or received fewer bytes than its
    counters claim (short of `closed`: what connections closed during the run carried, Wire.closed
    unless given; None: unknown, then no lower bound is checked), or more than they allow; and
    `unseen` bytes (RunResult.wire_unseen) past an allowance. traced/events: whether the run recorded
    its trace, and its events (collectives' groups; see the module's notes); lone_most: per rank the
    most its collectives on one-rank groups can be (None: the trace's word); backend: whose framing
    (wire_framing.py); widest: the most bytes reduced per counted byte, 4 unless the caller knows the
    run reduces no dtype the backend widens (then 1). [] when they agree."""
    problems = []
    if unseen is not None and unseen > UNSEEN_ALLOWANCE + sum(s for s, _ in wire) // 200:
        problems.append(f"{unseen} B crossed the network on connections opened and closed during the run, "
                        f"outside the Group's messages (a side channel between processes)")
    p = len(counters)
    if closed is None:
        closed = getattr(wire, "closed", 0)
    lone = lone_collectives(events, p, lone_most) if traced else [None] * p
    total_least = total_seen = 0
    for rank, (c, (sent, received)) in enumerate(zip(counters, wire)):
        least, most = rank_bounds(c, p, lone[rank], FRAMING[backend], widest)
        slack = closed if closed is not None else float("inf")
        short = [f"{least[k]:.0f} B {k}" for k, seen in (("sent", sent), ("received", received))
                 if seen + slack < least[k]]
        if least["either"] and sent + received + slack < least["sent"] + least["received"] + least["either"]:
            short.append(f"{least['sent'] + least['received'] + least['either']:.0f} B sent and received")
        over = [f"{most[k]:.0f} B {k}" for k, seen in (("sent", sent), ("received", received)) if seen > most[k]]
        total_least += least["sent"]
        total_seen += sent
        if short or over:
            need = [f"at least {x}" for x in short] + [f"at most {x}" for x in over]
            extra = f" (and {closed} B crossed on connections closed during the run, not told apart by rank)" \
                if closed else ""
            problems.append(f"rank {rank}'s counters say it sent {c.messages_sent} messages ({c.bytes_sent} B) and "
                            f"received {c.messages_recv} ({c.bytes_recv} B){_collectives_text(c)}, but the kernel "
                            f"counted {sent} B sent to the other ranks and {received} B received from them{extra}; "
                            f"with each message's and collective's framing, those counters need {' and '.join(need)}")
    if closed is not None and not problems and total_seen + closed < total_least:
        problems.append(f"the ranks' counters say they sent at least {total_least:.0f} B together, but the kernel "
                        f"counted {total_seen} B between them (and {closed} B on connections closed during the run)")
    return problems


def _collectives_text(c) -> str:
    ops = [f"{name} x{count.calls} ({count.tensor_bytes} B)" for name, count in sorted(c.by_op.items())
           if name in COLLECTIVES]
    return f" and ran {', '.join(ops)}" if ops else ""

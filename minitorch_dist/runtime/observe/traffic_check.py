"""The runtime's counters of a run against the bytes the kernel counted (kernel_traffic.py).

    problems = disagreements(result.counters, result.wire)      # [] when both can be true

The counters are written in the rank processes; the kernel's counts are not. A rank cannot have
sent less than its counters' payload plus each message's framing, nor much more: the bounds below
are what gloo's transport and the kit's framing were measured to add.
"""

from __future__ import annotations

from .kernel_traffic import UNSEEN_ALLOWANCE

# What a message adds on the wire beyond its payload, gloo over TCP (measured with send, isend and
# sendrecv at 0 B to 4 MiB: the sender's framing 224-416 B, up to 1,280 B for a 4 MiB message sent
# in parts, the receiver's acknowledgements 48-144 B, a barrier 288 B a rank): the cross-check allows
# these per message, plus 1/256 of the payload.
SEND_OVERHEAD, RECV_OVERHEAD, OTHER_OP_OVERHEAD, PAYLOAD_SHARE = 512, 192, 512, 1 / 256
# ... and at least this much (the smallest seen: 224 B of framing a message sent, 48 B of
# acknowledgement a message received), so honest messages' framing cannot hide a claim of more
# payload than was sent
SEND_FRAMING_MIN, RECV_FRAMING_MIN = 200, 40
POINT_TO_POINT = {"send", "recv", "isend", "irecv", "sendrecv", "barrier"}


def disagreements(counters: list, wire: list[tuple[int, int]], unseen: int | None = None) -> list[str]:
    """Where the runtime's counters of a run (Counters per rank, written in the rank processes) and the
    kernel's counts (`wire`) cannot both be true: a rank that sent fewer bytes to the other ranks
    than its counters claim, or more than they allow (payload plus framing per message); and
    `unseen` bytes (RunResult.wire_unseen) past an allowance. [] when they agree; the per-rank check
    is left out when a rank used an op it does not model (the provided collectives)."""
    problems = []
    if unseen is not None and unseen > UNSEEN_ALLOWANCE + sum(s for s, _ in wire) // 200:
        problems.append(f"{unseen} B crossed the network on connections opened and closed during the run, "
                        f"outside the Group's messages (a side channel between processes)")
    if any(set(c.by_op) - POINT_TO_POINT for c in counters):
        return problems
    for rank, (c, (sent, received)) in enumerate(zip(counters, wire)):
        other = sum(count.calls for name, count in c.by_op.items() if name == "barrier")
        most_sent = c.bytes_sent * (1 + PAYLOAD_SHARE) + SEND_OVERHEAD * c.messages_sent + RECV_OVERHEAD * c.messages_recv + \
            OTHER_OP_OVERHEAD * other
        most_received = c.bytes_recv * (1 + PAYLOAD_SHARE) + SEND_OVERHEAD * c.messages_recv + RECV_OVERHEAD * c.messages_sent + \
            OTHER_OP_OVERHEAD * other
        least_sent = c.bytes_sent + SEND_FRAMING_MIN * c.messages_sent + RECV_FRAMING_MIN * c.messages_recv
        least_received = c.bytes_recv + SEND_FRAMING_MIN * c.messages_recv + RECV_FRAMING_MIN * c.messages_sent
        if not least_sent <= sent <= most_sent or not least_received <= received <= most_received:
            problems.append(f"rank {rank}'s counters say it sent {c.messages_sent} messages ({c.bytes_sent} B) and "
                            f"received {c.messages_recv} ({c.bytes_recv} B), but the kernel counted {sent} B sent "
                            f"to the other ranks and {received} B received from them (with each message's framing: "
                            f"{least_sent}-{most_sent:.0f} B sent, {least_received}-{most_received:.0f} B received)")
    return problems

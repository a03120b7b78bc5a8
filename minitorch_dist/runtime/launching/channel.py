"""Messages between the launcher and its rank processes: pickled bytes over a Connection.

From launcher to ranks always pickle (the launcher trusts itself). From ranks to launcher pickle
too, except when the ranks run code the launcher must not trust (a rank host, see host.py): then
`send_plain` / `recv_plain` carry plain data (plain.py), which reading cannot turn into code.

Plain pickling on purpose: multiprocessing's own pickler (with torch imported) would
pass tensors as shared-memory file descriptors, which needs the two processes to
share multiprocessing's authkey (not true for ranks started by mpiexec) and ties a
result's memory to a process that may be killed right after.
"""

from __future__ import annotations

import os
import pickle
import socket
import sys
from multiprocessing.connection import Connection, answer_challenge, deliver_challenge

import cloudpickle

from . import plain

MAX_PLAIN_MESSAGE = 1 << 30      # bytes: a larger reply from an untrusted rank is refused, not read
REPLY_VAR = "MINITORCH_DIST_MAX_REPLY"              # bytes per message (the autograder sets it lower)
REPLIES_VAR = "MINITORCH_DIST_MAX_REPLIES"          # bytes of all ranks' replies to one run


class ReplyTooLarge(plain.PlainDataError):
    """A message from untrusted ranks past a bound: refused unread (the connection is closed)."""


def _bound(var: str) -> int:
    return int(os.environ.get(var, "0") or 0) or MAX_PLAIN_MESSAGE


class ReplyBudget:
    """What one run's replies may still take in this process (REPLIES_VAR bytes in all)."""

    def __init__(self):
        self.total = _bound(REPLIES_VAR)
        self.room = self.total

    def take(self, size: int) -> None:
        self.room -= size
        if self.room < 0:
            raise ReplyTooLarge(f"the ranks' replies to one run passed {_mib(self.total)} in all ({REPLIES_VAR}, "
                                f"set by the grader): return less (a few numbers or a slice, not whole buffers)")


def _mib(n: int) -> str:
    return f"{n / (1 << 20):g} MiB"


def no_delay(sock: socket.socket) -> None:
    """TCP_NODELAY: a small message goes out at once. Without it a message written right after
    another that the far end only reads (a rank's "hello" after the handshake's last word, a reply
    after a printed line) waits for that end's delayed ACK: 40 ms on Linux."""
    if sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def connect(address, authkey: bytes) -> Connection:
    """multiprocessing.connection.Client(address, authkey=authkey) over TCP, with TCP_NODELAY."""
    host, port = address
    if isinstance(host, str):      # the launcher's numeric address; socket would encode a str with
        host = host.encode("ascii")  # the idna codec, whose import costs each rank 5-15 ms
    with socket.create_connection((host, port)) as sock:
        sock.settimeout(None)
        no_delay(sock)
        conn = Connection(sock.detach())
    answer_challenge(conn, authkey)
    deliver_challenge(conn, authkey)
    return conn


def accepted(sock: socket.socket) -> Connection:
    """A Connection over a socket the launcher accepted (TCP_NODELAY set, no handshake yet)."""
    sock.setblocking(True)
    no_delay(sock)
    return Connection(sock.detach())


def send(conn, obj) -> None:
    """Send `obj` (functions defined in __main__ or a notebook go by value)."""
    conn.send_bytes(cloudpickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


def recv(conn):
    """Receive one object sent by send()."""
    return pickle.loads(conn.recv_bytes())


def send_plain(conn, obj) -> None:
    """Send `obj` as plain data (plain.PlainDataError if it is not)."""
    conn.send_bytes(plain.encode(obj))


def recv_plain(conn, budget: ReplyBudget | None = None):
    """Receive one object sent by send_plain(), without running any code it names. A message over
    REPLY_VAR bytes, or past what is left of `budget`, raises ReplyTooLarge (the bytes are not read)."""
    bound = _bound(REPLY_VAR)
    if budget is not None:
        bound = max(0, min(bound, budget.room))
    try:
        blob = conn.recv_bytes(bound)
    except OSError as exc:
        if "bad message length" not in str(exc):
            raise
        limit = (f"{_mib(_bound(REPLY_VAR))} per message ({REPLY_VAR}, set by the grader)"
                 if budget is None or bound == _bound(REPLY_VAR) else
                 f"{_mib(budget.total)} for all ranks' replies to one run ({REPLIES_VAR}, set by the grader)")
        raise ReplyTooLarge(f"a reply larger than the bound of {limit} was refused: return less (a few "
                            f"numbers or a slice, not whole buffers)") from None
    if budget is not None:
        budget.take(len(blob))
    return plain.decode(blob)


_printed = 0       # bytes of rank output printed by this process (MINITORCH_DIST_MAX_OUTPUT caps it)


def print_output(rank: int | None, msg) -> None:
    """Print a rank's forwarded ("out", stream, text) message as '[rank r] ...' lines (as is for None).

    MINITORCH_DIST_MAX_OUTPUT (bytes; the autograder sets it) caps what this process prints of its
    ranks' output in all: past it, one line says so and the rest is dropped.
    """
    global _printed
    if msg[0] != "out":
        return
    cap = int(os.environ.get("MINITORCH_DIST_MAX_OUTPUT", "0") or 0)
    if cap and _printed >= cap:
        return
    stream = sys.stderr if msg[1] == "stderr" else sys.stdout
    prefix = "" if rank is None else f"[rank {rank}] "
    text = "".join(f"{prefix}{line}\n" for line in str(msg[2]).splitlines())
    if cap and _printed + len(text) >= cap:
        text = text[:max(0, cap - _printed)] + (f"\n[output of the ranks cut at {cap >> 20} MiB: "
                                               f"print less, or only on rank 0]\n")
    _printed += len(text)
    stream.write(text)
    stream.flush()

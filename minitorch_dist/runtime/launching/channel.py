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
import sys

import cloudpickle

from . import plain

MAX_PLAIN_MESSAGE = 1 << 30      # bytes: a larger reply from an untrusted rank is refused, not read


def send(conn, obj) -> None:
    """Send `obj` (functions defined in __main__ or a notebook go by value)."""
    conn.send_bytes(cloudpickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


def recv(conn):
    """Receive one object sent by send()."""
    return pickle.loads(conn.recv_bytes())


def send_plain(conn, obj) -> None:
    """Send `obj` as plain data (plain.PlainDataError if it is not)."""
    conn.send_bytes(plain.encode(obj))


def recv_plain(conn):
    """Receive one object sent by send_plain(), without running any code it names."""
    return plain.decode(conn.recv_bytes(MAX_PLAIN_MESSAGE))


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

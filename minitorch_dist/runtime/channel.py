"""Messages between the launcher and its rank processes: pickled bytes over a Connection.

Plain pickling on purpose: multiprocessing's own pickler (with torch imported) would
pass tensors as shared-memory file descriptors, which needs the two processes to
share multiprocessing's authkey (not true for ranks started by mpiexec) and ties a
result's memory to a process that may be killed right after.
"""

from __future__ import annotations

import pickle

import cloudpickle


def send(conn, obj) -> None:
    """Send `obj` (functions defined in __main__ or a notebook go by value)."""
    conn.send_bytes(cloudpickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


def recv(conn):
    """Receive one object sent by send()."""
    return pickle.loads(conn.recv_bytes())

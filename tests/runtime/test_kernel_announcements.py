"""The kernel's announcements of freed sockets, which come from a work queue, late on a loaded machine:
a run's meter waits for them until every connection the namespace opened during the run is accounted
for (observe/run_meter.py), so what the sub-groups' closed connections carried is never short."""

import socket
import sys
import time

import pytest

from minitorch_dist import launch
from minitorch_dist.runtime.observe import kernel_traffic, namespace_counts, run_meter
from minitorch_dist.runtime.observe.traffic_check import disagreements
from tests.runtime.test_kernel_traffic_collectives import on_subgroups

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or not kernel_traffic.available(),
                                reason="sock_diag (Linux) is needed to read the kernel's per-socket counts")


def test_every_connection_opened_is_dumped_or_announced_freed():
    """The identity the meter waits on: tcp_opens() grows by two for a connection (one end each way),
    and once both ends are freed, their announcements account for them (all_announced). Other
    processes of this namespace may open connections meanwhile: they count on both sides."""
    listener = kernel_traffic.DestroyListener()
    try:
        before = kernel_traffic.Snapshot(kernel_traffic.tcp_sockets(), {})
        opens = namespace_counts.tcp_opens()
        with socket.create_server(("127.0.0.1", 0)) as server:
            client = socket.create_connection(server.getsockname())
            end, _ = server.accept()
            client.sendall(b"x" * 5000)
            got = b""
            while len(got) < 5000:
                got += end.recv(65536)
            ports = {client.getsockname()[1], end.getsockname()[1]}
            client.close()
            end.close()
        opened = namespace_counts.tcp_opens() - opens
        after = kernel_traffic.Snapshot(kernel_traffic.tcp_sockets(), {})
        assert opened >= 2
        waited = 0.0
        while not namespace_counts.all_announced(before, after, listener.freed, opened) and waited < 5:
            time.sleep(0.01)
            waited += 0.01
            listener.drain()
        assert namespace_counts.all_announced(before, after, listener.freed, opened), waited
        ours = [s for s in (*listener.freed.values(), *after.sockets.values()) if s.local[1] in ports]
        assert sum(s.received for s in ours) >= 5000          # the client's bytes, at the server's end
    finally:
        listener.close()


class LateListener(kernel_traffic.DestroyListener):
    """The kernel's announcements held back for the first LATE drains, as a loaded machine's work queue
    does (measured there: 23 of a run's 32 had come when its replies were in, none more for 5 ms)."""

    LATE = 10
    made: list = []

    def __init__(self):
        super().__init__()
        self.drains, self.held = 0, {}
        LateListener.made.append(self)

    def drain(self) -> None:
        self.drains += 1
        known = set(self.freed)
        super().drain()
        if self.drains <= self.LATE:
            self.held.update({k: self.freed.pop(k) for k in set(self.freed) - known})
        else:
            self.freed.update(self.held)
            self.held.clear()


def test_a_run_waits_for_announcements_that_come_late(monkeypatch):
    """Sub-groups' connections close as the run ends; their bytes count only through the kernel's
    announcements. Held back for 10 drains, they still make the run's `closed` (before: the meter stopped
    waiting after one 5 ms pause without news, and the counters then exceeded what the kernel counted)."""
    monkeypatch.setenv(run_meter.VAR, "1")
    monkeypatch.setattr(run_meter, "DestroyListener", LateListener)
    LateListener.made.clear()
    res = launch(on_subgroups, 4, args=(100_000,), trace=True)
    assert res.wire.closed >= 100_000 * 2 * 2                 # the two pairs' traffic, on closed connections
    assert disagreements(res.counters, res.wire, traced=True, events=res.events) == []
    assert LateListener.made and all(m.drains > LateListener.LATE and not m.held for m in LateListener.made)


class StaleListener(kernel_traffic.DestroyListener):
    """An earlier run's socket announced as this run's meter starts (freed before the run): 1 GB it
    received, which is not this run's."""

    def drain(self) -> None:
        super().drain()
        if not getattr(self, "told", False):
            self.told = True
            self.freed[1 << 60] = kernel_traffic.Sock(("127.0.0.1", 1), ("127.0.0.1", 2), 0, 1 << 30, cookie=1 << 60)


def test_sockets_freed_before_the_run_are_not_its_closed_connections(monkeypatch):
    """What the meter hears before its run starts is left out of `closed` (and of what the wait counts:
    an earlier run's sockets would stand for this run's still to come)."""
    monkeypatch.setenv(run_meter.VAR, "1")
    monkeypatch.setattr(run_meter, "DestroyListener", StaleListener)
    res = launch(on_subgroups, 2, args=(100_000,), trace=True)
    assert 100_000 * 2 <= res.wire.closed < 1 << 30
    assert disagreements(res.counters, res.wire, traced=True, events=res.events) == []

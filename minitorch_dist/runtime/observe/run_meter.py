"""One launch()'s traffic as the kernel counts it: the ranks' processes, found from the launcher's own
connections, and their bytes before and after the run (kernel_traffic.py reads the kernel).

    meter = RunMeter(links, candidates)      # before the tasks go out (for_pool builds it)
    ...                                      # the ranks run
    wire = meter.done()                      # Wire: [(bytes sent, bytes received)] per rank, .closed

A rank's process is the one holding the far end of the launcher's connection to it (both ends of
the connection name it), among the processes the caller names: never a pid the rank reports.
"""

from __future__ import annotations

import os
import socket
import time

from .kernel_traffic import (DestroyListener, Snapshot, available, between, closed_bytes, received_from, served_at,
                             snapshot, socket_inodes, tcp_sockets)
from .namespace_counts import all_announced, namespace_octets, tcp_opens, unseen_bytes

VAR = "MINITORCH_DIST_KERNEL_TRAFFIC"         # "1": launch() measures gloo and mpi runs (the autograder sets it)
PRIVATE_NETNS_VAR = "MINITORCH_DIST_PRIVATE_NETNS"   # "1": this network namespace holds one run at a time
# done() waits, in steps of _FREED_STEP s, for the announcements of the sockets freed during the run
# until every connection opened meanwhile is accounted for, every one still closing is freed, and a
# step brings no news (at most _FREED_LIMIT s): the kernel sends them from a work queue, which a loaded
# machine runs late (measured: 23 of 32 there when the ranks' replies were in, and none for 5 ms
# after). The count alone is not enough: an earlier run's socket, freed as this run starts and
# announced late, counts as one of this run's (seen: a third of an hsdp run's bytes missing).
_FREED_LIMIT, _FREED_STEP = 1.0, 0.005


# MPICH (the kit's, from PyPI: ch4 with the ucx and ofi network modules) moves messages between ranks of
# one machine through shared memory, which the kernel does not count. Measured, its ranks talk as if on
# different nodes (MPIR_CVAR_NOLOCAL: no shared-memory module, no node-aware collectives) through
# libfabric's tcp provider (the ucx module finds no route over a namespace's lone loopback), on loopback
# only (else it listens on the machine's address), so every byte between them crosses a TCP socket
# that sock_diag reads.
MPI_OVER_TCP = {"MPIR_CVAR_NOLOCAL": "1", "MPIR_CVAR_CH4_NETMOD": "ofi", "FI_PROVIDER": "tcp", "FI_TCP_IFACE": "lo"}


def wanted(backend: str) -> bool:
    """Whether launch() should measure this run: asked for, a TCP backend, and a kernel that answers."""
    return os.environ.get(VAR) == "1" and backend in ("gloo", "mpi") and available()


def mpi_env() -> dict:
    """What mpiexec's environment needs so that wanted("mpi") runs cross TCP ({} when not measuring)."""
    return dict(MPI_OVER_TCP) if os.environ.get(VAR) == "1" else {}


def owner_pid(inode: int, candidates: list[int]) -> int | None:
    for pid in candidates:
        if inode in socket_inodes(pid):
            return pid
    return None


def _far_ends(links: list[tuple], sockets: dict) -> list[int | None]:
    """The inode of the socket at the far end of each connection (its own address, its peer's), or
    None where the dump has none. Both ends are matched: Linux gives one ephemeral port to several
    connections that go to different peers, so a local address alone can name another test's socket."""
    by_ends = {(s.local, s.remote): inode for inode, s in sockets.items() if inode > 0}
    return [by_ends.get(link) for link in links]


def rank_roots(links: list[tuple], candidates: list[int], sockets: dict | None = None) -> list[int | None]:
    """The pid of each rank: the process holding the socket at the far end of the launcher's
    connection to that rank, `links` holding (far end's address, launcher end's address) per rank
    (the kernel's answer, not the rank's own report). None for a rank whose socket is not found, and
    for every rank when two resolve to the same process (then nothing is claimed)."""
    sockets = tcp_sockets() if sockets is None else sockets
    roots = [owner_pid(inode, candidates) if inode is not None else None for inode in _far_ends(links, sockets)]
    found = [pid for pid in roots if pid is not None]
    return roots if len(set(found)) == len(found) else [None] * len(roots)


def owners_of(links: list[tuple], sockets: dict | None = None) -> set[int]:
    """The uids that own the sockets at the far ends of these connections (the kernel's record)."""
    sockets = tcp_sockets() if sockets is None else sockets
    return {sockets[inode].uid for inode in _far_ends(links, sockets) if inode is not None}


def processes_owned_by(uids: set[int]) -> list[int]:
    """Live processes whose owner is one of `uids`."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.stat(f"/proc/{name}").st_uid in uids:
                    found.append(int(name))
            except OSError:
                continue
    return found


def processes_of(root_pids: list[int], among: list[int] | None = None) -> list[list[int]]:
    """Each root pid with every live process below it (by parent links in /proc), looking only at
    the processes `among` when given."""
    parent: dict[int, int] = {}
    for pid in among if among is not None else [int(d) for d in os.listdir("/proc") if d.isdigit()]:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                parent[pid] = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
    children: dict[int, list[int]] = {}
    for pid, ppid in parent.items():
        children.setdefault(ppid, []).append(pid)
    trees = []
    for root in root_pids:
        tree, todo = [root], [root]
        while todo:
            kids = children.get(todo.pop(), [])
            tree += kids
            todo += kids
        trees.append(tree)
    return trees


def for_pool(conns, host: bool, store_port: int) -> RunMeter | None:
    """A RunMeter for a pool's next run: the ranks are the far ends of the launcher's connections
    `conns`, found among this process's descendants, or (host: a rank host started them) among the
    processes of the uid that owns those far ends; None if the kernel cannot be asked here."""
    try:
        ends = []                 # (the rank's address, ours) per connection: both ends name it
        for conn in conns:
            with socket.socket(fileno=os.dup(conn.fileno())) as sock:
                ends.append((sock.getpeername()[:2], sock.getsockname()[:2]))
        sockets = tcp_sockets()                         # one dump finds the ranks and their uid
        if host:
            uids = owners_of(ends, sockets)

            def find() -> list[int]:
                return processes_owned_by(uids)
        else:
            def find() -> list[int]:
                return processes_of([os.getpid()])[0][1:]
        return RunMeter(ends, find(), find, sockets=sockets, store_port=store_port)
    except (OSError, ValueError):
        return None


class Wire(list):
    """RunMeter.done()'s answer: [(bytes sent to other ranks, bytes received from them)] per rank, and
    `closed`: bytes received by TCP sockets of this network namespace that were closed during the
    run (sub-groups' connections; in a shared namespace, other runs' too), None where the kernel's
    announcements could not be read in full (then no lower bound may rest on the per-rank counts).
    `store`: the bytes each rank received from the job's store (its server is the launcher's) and
    `store_closed` what connections to it closed during the run received (None: unknown), when the
    meter was told the store's port; store_check.py bounds them."""

    closed: int | None = 0
    store: list[int] | None = None
    store_closed: int | None = 0


class RunMeter:
    """Measures one run: make it before the tasks go out, call done() once every reply is in."""

    def __init__(self, links: list[tuple], candidates: list[int], find=None, sockets: dict | None = None,
                 store_port: int | None = None):
        """links: (the rank's address, the launcher's) of each rank's connection to the launcher;
        candidates: the processes the ranks may be among; find() lists them again after the run
        (ranks may fork), default: the same list; store_port: where the job's store listens."""
        self.find = find or (lambda: candidates)
        self.store_port = store_port
        try:
            self.freed: DestroyListener | None = DestroyListener()   # before the first snapshot: no gap
        except OSError:
            self.freed = None
        self.roots = rank_roots(links, candidates, sockets)
        self.private = os.environ.get(PRIVATE_NETNS_VAR) == "1"
        self.octets = namespace_octets() if self.private else None
        self.before = self._snapshot(candidates)
        self.opens = _opens()           # read after the first dump: every connection it counts is new there
        if self.freed is not None:      # sockets freed before the run (an earlier run's): not this run's
            self.freed.drain()
            self.freed.freed.clear()
            self.freed.complete = True  # what overflowed, if anything, was heard before the run
        self.unseen: int | None = None

    def _snapshot(self, candidates: list[int]) -> Snapshot:
        trees = processes_of([pid for pid in self.roots if pid is not None], among=candidates)
        rank_pids, trees = {}, iter(trees)
        for rank, pid in enumerate(self.roots):
            if pid is not None:
                rank_pids[rank] = next(trees)
        return snapshot(rank_pids)

    def done(self) -> Wire | None:
        """Per rank (bytes sent to other ranks, bytes received from them), with `closed` (Wire); None
        if a rank's process could not be found (then nothing is claimed)."""
        try:
            if None in self.roots:
                return None
            opened = None if self.opens is None or (now := _opens()) is None else now - self.opens
            after = self._snapshot(self.find())      # after that count: it shows every socket it counted
            if self.private:
                self.unseen = unseen_bytes(self.before, after, self.octets, namespace_octets())
            wire = Wire(between(self.before, after, len(self.roots)))
            wire.closed = self._closed(after, opened)
            if self.store_port is not None:
                server = socket_inodes(os.getpid())              # the store's server: this process
                wire.store = received_from(self.before, after, server, self.store_port, len(self.roots))
                wire.store_closed = closed_bytes(self.before, after, self.freed.freed,
                                                 served_at(after.sockets, server, self.store_port)) \
                    if self.freed is not None and self.freed.complete else None
            return wire
        except OSError:
            return None
        finally:
            if self.freed is not None:
                self.freed.close()

    def _closed(self, after: Snapshot, opened: int | None) -> int | None:
        """Bytes of connections closed during the run (Wire.closed); None when unknown. In a namespace
        of its own the octet count (wire_unseen) is a floor, announced or not; it undercounts (seen:
        277 KB where sub-groups carried 797 KB), so the announcements are waited for. `opened`: the
        connections the namespace opened during the run (None: unknown, then it waits only for a
        step without news)."""
        fallback = max(0, self.unseen) if self.unseen is not None else None
        if self.freed is None:
            return fallback
        self.freed.drain()
        waited, known = 0.0, -1
        while self.freed.complete and waited < _FREED_LIMIT:
            counted = opened is None or all_announced(self.before, after, self.freed.freed, opened)
            if counted and (not self.freed.freed or len(self.freed.freed) == known):
                break                   # all in the dump, or accounted for and a step without news (a
                                        # stale announcement may count for one still to come)
            known = len(self.freed.freed)
            time.sleep(_FREED_STEP)
            waited += _FREED_STEP
            self.freed.drain()
        if not self.freed.complete:
            return fallback
        closed = closed_bytes(self.before, after, self.freed.freed)
        return closed if fallback is None else max(closed, fallback)


def _opens() -> int | None:
    try:
        return tcp_opens()
    except (OSError, KeyError, ValueError):
        return None

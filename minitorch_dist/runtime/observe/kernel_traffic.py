"""Bytes between rank processes as the kernel counts them: a measurement rank code cannot write.

    before = snapshot(rank_pids)                  # in the launcher, before the run
    ...                                           # the ranks run
    wire = between(before, snapshot(rank_pids))   # [(bytes sent, bytes received)] per rank

This module reads the kernel's sock_diag dumps and its announcements of freed sockets
(namespace_counts.py its whole-namespace counters); run_meter.py finds the ranks' processes and
measures one launch() with them.

The runtime's counters (`group.counters`) live in the rank processes, so code running there can
rewrite them. The kernel's own per-socket counts (tcp_info's bytes_sent and bytes_received, read
over NETLINK_SOCK_DIAG, the interface `ss` uses) cannot be: a byte a rank sent to another rank
was sent. A rank's bytes sent are those its peers' sockets received (tcp_info's bytes_received:
each byte once, where bytes_sent counts a retransmission again, and a loaded machine does drop
loopback packets). Only TCP connections whose two ends both belong to rank processes (or processes
they forked) count, so the ranks' traffic with the launcher (task, replies, the rendezvous store) is
left out and a side channel the ranks open between themselves is counted. What each rank receives
from the store, by any process of theirs, is counted apart (received_from; store_check.py bounds it).

Connections opened and closed within the run (a sub-group's: `group.subgroup(...)` opens gloo
connections that the run's end closes before the ranks reply) are gone from the second dump. The
kernel announces each TCP socket it frees, with its final tcp_info, to a sock_diag multicast group
(SKNLGRP_INET_TCP_DESTROY, what `ss -E` reads): run_meter.RunMeter listens there during the run and adds up
what those sockets received (`Wire.closed`), with the orphaned sockets (closed by their process,
not yet freed) of the second dump. The kernel sends the announcements from a work queue, late on a
loaded machine: the meter waits until the connections the namespace opened during the run are all in
the second dump or announced (namespace_counts.py: tcp_opens, all_announced), then for a step without
news. That total is not attributed to ranks (a freed socket no longer names its process) and,
outside a private network namespace, includes other runs' connections: traffic_check uses it only
as slack on the lower bounds, never as traffic a rank may hide.

What it sees: TCP over any interface, in the caller's network namespace (the grader's test process
shares it with the ranks). What it does not: shared memory (MPICH's default between local ranks: a
measured mpi run is started over TCP instead, run_meter.MPI_OVER_TCP), threads of one process (the
sim backend), UDP. The bytes include each message's framing (the kit's header and gloo's or MPICH's:
wire_framing.py), so they exceed the payload by up to a few hundred bytes a message;
traffic_check.disagreements cross-checks the runtime's counters against them. Linux only; elsewhere `available()` is False.
"""

from __future__ import annotations

import os
import socket
import struct
from dataclasses import dataclass

_SOCK_DIAG, _BY_FAMILY, _DONE, _ERROR = 4, 20, 3, 2           # NETLINK_SOCK_DIAG, SOCK_DIAG_BY_FAMILY, NLMSG_*
_REQUEST_DUMP = 0x1 | 0x300                                    # NLM_F_REQUEST | NLM_F_DUMP
_INFO = 2                                                      # INET_DIAG_INFO: struct tcp_info
_RECEIVED_AT, _SENT_AT, _SEGS_AT = 128, 200, 136               # tcpi_bytes_received, _bytes_sent (4.19+), _segs_out
_HEADER = struct.Struct("=IHHII")
_DESTROY_GROUPS = (1, 3)                                       # SKNLGRP_INET_TCP_DESTROY, SKNLGRP_INET6_TCP_DESTROY
_SOL_NETLINK, _ADD_MEMBERSHIP, _NO_BUFFERS = 270, 1, 105      # SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, ENOBUFS


@dataclass(frozen=True)
class Sock:
    local: tuple
    remote: tuple
    sent: int
    received: int
    segments: int = 0
    uid: int = -1                     # the socket's owner, as the kernel records it
    cookie: int = 0                   # the kernel's id of the socket (kept after its process lets go)


def available() -> bool:
    """Whether the kernel answers sock_diag with byte counts here."""
    try:
        _dump(socket.AF_INET)
        return True
    except OSError:
        return False


def _dump(family: int) -> dict[int, Sock]:
    """Every TCP socket of `family` in this network namespace: {inode: Sock}; sockets no process
    holds any more (inode 0: closed, still shutting down) under -cookie."""
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, _SOCK_DIAG) as nl:
        req = struct.pack("=BBBBI", family, socket.IPPROTO_TCP, 1 << (_INFO - 1), 0, 0xFFFFFFFF) + bytes(48)
        nl.sendto(_HEADER.pack(_HEADER.size + len(req), _BY_FAMILY, _REQUEST_DUMP, 1, 0) + req, (0, 0))
        found: dict[int, Sock] = {}
        while True:
            data = nl.recv(1 << 20)
            pos = 0
            while pos + _HEADER.size <= len(data):
                length, kind = _HEADER.unpack_from(data, pos)[:2]
                if kind == _DONE:
                    return found
                if kind == _ERROR:
                    raise OSError("sock_diag refused the request")
                body = data[pos + _HEADER.size:pos + length]
                pos += (length + 3) & ~3
                sock = _parse(family, body)
                if sock is not None:
                    found[sock[0]] = sock[1]
            if not data:
                return found


def tcp_sockets() -> dict[int, Sock]:
    """Every TCP socket (IPv4 and IPv6) of this network namespace: {inode: Sock}, one sock_diag dump each."""
    return {**_dump(socket.AF_INET), **_dump(socket.AF_INET6)}


def _parse(family: int, body: bytes):
    """(inode, Sock) from one inet_diag_msg and its attributes; None without tcp_info byte counts."""
    if len(body) < 72:
        return None
    sport, dport = struct.unpack_from(">HH", body, 4)
    width = 4 if family == socket.AF_INET else 16
    src, dst = socket.inet_ntop(family, body[8:8 + width]), socket.inet_ntop(family, body[24:24 + width])
    cookie, = struct.unpack_from("=Q", body, 44)
    uid, inode = struct.unpack_from("=II", body, 64)
    at = 72
    while at + 4 <= len(body):
        size, kind = struct.unpack_from("=HH", body, at)
        if size < 4:
            return None
        if kind == _INFO and size - 4 >= _SENT_AT + 8:
            info = body[at + 4:at + size]
            sent, = struct.unpack_from("=Q", info, _SENT_AT)
            received, = struct.unpack_from("=Q", info, _RECEIVED_AT)
            segments, = struct.unpack_from("=I", info, _SEGS_AT)
            return inode or -cookie, Sock((src, sport), (dst, dport), sent, received, segments, uid, cookie)
        at += (size + 3) & ~3
    return None


def socket_inodes(pid: int) -> set[int]:
    """The socket inodes among `pid`'s open files (empty if it is gone or out of reach)."""
    found = set()
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return found
    for name in names:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue
        if link.startswith("socket:["):
            found.add(int(link[8:-1]))
    return found


@dataclass
class Snapshot:
    sockets: dict[int, Sock]          # inode -> counts, every TCP socket of the namespace
    owner: dict[int, int]             # inode -> rank whose process (or a process it forked) holds it


def snapshot(rank_pids: dict[int, list[int]]) -> Snapshot:
    """The kernel's counts now; `rank_pids` maps each rank to its process and the processes it forked."""
    sockets = tcp_sockets()
    owner: dict[int, int] = {}
    for rank, pids in rank_pids.items():
        for pid in pids:
            for inode in socket_inodes(pid):
                owner.setdefault(inode, rank)
    return Snapshot(sockets, owner)


def between(before: Snapshot, after: Snapshot, world_size: int) -> list[tuple[int, int]]:
    """[(bytes sent to other ranks, bytes received from them)] per rank between two snapshots."""
    by_end = {(s.local, s.remote): inode for inode, s in after.sockets.items() if inode > 0}
    out = [[0, 0] for _ in range(world_size)]

    def received(inode: int) -> int:
        old = before.sockets.get(inode)
        return after.sockets[inode].received - (old.received if old else 0)

    for inode, sock in after.sockets.items():
        rank = after.owner.get(inode, before.owner.get(inode))
        peer = by_end.get((sock.remote, sock.local))
        if rank is None or peer is None or after.owner.get(peer, before.owner.get(peer)) is None:
            continue                                   # not between two rank processes
        out[rank][0] += received(peer)     # what arrived at the other end: a retransmission counts once
        out[rank][1] += received(inode)
    return [(sent, got) for sent, got in out]


class DestroyListener:
    """The kernel's announcements of freed TCP sockets (each with its final tcp_info), from now on."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, _SOCK_DIAG)
        try:
            for option in (33, socket.SO_RCVBUF):          # SO_RCVBUFFORCE (root), else what is allowed
                try:
                    self.sock.setsockopt(socket.SOL_SOCKET, option, 8 << 20)
                    break
                except OSError:
                    continue
            self.sock.bind((0, 0))
            for group in _DESTROY_GROUPS:
                self.sock.setsockopt(_SOL_NETLINK, _ADD_MEMBERSHIP, group)
            self.sock.setblocking(False)
        except OSError:
            self.sock.close()
            raise
        self.freed: dict[int, Sock] = {}                 # cookie -> final counts
        self.complete = True                             # False once the kernel dropped announcements

    def drain(self) -> None:
        while True:
            try:
                data = self.sock.recv(1 << 20)
            except BlockingIOError:
                return
            except OSError as err:
                if err.errno != _NO_BUFFERS:
                    raise
                self.complete = False                    # the buffer overflowed: some were lost
                continue
            pos = 0
            while pos + _HEADER.size <= len(data):
                length = _HEADER.unpack_from(data, pos)[0]
                body = data[pos + _HEADER.size:pos + length]
                pos += (length + 3) & ~3
                if len(body) >= 72 and body[0] in (socket.AF_INET, socket.AF_INET6):
                    parsed = _parse(body[0], body)
                    if parsed is not None:
                        self.freed[parsed[1].cookie] = parsed[1]
            if not data:
                return

    def close(self) -> None:
        self.sock.close()


def _v4(address: tuple) -> tuple:
    """An IPv4-mapped IPv6 address (::ffff:a.b.c.d, port) as the IPv4 one."""
    return (address[0][7:], address[1]) if address[0].startswith("::ffff:") else address


def received_from(before: Snapshot, after: Snapshot, server: set[int], port: int, world_size: int) -> list[int]:
    """Bytes received between two snapshots by the clients of the server on `port` whose sockets
    (`server`: the inodes of the process that serves it, the launcher's; the job's store) are the far
    ends: per rank, plus what clients no rank holds received (a process the rank forked and let go of)
    added to every rank. The launcher's own client (in `server`) is left out. A client may be an IPv6
    socket whose ends are IPv4-mapped (torch's are): both ends are matched as IPv4."""
    by_end = {(_v4(s.local), _v4(s.remote)): inode for inode, s in after.sockets.items() if inode > 0}
    out, unowned = [0] * world_size, 0
    for inode, sock in after.sockets.items():
        peer = by_end.get((_v4(sock.remote), _v4(sock.local)))
        if inode <= 0 or inode in server or peer not in server or sock.remote[1] != port:
            continue
        old = before.sockets.get(inode)
        got = sock.received - (old.received if old and old.cookie == sock.cookie else 0)
        rank = after.owner.get(inode, before.owner.get(inode))
        if rank is None:
            unowned += got
        else:
            out[rank] += got
    return [got + unowned for got in out]


def served_at(sockets: dict[int, Sock], server: set[int], port: int) -> set[tuple]:
    """The addresses (IPv4 where mapped) on which the process holding `server` serves `port`."""
    return {_v4(sockets[i].local) for i in server if i in sockets and sockets[i].local[1] == port}


def closed_bytes(before: Snapshot, after: Snapshot, freed: dict[int, Sock], to: set | None = None) -> int:
    """Bytes received, between two snapshots, by sockets closed meanwhile: those the kernel freed
    (`freed`, by cookie) and those no process holds in `after` (shutting down); with `to`, only
    client ends of connections to those addresses (served_at)."""
    old = {s.cookie: s.received for s in before.sockets.values() if s.cookie}
    final = {key: s for key, s in freed.items() if to is None or _v4(s.remote) in to}
    for key, s in after.sockets.items():
        if key < 0 and s.cookie not in final and (to is None or _v4(s.remote) in to):
            final[s.cookie] = s
    return sum(max(0, s.received - old.get(cookie, 0)) for cookie, s in final.items())

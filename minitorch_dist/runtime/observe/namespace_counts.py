"""Counts of the whole network namespace, beside kernel_traffic.py's per-socket ones: the protocol
counters of /proc/net (octets and segments sent, connections opened), and what they say once set
against two socket dumps (kernel_traffic.Snapshot): connections opened meanwhile, and payload no open
socket accounts for. They cover every process of the namespace; run_meter.py uses them for one run
(the octets only where the namespace holds that run alone)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .kernel_traffic import Snapshot, Sock

HEADER_BYTES = 52            # IPv4 + TCP with timestamps: what each segment adds to the namespace's octets
UNSEEN_ALLOWANCE = 4096      # bytes of connection set-up and tear-down the namespace check lets pass


def _namespace_counters(paths=("/proc/net/netstat", "/proc/net/snmp")) -> dict[str, int]:
    """The whole network namespace's protocol counters ({"Tcp:OutSegs": n, ...}), from /proc/net."""
    values = {}
    for path in paths:
        with open(path) as f:
            lines = f.read().splitlines()
        for names, numbers in zip(lines[::2], lines[1::2]):
            prefix = names.split()[0]
            values.update({prefix + n: int(v) for n, v in zip(names.split()[1:], numbers.split()[1:])})
    return values


def namespace_octets() -> tuple[int, int]:
    """(IP octets sent, TCP segments sent) by the whole network namespace, from /proc/net."""
    values = _namespace_counters()
    return values["IpExt:OutOctets"], values["Tcp:OutSegs"]


def tcp_opens() -> int:
    """TCP connections the whole network namespace has opened so far, either end (ActiveOpens +
    PassiveOpens): each is a socket that a later dump shows or whose freeing the kernel announces."""
    values = _namespace_counters(("/proc/net/snmp",))
    return values["Tcp:ActiveOpens"] + values["Tcp:PassiveOpens"]


def all_announced(before: Snapshot, after: Snapshot, freed: dict[int, Sock], opened: int) -> bool:
    """Whether the connections the namespace opened between the two dumps (`opened`) are all accounted
    for and no socket `after` shows closing (held by no process; its counts may still grow) is
    still to be announced freed with its final counts."""
    old = {s.cookie for s in before.sockets.values()}
    closing = [key for key, s in after.sockets.items() if key < 0 and s.cookie not in old]
    return _found(old, after, freed) >= opened and all(-key in freed for key in closing)


def _found(old: set, after: Snapshot, freed: dict[int, Sock]) -> int:
    """Connection sockets (listeners left out) not in `old` that `after` shows or the kernel announced
    freed: what tcp_opens() grew by since `old`'s dump, once every announcement has come."""
    return len({s.cookie for s in (*after.sockets.values(), *freed.values()) if s.cookie not in old and s.remote[1]})


def unseen_bytes(before: Snapshot, after: Snapshot, octets_before: tuple, octets_after: tuple) -> int:
    """Payload that crossed the namespace but no open socket accounts for: connections opened and
    closed within the run (a side channel). Valid only when the namespace holds this run alone."""
    old = {s.cookie: s for s in before.sockets.values()}      # by cookie: a socket closed since is under -cookie
    seen = sum(s.sent - (old[s.cookie].sent if s.cookie in old else 0) for s in after.sockets.values())
    segments = sum(s.segments - (old[s.cookie].segments if s.cookie in old else 0) for s in after.sockets.values())
    octets, all_segments = (a - b for a, b in zip(octets_after, octets_before))
    return octets - seen - HEADER_BYTES * all_segments if all_segments >= segments else octets - seen

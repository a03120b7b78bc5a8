"""Measurements between nodes, with probe.py's server on one and its client on another: the
round-trip latency (`ping` when the machine has it, and always a 1-byte TCP round trip), the
ping-pong bandwidth fit, and incast (several nodes streaming to one at once: what the receiving
node's link lets in). The probes use ports from 29400 inside the cluster (its namespaces are
isolated, so the host's ports are never touched); run one measurement per cluster at a time."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

from .nodes import node_argv
from .state import ClusterState

PROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "probe.py")
PORT = 29400


def _probe(state: ClusterState, server: str, client: str, args: list, timeout: float = 60) -> dict:
    srv = subprocess.Popen(node_argv(state, server, [sys.executable, PROBE, "serve", str(PORT)]),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        host = state.node(server).hostname
        done = subprocess.run(node_argv(state, client, [sys.executable, PROBE, args[0], host, str(PORT),
                                                        *map(str, args[1:])]),
                              capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"probe {args[0]} from {client} to {server} failed: {done.stderr.strip()}")
        return json.loads(done.stdout)
    finally:
        try:
            srv.wait(timeout=5)
        except subprocess.TimeoutExpired:
            srv.kill()
            srv.wait()


def tcp_rtt(state: ClusterState, a: str = "node0", b: str = "node1", count: int = 50) -> dict:
    """1-byte TCP round trips from node a to node b: {min_s, median_s, count}."""
    return _probe(state, b, a, ["rtt", count])


def ping_rtt(state: ClusterState, a: str = "node0", b: str = "node1", count: int = 5) -> float | None:
    """ping's average round trip in seconds from a to b, or None where there is no ping."""
    if shutil.which("ping") is None:
        return None
    done = subprocess.run(node_argv(state, a, ["ping", "-c", str(count), "-i", "0.2", "-q",
                                               state.node(b).hostname]), capture_output=True, text=True)
    m = re.search(r"= [0-9.]+/([0-9.]+)/", done.stdout)
    return float(m.group(1)) / 1e3 if m else None


def pingpong(state: ClusterState, a: str = "node0", b: str = "node1", sizes=None) -> dict:
    """Ping-pong of messages from 64 KiB up to about 0.25 s of traffic at the configured rate (8 MiB
    unshaped), fitted to alpha + n * beta: {alpha_s, beta_s_per_byte, bits_per_second, ...}."""
    if sizes is None:
        top = int(state.bits_per_second / 8 * 0.25) if state.bits_per_second else 8 << 20
        top = max(1 << 18, min(top, 64 << 20))
        sizes = [top // 8, top // 4, top // 2, top]
    return _probe(state, b, a, ["pingpong", *sizes], timeout=120)


def incast(state: ClusterState, senders: list, receiver: str, nbytes: int) -> dict:
    """Every sender streams nbytes to `receiver` at once: {bits_per_second: all bytes over the
    slowest stream's time, streams: [{bytes, seconds}]}. With the receiver's link shaped at R,
    the sum stays near R however many send (the switch's side of its link is shaped too)."""
    sinks = [subprocess.Popen(node_argv(state, receiver, [sys.executable, PROBE, "sink", str(PORT + 1 + i)]),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(len(senders))]
    host = state.node(receiver).hostname
    try:
        streams = [subprocess.Popen(node_argv(state, s, [sys.executable, PROBE, "stream", host,
                                                         str(PORT + 1 + i), str(nbytes)]),
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                   for i, s in enumerate(senders)]
        results = []
        for p in streams:
            out, err = p.communicate(timeout=120)
            if p.returncode != 0:
                raise RuntimeError(f"incast stream failed: {err.strip()}")
            results.append(json.loads(out))
    finally:
        for p in sinks:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    slowest = max(r["seconds"] for r in results)
    return {"bits_per_second": 8 * nbytes * len(senders) / slowest, "streams": results}

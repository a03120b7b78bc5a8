"""Link shaping: a token bucket (tc tbf) at the rate given to `up --bandwidth`, on both ends of every
node's link: the node's eth0 (what the node sends) and the switch's veth<i> (what it receives), so
each node's link is shaped in both directions, full duplex, like a NIC on a switch port.

Only bandwidth is shaped: this kernel has tbf and htb but no netem, so no delay is added; the
latency the links have is measured (`status`) and reported, not configured.
"""

from __future__ import annotations

import re
import subprocess

from .state import ClusterState

_UNITS = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}


def parse_rate(text: str | None) -> float | None:
    """Bits per second from tc's notation ('1gbit', '100mbit', '500kbit', '1e9', '1000000bit');
    None for None, 'none' or 'unshaped'. Bytes per second ('bps' in tc) are refused: ambiguous."""
    if text is None or str(text).lower() in ("none", "unshaped", "0", ""):
        return None
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([kmgt]?)(bit|bits|b/s|bit/s)?\s*", str(text).lower())
    if not m or (m.group(2) and not m.group(3)):
        raise ValueError(f"bandwidth {text!r}: give bits per second as tc does, e.g. 1gbit, 100mbit, 500kbit")
    bits = float(m.group(1)) * _UNITS[m.group(2)]
    if bits < 8e3:
        raise ValueError(f"bandwidth {text!r}: at least 8kbit")
    return bits


def tbf_args(bits_per_second: float) -> list:
    """tbf's parameters for a rate: a bucket of 1 ms of traffic (at least 16 KiB, so one full-size
    packet always fits), and a queue of up to 100 ms."""
    burst = max(16384, int(bits_per_second / 8 * 1e-3))
    return ["tbf", "rate", f"{int(bits_per_second)}bit", "burst", str(burst), "latency", "100ms"]


def _tc(netns: str, *args) -> None:
    done = subprocess.run(["tc", "-n", netns, *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"tc -n {netns} {' '.join(args)}: {done.stderr.strip()}")


def shape(state: ClusterState) -> None:
    """Put tbf at state.bits_per_second on both ends of every node's link."""
    spec = tbf_args(state.bits_per_second)
    for i, n in enumerate(state.nodes):
        _tc(n.netns, "qdisc", "replace", "dev", "eth0", "root", *spec)
        _tc(state.switch, "qdisc", "replace", "dev", f"veth{i}", "root", *spec)


def configured(state: ClusterState) -> list:
    """(where, qdisc line) for both ends of every link, as the kernel reports them now."""
    rows = []
    for i, n in enumerate(state.nodes):
        for netns, dev, where in ((n.netns, "eth0", f"{n.hostname} eth0 (sends)"),
                                  (state.switch, f"veth{i}", f"switch veth{i} (to {n.hostname})")):
            out = subprocess.run(["tc", "-n", netns, "qdisc", "show", "dev", dev], capture_output=True,
                                 text=True).stdout.strip()
            rows.append((where, out.splitlines()[0] if out else "(missing)"))
    return rows

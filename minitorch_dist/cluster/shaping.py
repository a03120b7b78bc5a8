"""Link shaping: htb at the rate given to `up --bandwidth`, on both ends of every node's link: the
node's eth0 (what the node sends) and the switch's veth<i> (what it receives), so each node's link
is shaped in both directions, full duplex, like a NIC on a switch port.

Why htb with a small bucket, not tbf: veth passes TCP's segments of up to 64 KB whole (GSO). tbf
must cut a segment larger than its bucket into packets, and with a bucket of 1 ms (125 KB at
1gbit) messages below it crossed at 4-16 Gbit/s; with a 16 KB bucket the cutting cost the CPU so
much that 8 MB messages crossed at 573 Mbit/s instead of 1000 (a busy 2-core machine). htb lets a
whole segment go and pays for it afterwards: with a 4 KB bucket 128 KB..8 MB messages crossed at
944-960 Mbit/s (TCP's headers leave at most 956). Messages of one segment (under 64 KB) can still
pass at the unshaped speed; cutting segments to packets (gso_max_size 1500) took large messages
down to 327 Mbit/s here, so it is not done.

Under the link's class (1:1) two classes share it: 1:10 for packets under 256 bytes (TCP's
acknowledgements, gloo's ready-to-receive notices, message headers), served first, and 1:20 for the
rest. With one queue, a node that sends and receives at once (every node of a ring all-reduce) held
the acknowledgements of what it received behind what it sent: the 4-node ring took 1.43x the cost
model at 20mbit, 1.07-1.15x with the class. Each node's TCP send buffers are capped too
(limit_send_buffers: why there).

A shaper is not a wire: htb charges a segment after letting it go, so after an idle moment the first
segment of a message (up to 64 KB at 1gbit, where TCP hands over large segments) crosses at once. A
ping-pong of small messages therefore reads up to twice the rate; large messages pay for all but
one segment. examples/cluster/link_model.py fits latency-sized and link-sized messages for that.

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


def bucket_bytes(bits_per_second: float) -> int:
    """htb's burst: 20 us of traffic, at least 4 KiB (a 9000-byte jumbo frame is not used here)."""
    return max(4096, int(bits_per_second / 8 * 20e-6))


def htb_args(bits_per_second: float) -> list:
    """The link's class (1:1): every packet of the link is charged to it, at the rate."""
    b = str(bucket_bytes(bits_per_second))
    rate = f"{int(bits_per_second)}bit"
    return ["htb", "rate", rate, "ceil", rate, "burst", b, "cburst", b, "quantum", "65536"]


SMALL_SHARE = 0.1       # the small packets' class is sure of 10% of the rate, and may take all of it


def leaf_args(bits_per_second: float, small: bool) -> list:
    """The two classes under 1:1: 1:10 (prio 0) for small packets, 1:20 (prio 1) for the rest.
    Their rates add up to the link's, both may borrow up to it, and 1:10 is served first."""
    b = str(bucket_bytes(bits_per_second))
    share = SMALL_SHARE if small else 1 - SMALL_SHARE
    return ["htb", "rate", f"{int(bits_per_second * share)}bit", "ceil", f"{int(bits_per_second)}bit",
            "burst", b, "cburst", b, "quantum", "65536", "prio", "0" if small else "1"]


def _tc(netns: str, *args) -> None:
    done = subprocess.run(["tc", "-n", netns, *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"tc -n {netns} {' '.join(args)}: {done.stderr.strip()}")


def shape(state: ClusterState) -> None:
    """Put htb at state.bits_per_second on both ends of every node's link: class 1:1 at the rate,
    and under it 1:10 for packets under 256 bytes (TCP's acknowledgements, gloo's ready-to-receive
    notices, the kit's message headers), served before 1:20, the bulk."""
    bits = state.bits_per_second
    for i, n in enumerate(state.nodes):
        for netns, dev in ((n.netns, "eth0"), (state.switch, f"veth{i}")):
            # a fresh root each time, so a live cluster can be shaped again at another rate
            subprocess.run(["tc", "-n", netns, "qdisc", "del", "dev", dev, "root"], capture_output=True)
            _tc(netns, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "20")
            _tc(netns, "class", "replace", "dev", dev, "parent", "1:", "classid", "1:1", *htb_args(bits))
            _tc(netns, "class", "replace", "dev", dev, "parent", "1:1", "classid", "1:10", *leaf_args(bits, True))
            _tc(netns, "class", "replace", "dev", dev, "parent", "1:1", "classid", "1:20", *leaf_args(bits, False))
            # IPv4 total length < 256: the high byte of bytes 2-3 of the IP header is zero
            _tc(netns, "filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1",
                "u32", "match", "u16", "0x0000", "0xff00", "at", "2", "flowid", "1:10")
    limit_send_buffers(state)


def send_buffer_bytes(bits_per_second: float) -> int:
    """The most a TCP socket of a node may hold unsent: 10 ms of the link, at least 256 KiB (at
    64 KiB, 26 ms at 20mbit, a busy machine's ranks did not refill it in time: the ring took 1.5x)."""
    return max(256 << 10, int(bits_per_second / 8 * 10e-3))


def limit_send_buffers(state: ClusterState) -> None:
    """Cap every node's TCP send buffers (net.ipv4.tcp_wmem, per namespace) at send_buffer_bytes.
    Linux lets a socket hold up to 4 MB unsent; a send of a message smaller than that returns at
    once, so a rank that sends twice in a row (the root of a tree's broadcast: to node2, then to
    node1) puts both messages on its link at the same time, each at half the rate, and node2, which
    forwards the first, gets it late: the 4-node tree took 5 message times, not 4 (1.27x the cost
    model at 20mbit; 1.09-1.11 with the cap). With the cap a send returns when all but the cap of
    its message is on the wire."""
    top = send_buffer_bytes(state.bits_per_second)
    for n in state.nodes:
        done = subprocess.run(["ip", "netns", "exec", n.netns, "sysctl", "-qw",
                               f"net.ipv4.tcp_wmem=4096 16384 {top}"], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"sysctl tcp_wmem in {n.netns}: {done.stderr.strip()}")


def configured(state: ClusterState) -> list:
    """(where, htb class line) for both ends of every link, as the kernel reports them now."""
    rows = []
    for i, n in enumerate(state.nodes):
        for netns, dev, where in ((n.netns, "eth0", f"{n.hostname} eth0 (sends)"),
                                  (state.switch, f"veth{i}", f"switch veth{i} (to {n.hostname})")):
            out = subprocess.run(["tc", "-n", netns, "class", "show", "dev", dev], capture_output=True,
                                 text=True).stdout.strip()
            line = [x for x in out.splitlines() if x.startswith("class htb 1:1 ")]
            rows.append((where, line[0] if line else "(missing)"))
    return rows

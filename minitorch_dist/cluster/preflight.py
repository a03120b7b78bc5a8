"""Can this machine host the cluster? Linux, root, `ip`/`tc`/`nsenter`/`unshare`, and network and UTS
namespaces. When it cannot, ClusterUnavailable says why and what to use instead: the sim backend
with the alpha (latency) and beta (seconds per byte) the cluster would have had."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys


class ClusterUnavailable(RuntimeError):
    """This machine cannot host the emulated cluster (the message says why and what to use instead)."""


def sim_advice(bits_per_second: float | None = None, latency_s: float = 5e-5) -> str:
    beta = 8.0 / bits_per_second if bits_per_second else 1e-9
    return (f"use the simulator with the same alpha and beta instead: "
            f"launch(fn, N, backend=\"sim\", network=SimNetwork(alpha={latency_s:g}, beta={beta:g})) "
            f"(alpha: seconds per message, beta: seconds per byte = 8 / bits per second)")


def unavailable_reason() -> str | None:
    """Why the cluster cannot run here (None when it can). Creates and removes one probe namespace."""
    if not sys.platform.startswith("linux"):
        return f"the emulated cluster needs Linux network namespaces; this is {sys.platform}"
    if os.geteuid() != 0:
        return "the emulated cluster needs root (network namespaces, veth links, tc); run it with sudo"
    missing = [tool for tool in ("ip", "tc", "nsenter", "unshare", "mount", "umount") if shutil.which(tool) is None]
    if missing:
        return f"the emulated cluster needs {', '.join(missing)} (iproute2, util-linux) on PATH"
    probe = f"mtd-probe-{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    try:
        if made.returncode != 0:
            return f"network namespaces are refused here (ip netns add: {made.stderr.strip()})"
        uts = subprocess.run(["unshare", "--uts", "true"], capture_output=True, text=True)
        if uts.returncode != 0:
            return f"UTS namespaces are refused here (unshare --uts: {uts.stderr.strip()})"
        veth = subprocess.run(["ip", "-n", probe, "link", "add", "name", "pa", "type", "veth", "peer", "name", "pb"],
                              capture_output=True, text=True)
        if veth.returncode != 0:
            return f"veth links are refused here (ip link add type veth: {veth.stderr.strip()})"
    finally:
        if made.returncode == 0:
            subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def require(bits_per_second: float | None = None) -> None:
    """Raise ClusterUnavailable (with the sim advice) when this machine cannot host the cluster."""
    reason = unavailable_reason()
    if reason is not None:
        raise ClusterUnavailable(f"{reason}; {sim_advice(bits_per_second)}")

"""Nodes: one network namespace per node (ip netns <cluster>-node<i>) with its own hostname, joined
by veth links to a Linux bridge in a switch namespace (<cluster>-switch).

Nothing is created in the host's namespace: each veth pair is made inside the switch namespace with
its peer moved straight into the node, the addresses (10.231.0.0/24) exist only inside the cluster,
and the switch has no link to the host, so no packet leaves the cluster.

Hostnames: each node has a persistent UTS namespace, bound to a file under the cluster's state folder
(`unshare --uts=<file> hostname node<i>`), so no holder process is needed and nothing is left
running; entering a node is `ip netns exec <netns> nsenter --uts=<file> -- CMD`. `ip netns exec`
also gives the command a mount namespace with /etc/netns/<netns>/hosts bound over /etc/hosts: that
file names every node (node<i> -> its address), so `node0` resolves on every node and a node's own
hostname resolves to its cluster address (gloo and MPICH pick the interface that way). An
nsswitch.conf there resolves names from that file only (a node has no DNS server to reach).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time

from . import shaping
from .state import STATE_ROOT, ClusterState, folder

NETNS_ETC = "/etc/netns"


def _run(argv, check: bool = True, **kw) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, capture_output=True, text=True, **kw)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
    return done


def node_argv(state: ClusterState, node, argv) -> list:
    """The command line that runs argv on `node` (a Node or its name): its network namespace,
    its hostname, and its /etc/hosts."""
    n = state.node(node) if isinstance(node, str) else node
    return ["ip", "netns", "exec", n.netns, "nsenter", f"--uts={n.uts}", "--", *argv]


def _hosts_file(state: ClusterState) -> str:
    lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
    lines += [f"{n.address}\t{n.hostname}" for n in state.nodes]
    # the same addresses as IPv6-mapped, which is how a dual-stack server (torch's TCPStore) sees its
    # clients: it names them without a DNS lookup (no "hostname of the client socket cannot be
    # retrieved" warnings). getaddrinfo still returns the IPv4 address first, which gloo binds.
    lines += [f"::ffff:{n.address}\t{n.hostname}" for n in state.nodes]
    return "\n".join(lines) + "\n"


def _nsswitch_file() -> str:
    """The host's nsswitch.conf with names resolved from /etc/hosts only: a node has no route to a
    DNS server, and a lookup there fails as 'temporary' (EAI_AGAIN), which getnameinfo reports
    instead of falling back to the number (torch's TCPStore warned on every connection to 0.0.0.0)."""
    try:
        with open("/etc/nsswitch.conf") as f:
            lines = [line for line in f.read().splitlines() if not line.startswith("hosts:")]
    except OSError:
        lines = []
    return "\n".join(lines + ["hosts:          files"]) + "\n"


def bring_up(state: ClusterState) -> ClusterState:
    """Create the cluster `state` describes (state.phase 'creating' -> 'up'). The record is written
    first, so a crash half-way leaves something `down` can remove; on an error everything made so
    far is removed before the error is raised."""
    if any(_netns_of(state.name)):
        raise RuntimeError(f"cluster {state.name!r} already exists (namespaces {_netns_of(state.name)}): "
                           f"run `down --name {state.name}` first")
    if leftovers(state.name):            # what a crash left without namespaces: a record, mounts, files
        teardown(state.name)
    state.phase = "creating"
    state.save()
    try:
        uts_dir = os.path.join(state.folder, "uts")
        os.makedirs(uts_dir, exist_ok=True)
        # a private mount, so binding namespace files inside it works where / is a shared mount
        _run(["mount", "--bind", uts_dir, uts_dir])
        _run(["mount", "--make-private", uts_dir])
        sw = state.switch
        _run(["ip", "netns", "add", sw])
        _run(["ip", "-n", sw, "link", "set", "lo", "up"])
        _run(["ip", "-n", sw, "link", "add", "name", "br0", "type", "bridge"])
        _run(["ip", "-n", sw, "link", "set", "br0", "up"])
        hosts = _hosts_file(state)
        for i, n in enumerate(state.nodes):
            _run(["ip", "netns", "add", n.netns])
            os.makedirs(os.path.join(NETNS_ETC, n.netns), exist_ok=True)
            with open(os.path.join(NETNS_ETC, n.netns, "hosts"), "w") as f:
                f.write(hosts)
            with open(os.path.join(NETNS_ETC, n.netns, "nsswitch.conf"), "w") as f:
                f.write(_nsswitch_file())
            _run(["ip", "-n", n.netns, "link", "set", "lo", "up"])
            # made inside the switch namespace, the peer moved straight into the node: never in the host's
            _run(["ip", "-n", sw, "link", "add", "name", f"veth{i}", "type", "veth", "peer", "name", "eth0",
                  "netns", n.netns])
            _run(["ip", "-n", sw, "link", "set", f"veth{i}", "master", "br0", "up"])
            _run(["ip", "-n", n.netns, "addr", "add", f"{n.address}/24", "dev", "eth0"])
            _run(["ip", "-n", n.netns, "link", "set", "eth0", "up"])
            open(n.uts, "w").close()
            _run(["unshare", f"--uts={n.uts}", "hostname", n.hostname])
        if state.bits_per_second:
            shaping.shape(state)
        state.phase = "up"
        state.save()
    except BaseException:
        teardown(state.name)
        raise
    return state


def _netns_of(name: str) -> list:
    """The namespaces of cluster `name` that exist now (nodes and switch)."""
    out = _run(["ip", "netns", "list"], check=False).stdout
    pattern = re.compile(rf"^{re.escape(name)}-(node\d+|switch)$")
    return [line.split()[0] for line in out.splitlines() if line.split() and pattern.match(line.split()[0])]


def _pids_in(netns: str) -> list:
    out = _run(["ip", "netns", "pids", netns], check=False).stdout
    return [int(p) for p in out.split() if p.isdigit()]


def _alive(pid: int) -> bool:
    """Running (a zombie, dead but not yet reaped by its parent, is not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _mounts_under(path: str) -> list:
    """Mount points at or under `path`, deepest first."""
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            target = line.split()[4].replace("\\040", " ")
            if target == path or target.startswith(path.rstrip("/") + "/"):
                found.append(target)
    return sorted(found, key=len, reverse=True)


def _tagged_pids(name: str) -> list:
    """Processes started through the cluster (their environment has MTD_CLUSTER_TAG=<name>, which only
    the cluster sets), wherever
    they run now."""
    tag = f"MTD_CLUSTER_TAG={name}".encode()
    found = []
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) not in (os.getpid(), os.getppid()):
            try:
                with open(f"/proc/{d}/environ", "rb") as f:
                    if tag in f.read().split(b"\0"):
                        found.append(int(d))
            except OSError:
                pass
    return found


def leftovers(name: str) -> list:
    """What of cluster `name` still exists: namespaces, processes inside them or started through
    the cluster, hosts files, mounts, the state folder. Empty after `down`."""
    left = [f"netns {ns}" for ns in _netns_of(name)]
    left += [f"process {pid} in {ns}" for ns in _netns_of(name) for pid in _pids_in(ns)]
    left += [f"process {pid} (MTD_CLUSTER_TAG={name})" for pid in _tagged_pids(name)]
    if os.path.isdir(NETNS_ETC):
        pattern = re.compile(rf"^{re.escape(name)}-(node\d+|switch)$")
        left += [f"{NETNS_ETC}/{d}" for d in os.listdir(NETNS_ETC) if pattern.match(d)]
    left += [f"mount {m}" for m in _mounts_under(folder(name))]
    if os.path.exists(folder(name)):
        left.append(f"folder {folder(name)}")
    return left


def _wait_gone(pids: set, seconds: float) -> set:
    """Wait up to `seconds` for `pids` to exit; those still alive."""
    deadline = time.monotonic() + seconds
    while pids and time.monotonic() < deadline:
        pids = {p for p in pids if _alive(p)}
        if pids:
            time.sleep(0.05)
    return pids


def teardown(name: str, grace: float = 2.0) -> list:
    """Remove cluster `name` entirely, from its record or, without one, from what exists under its
    name: the processes inside its namespaces (SIGTERM, then SIGKILL after `grace` s), the
    namespaces (and with them every veth and qdisc), hosts files, UTS namespace files, the record.
    Idempotent: returns what it removed ([] when nothing was there)."""
    removed = []
    spaces = _netns_of(name)
    for attempt in range(4):                  # a process started meanwhile (a job step, a daemon's child) is
        pids = {pid for ns in spaces for pid in _pids_in(ns)} | set(_tagged_pids(name))   # met next time
        pids.discard(os.getpid())
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGTERM if attempt == 0 else signal.SIGKILL)
                removed.append(f"process {pid}")
            except ProcessLookupError:
                pass
        if attempt == 0:
            pids = _wait_gone(pids, grace)
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        _wait_gone(pids, 5)                   # killed ones may take a moment to go (a SLURM daemon's threads)
    for ns in spaces:
        _run(["ip", "netns", "del", ns], check=False)
        removed.append(f"netns {ns}")
    if os.path.isdir(NETNS_ETC):
        pattern = re.compile(rf"^{re.escape(name)}-(node\d+|switch)$")
        for d in os.listdir(NETNS_ETC):
            if pattern.match(d):
                shutil.rmtree(os.path.join(NETNS_ETC, d), ignore_errors=True)
                removed.append(f"{NETNS_ETC}/{d}")
    for target in _mounts_under(folder(name)):
        for _ in range(3):               # a path bound twice unmounts twice
            if _run(["umount", target], check=False).returncode != 0:
                _run(["umount", "-l", target], check=False)
            if target not in _mounts_under(folder(name)):
                break
        removed.append(f"mount {target}")
    if os.path.exists(folder(name)):
        shutil.rmtree(folder(name), ignore_errors=True)
        removed.append(f"folder {folder(name)}")
    for empty in (STATE_ROOT, NETNS_ETC):      # ours or ip's; removed only when nothing is left in them
        try:
            os.rmdir(empty)
        except OSError:
            pass
    return removed

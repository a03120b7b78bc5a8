"""The record of one cluster: /run/minitorch_dist_cluster/<name>/state.json, written before anything
is created and kept until `down` has removed everything, so `status` and `down` work after a crash
(/run is a tmpfs: a reboot removes the namespaces and the record together).

The folder also holds each node's UTS namespace file (uts/<node>), the hostfile and the launcher
script for mpiexec, and with `up --slurm` SLURM's configuration, keys, spools and logs (slurm/)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field

STATE_ROOT = "/run/minitorch_dist_cluster"
DEFAULT_NAME = "mtd"
SUBNET = "10.231.0"           # nodes get SUBNET.1, SUBNET.2, ... /24, inside the namespaces only


@dataclass
class Node:
    hostname: str             # node0, node1, ... (its own UTS namespace; resolvable on every node)
    netns: str                # <cluster>-node0 (ip netns name)
    address: str              # 10.231.0.1
    uts: str                  # the UTS namespace's file (a bind mount) under the state folder


@dataclass
class ClusterState:
    name: str
    nodes: list = field(default_factory=list)   # of Node
    bandwidth: str | None = None                # as given to `up` (tc syntax), None: unshaped
    bits_per_second: float | None = None
    ranks_per_node: int = 1
    phase: str = "creating"                     # creating -> up
    slurm: bool = False                         # up --slurm: munged, slurmctld, slurmd per node (slurm.py)

    @property
    def folder(self) -> str:
        return folder(self.name)

    @property
    def switch(self) -> str:
        return f"{self.name}-switch"

    def node(self, which: str) -> Node:
        """A node by hostname (node1), index (1) or namespace name (<name>-node1)."""
        for i, n in enumerate(self.nodes):
            if which in (n.hostname, n.netns, str(i)):
                return n
        raise KeyError(f"no node {which!r} in cluster {self.name!r}: it has "
                       f"{', '.join(n.hostname for n in self.nodes)}")

    def save(self) -> None:
        os.makedirs(self.folder, exist_ok=True)
        tmp = os.path.join(self.folder, "state.json.tmp")
        with open(tmp, "w") as f:
            json.dump(asdict(self), f, indent=1)
        os.replace(tmp, os.path.join(self.folder, "state.json"))


def folder(name: str) -> str:
    return os.path.join(STATE_ROOT, name)


def plan(name: str, nodes: int, bandwidth: str | None, bits: float | None, ranks_per_node: int) -> ClusterState:
    """The cluster `up` will build (nothing created yet)."""
    if not (1 <= nodes <= 250):
        raise ValueError(f"--nodes must be 1..250, got {nodes}")
    if not name or len(name) > 40 or not all(c.isalnum() or c in "-_" for c in name):
        raise ValueError(f"cluster name {name!r}: use 1-40 letters, digits, - or _")
    base = folder(name)
    return ClusterState(name, [Node(f"node{i}", f"{name}-node{i}", f"{SUBNET}.{i + 1}",
                                    os.path.join(base, "uts", f"node{i}")) for i in range(nodes)],
                        bandwidth, bits, ranks_per_node)


def load(name: str = DEFAULT_NAME) -> ClusterState | None:
    """The recorded cluster `name`, or None when there is no record."""
    path = os.path.join(folder(name), "state.json")
    try:
        with open(path) as f:
            raw = json.load(f)
    except FileNotFoundError:
        return None
    raw["nodes"] = [Node(**n) for n in raw.get("nodes", [])]
    return ClusterState(**raw)


def list_clusters() -> list:
    """Names of the clusters recorded under STATE_ROOT."""
    try:
        return sorted(d for d in os.listdir(STATE_ROOT) if os.path.exists(os.path.join(STATE_ROOT, d, "state.json")))
    except FileNotFoundError:
        return []

"""The launchers of real clusters, across the nodes.

mpirun: MPICH's hydra `mpiexec`, started on node0 with a hostfile of the nodes (node<i>:K, K ranks
per node) and `-launcher ssh -launcher-exec <folder>/node-exec`: hydra calls that script as it would
call ssh (`node-exec -x HOST COMMAND...`) and the script runs COMMAND inside HOST's namespaces. Each
hydra proxy connects back to mpiexec at node0 through the cluster's network. UCX (MPICH's network
module) is held to TCP on eth0 (UCX_OVER_THE_LINKS): the nodes share one kernel, and UCX would
otherwise carry traffic between nodes through shared memory, around the shaped links.

torchrun: one `torchrun --nnodes N --nproc-per-node K --node-rank i --rdzv-backend c10d
--rdzv-endpoint node0:PORT` per node, all at once.

run_parallel runs one command per node at once, each output line prefixed with its node.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import threading

from .nodes import node_argv
from .slurm import client_env
from .state import ClusterState

BIN = os.path.dirname(sys.executable)


def _tool(name: str) -> str:
    path = os.path.join(BIN, name)
    return path if os.path.exists(path) else name


def write_hostfile(state: ClusterState) -> str:
    path = os.path.join(state.folder, "hostfile")
    with open(path, "w") as f:
        f.write("".join(f"{n.hostname}:{state.ranks_per_node}\n" for n in state.nodes))
    return path


def write_node_exec(state: ClusterState) -> str:
    """The ssh stand-in hydra calls: `node-exec [ssh options] HOST COMMAND...`."""
    path = os.path.join(state.folder, "node-exec")
    cases = "".join(f"  {n.hostname}) set -- {shlex.quote(n.netns)} {shlex.quote(n.uts)} \"$@\" ;;\n"
                    for n in state.nodes)
    script = f"""#!/bin/sh
# hydra's ssh launcher calls this as it would call ssh: node-exec -x HOST COMMAND...
# The words after HOST form one shell command (as ssh runs them); they run inside HOST's network
# and UTS namespaces with the node's /etc/hosts (cluster {state.name}).
while [ $# -gt 0 ]; do
  case "$1" in
    -o|-p|-l|-i|-F) shift 2 ;;
    -*) shift ;;
    *) break ;;
  esac
done
host="$1"; shift
case "$host" in
{cases}  *) echo "node-exec: no node $host in cluster {state.name}" >&2; exit 255 ;;
esac
ns="$1"; uts="$2"; shift 2
exec ip netns exec "$ns" nsenter --uts="$uts" -- sh -c "$*"
"""
    with open(path, "w") as f:
        f.write(script)
    os.chmod(path, 0o755)
    return path


# MPICH's network module (UCX) decides that two processes may share memory when they run on the same
# kernel (same boot id), which every node of this cluster does: without these, ranks on different
# nodes would talk through shared memory (about 10 Gbit/s, bypassing the shaped links). Ranks on one
# node still use MPICH's own shared memory (it goes by hydra's nodes); UCX carries only the traffic
# between nodes, over TCP on eth0.
UCX_OVER_THE_LINKS = ["-genv", "UCX_TLS", "tcp,self", "-genv", "UCX_NET_DEVICES", "eth0"]


def mpirun_argv(state: ClusterState, args: list, ranks_per_node: int | None = None) -> list:
    """The mpiexec command line (run it on node0) for K ranks on every node."""
    k = ranks_per_node or state.ranks_per_node
    return [_tool("mpiexec"), "-f", write_hostfile(state), "-launcher", "ssh", "-launcher-exec",
            write_node_exec(state), *UCX_OVER_THE_LINKS, "-n", str(k * len(state.nodes)), "-ppn", str(k), *args]


def torchrun_argv(state: ClusterState, node_rank: int, args: list, port: int = 29500,
                  ranks_per_node: int | None = None) -> list:
    k = ranks_per_node or state.ranks_per_node
    # torchrun's log folders go in the cluster's folder, which `down` removes (by default each torchrun
    # makes a /tmp/torchelastic_* that nothing removes)
    return [_tool("torchrun"), "--nnodes", str(len(state.nodes)), "--nproc-per-node", str(k),
            "--node-rank", str(node_rank), "--rdzv-backend", "c10d", "--rdzv-endpoint",
            f"{state.nodes[0].hostname}:{port}", "--rdzv-id", state.name,
            "--log-dir", os.path.join(state.folder, "torchrun", f"node{node_rank}"), *args]


def _pump(stream, prefix: str, out, lock) -> None:
    for line in iter(stream.readline, ""):
        with lock:
            out.write(f"[{prefix}] {line}")
            out.flush()
    stream.close()


def _kill_all(procs: dict) -> None:
    for q in procs.values():
        if q.poll() is None:
            try:
                os.killpg(q.pid, 9)
            except ProcessLookupError:
                pass
        q.wait()


def run_parallel(state: ClusterState, commands: dict, out=None, timeout: float | None = None) -> dict:
    """Run {node hostname: argv} at once, each inside its node; each node's output lines are written
    to `out` (default stdout) prefixed with [node]. Every command also sees MTD_CLUSTER,
    MTD_NODE_RANK, MTD_NNODES and MTD_RANKS_PER_NODE (and MTD_CLUSTER_TAG, by which `down` finds
    what they started wherever it runs), and SLURM_CONF on a cluster with SLURM. Returns {node: exit code} (-9: killed at
    `timeout`)."""
    out = out or sys.stdout
    lock = threading.Lock()
    procs, pumps = {}, []
    for host, argv in commands.items():
        node = state.node(host)
        env = dict(os.environ, MTD_CLUSTER=state.name, MTD_CLUSTER_TAG=state.name, MTD_NODE_RANK=str(state.nodes.index(node)),
                   MTD_NNODES=str(len(state.nodes)), MTD_RANKS_PER_NODE=str(state.ranks_per_node),
                   **client_env(state))
        p = subprocess.Popen(node_argv(state, node, argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, env=env, start_new_session=True)
        procs[host] = p
        t = threading.Thread(target=_pump, args=(p.stdout, host, out, lock), daemon=True)
        t.start()
        pumps.append(t)
    codes = {}
    try:
        for host, p in procs.items():
            try:
                codes[host] = p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                _kill_all(procs)
                codes[host] = p.wait()
    except BaseException:                 # Ctrl-C: the commands run in sessions of their own, so end them
        _kill_all(procs)
        raise
    for t in pumps:
        t.join(timeout=5)
    return codes

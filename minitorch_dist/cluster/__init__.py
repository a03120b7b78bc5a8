"""A cluster on one machine: N nodes, each a network namespace with its own hostname, joined by
shaped links to a switch, for running the kit under the launchers of real clusters (torchrun,
mpirun, SLURM) across node boundaries. Needs root on Linux; elsewhere use backend="sim" with the same
alpha and beta.

    sudo .venv/bin/python -m minitorch_dist.cluster up --nodes 2 --bandwidth 1gbit
    sudo .venv/bin/python -m minitorch_dist.cluster exec node0 hostname
    sudo .venv/bin/python -m minitorch_dist.cluster up --nodes 2 --slurm    # and SLURM (slurm-wlm, munge)
    sudo .venv/bin/python -m minitorch_dist.cluster exec node0 sbatch --wait examples/cluster/slurm_job.sh
    sudo .venv/bin/python -m minitorch_dist.cluster down

Modules:
    __main__.py     the command line: up [--slurm], status, exec, torchrun, mpirun, bandwidth, down
    preflight.py    ClusterUnavailable: is this machine able (Linux, root, namespaces)? else say what to use
    state.py        the cluster's record under /run/minitorch_dist_cluster/<name>/ (survives a crash)
    nodes.py        namespaces, UTS hostnames, veth links, the switch's bridge, addresses, hosts files;
                    entering a node (node_argv) and removing everything (teardown)
    shaping.py      bandwidth parsing and htb on both ends of every link
    probe.py        stdlib-only TCP probes run inside nodes: echo server, round-trip time, ping-pong bandwidth
    measure.py      runs the probes between nodes: round-trip latency (ping, TCP), the bandwidth fit, incast
    launchers.py    torchrun and mpirun (MPICH hydra) command lines across the nodes: hostfile and the
                    launcher-exec script that enters a node
    slurm.py        SLURM across the nodes: munged and slurmctld on node0, a slurmd per node, the
                    configuration generated into the cluster's folder; SLURM_CONF for clients
"""

from .preflight import ClusterUnavailable, unavailable_reason
from .state import ClusterState, STATE_ROOT, load, list_clusters
from .nodes import bring_up, teardown, node_argv, leftovers
from .shaping import parse_rate

__all__ = ["ClusterUnavailable", "unavailable_reason", "ClusterState", "STATE_ROOT", "load", "list_clusters",
           "bring_up", "teardown", "node_argv", "leftovers", "parse_rate"]

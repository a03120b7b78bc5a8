"""The cluster's command line (root, Linux):

    python -m minitorch_dist.cluster up --nodes N [--bandwidth 1gbit] [--ranks-per-node K] [--slurm] [--name NAME]
    python -m minitorch_dist.cluster status [--no-measure] [--json]
    python -m minitorch_dist.cluster exec NODE|all CMD...        # NODE: node0, node1, ... or its index
    python -m minitorch_dist.cluster exec node0 sbatch --wait JOB.sh   # with --slurm: SLURM_CONF is set
    python -m minitorch_dist.cluster torchrun [--port P] [--no-python] SCRIPT ARGS...  # a torchrun per node
    python -m minitorch_dist.cluster mpirun SCRIPT ARGS...       # MPICH mpiexec from node0, K ranks a node
    python -m minitorch_dist.cluster bandwidth [--from node0] [--to node1]   # --from node0,node2: incast
    python -m minitorch_dist.cluster down [--name NAME | --all]  # idempotent, also after a crash

NAME (default mtd, or $MTD_CLUSTER) lets several clusters coexist (tests use unique names).
`up --slurm` also starts munged, slurmctld (on node0) and a slurmd per node (slurm.py); `down` ends them.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys

from . import launchers, measure, nodes, preflight, shaping, slurm, state as state_mod
from .preflight import ClusterUnavailable


def _name(opts) -> str:
    return opts.name or os.environ.get("MTD_CLUSTER") or state_mod.DEFAULT_NAME


def _loaded(opts):
    st = state_mod.load(_name(opts))
    if st is None:
        others = state_mod.list_clusters()
        raise SystemExit(f"no cluster {_name(opts)!r} recorded under {state_mod.STATE_ROOT}"
                         + (f" (there is {', '.join(others)}: pass --name)" if others else "")
                         + ": start one with `python -m minitorch_dist.cluster up --nodes 2`")
    if st.phase != "up":
        raise SystemExit(f"cluster {st.name!r} is {st.phase!r} (a crash during `up`?): run `down --name {st.name}`")
    return st


def status_report(st, measure_rtt: bool = True) -> dict:
    report = {"name": st.name, "phase": st.phase, "ranks_per_node": st.ranks_per_node,
              "bandwidth": st.bandwidth, "bits_per_second": st.bits_per_second,
              "nodes": [{"hostname": n.hostname, "netns": n.netns, "address": n.address} for n in st.nodes],
              "shaping": [{"where": w, "qdisc": q} for w, q in shaping.configured(st)] if st.bits_per_second else [],
              "slurm": (slurm.node_states(st) or "not answering") if st.slurm and st.phase == "up" else None}
    if measure_rtt and len(st.nodes) >= 2 and st.phase == "up":
        report["tcp_rtt"] = measure.tcp_rtt(st)
        report["ping_rtt_s"] = measure.ping_rtt(st)
    return report


def _print_status(r: dict) -> None:
    print(f"cluster {r['name']}: {r['phase']}, {len(r['nodes'])} nodes, {r['ranks_per_node']} ranks per node, "
          f"links {r['bandwidth'] or 'unshaped'}"
          + (f" ({r['bits_per_second'] / 1e6:g} Mbit/s each way, htb; no added delay)" if r['bits_per_second'] else ""))
    for n in r["nodes"]:
        print(f"  {n['hostname']:8s} {n['address']:12s} netns {n['netns']}")
    for s in r["shaping"]:
        print(f"  {s['where']}: {s['qdisc']}")
    if r.get("slurm"):
        states = r["slurm"] if isinstance(r["slurm"], str) else ", ".join(f"{k} {v}" for k, v in r["slurm"].items())
        print(f"  SLURM: slurmctld on {r['nodes'][0]['hostname']}, slurmd on every node: {states}")
    if "tcp_rtt" in r:
        t = r["tcp_rtt"]
        print(f"  measured round trip node0 -> node1: TCP 1 byte median {t['median_s'] * 1e6:.0f} us "
              f"(min {t['min_s'] * 1e6:.0f} us, {t['count']} trips)"
              + (f"; ping {r['ping_rtt_s'] * 1e6:.0f} us" if r.get("ping_rtt_s") else "; no ping on this machine"))


def _terminated(signum, frame):
    raise SystemExit(128 + signum)      # unwinds through run_parallel, which ends its commands


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m minitorch_dist.cluster",
                                     description="An emulated cluster on this machine (root, Linux).")
    parser.add_argument("--name", default=None, help="cluster name (default mtd, or $MTD_CLUSTER)")
    sub = parser.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="create the nodes, links and switch")
    up.add_argument("--nodes", type=int, required=True)
    up.add_argument("--bandwidth", default=None, help="each link, both directions, e.g. 1gbit, 100mbit (default unshaped)")
    up.add_argument("--ranks-per-node", type=int, default=1)
    up.add_argument("--slurm", action="store_true",
                    help="also start SLURM: munged and slurmctld on node0, a slurmd per node (slurm-wlm, munge)")
    st = sub.add_parser("status", help="nodes, shaping and a measured round trip")
    st.add_argument("--no-measure", action="store_true")
    st.add_argument("--json", action="store_true")
    ex = sub.add_parser("exec", help="run a command on a node, or on all at once")
    ex.add_argument("node")
    ex.add_argument("command", nargs=argparse.REMAINDER)
    tr = sub.add_parser("torchrun", help="one torchrun per node (c10d rendezvous at node0)")
    tr.add_argument("--port", type=int, default=29500)
    tr.add_argument("--ranks-per-node", type=int, default=None)
    tr.add_argument("--no-python", action="store_true", help="torchrun --no-python: run an executable, not a script")
    tr.add_argument("args", nargs=argparse.REMAINDER)
    mp = sub.add_parser("mpirun", help="MPICH mpiexec from node0 over every node")
    mp.add_argument("--ranks-per-node", type=int, default=None)
    mp.add_argument("args", nargs=argparse.REMAINDER)
    bw = sub.add_parser("bandwidth", help="ping-pong bandwidth and latency fit between two nodes")
    bw.add_argument("--from", dest="a", default="node0", help="a node, or several (node0,node2: incast)")
    bw.add_argument("--to", dest="b", default="node1")
    bw.add_argument("--bytes", type=int, default=None, help="incast: bytes each sender streams")
    dn = sub.add_parser("down", help="remove everything (idempotent)")
    dn.add_argument("--all", action="store_true", help="every recorded cluster")
    opts = parser.parse_args(argv)
    if argv is None:     # the command itself: a SIGTERM (timeout, kill) ends the node commands it started
        signal.signal(signal.SIGTERM, _terminated)
    for attr in ("command", "args"):          # `exec node0 -- cmd` and `exec node0 cmd` both work
        rest = getattr(opts, attr, None)
        if rest and rest[0] == "--":
            setattr(opts, attr, rest[1:])

    try:
        if opts.cmd == "up":
            bits = shaping.parse_rate(opts.bandwidth)
            preflight.require(bits)
            if opts.slurm and slurm.unavailable_reason():
                raise ClusterUnavailable(slurm.unavailable_reason())
            plan = state_mod.plan(_name(opts), opts.nodes, opts.bandwidth, bits, opts.ranks_per_node)
            nodes.bring_up(plan)
            if opts.slurm:
                try:
                    slurm.start(plan)
                except BaseException:
                    nodes.teardown(plan.name)
                    raise
            _print_status(status_report(plan, measure_rtt=False))
            print(f"next: python -m minitorch_dist.cluster {'--name ' + plan.name + ' ' if plan.name != state_mod.DEFAULT_NAME else ''}"
                  + ("exec node0 sinfo" if plan.slurm else "exec all hostname"))
            return 0
        if opts.cmd == "down":
            if os.geteuid() != 0:
                preflight.require()
            names = state_mod.list_clusters() if opts.all else [_name(opts)]
            for name in names:
                removed = nodes.teardown(name)
                print(f"cluster {name}: " + (f"removed {len(removed)} things ({', '.join(removed)})"
                                             if removed else "nothing to remove"))
            return 0
        if os.geteuid() != 0:
            preflight.require()
        st_ = _loaded(opts)
        if opts.cmd == "status":
            report = status_report(st_, measure_rtt=not opts.no_measure)
            print(json.dumps(report, indent=1)) if opts.json else _print_status(report)
            return 0
        if opts.cmd == "exec":
            if not opts.command:
                raise SystemExit("exec NODE|all CMD...: give a command")
            if opts.node == "all":
                codes = launchers.run_parallel(st_, {n.hostname: opts.command for n in st_.nodes})
                return max(codes.values(), key=abs)
            node = st_.node(opts.node)
            env = dict(os.environ, MTD_CLUSTER=st_.name, MTD_CLUSTER_TAG=st_.name, MTD_NODE_RANK=str(st_.nodes.index(node)),
                       MTD_NNODES=str(len(st_.nodes)), MTD_RANKS_PER_NODE=str(st_.ranks_per_node),
                       **slurm.client_env(st_))
            argv_ = nodes.node_argv(st_, node, opts.command)
            os.execvpe(argv_[0], argv_, env)
        if opts.cmd == "torchrun":
            args = (["--no-python"] if opts.no_python else []) + opts.args
            cmds = {n.hostname: launchers.torchrun_argv(st_, i, args, opts.port, opts.ranks_per_node)
                    for i, n in enumerate(st_.nodes)}
            print(f"on node<i>: {' '.join(cmds[st_.nodes[0].hostname]).replace('--node-rank 0', '--node-rank <i>')}",
                  flush=True)
            codes = launchers.run_parallel(st_, cmds)
            return max(codes.values(), key=abs)
        if opts.cmd == "mpirun":
            argv_ = launchers.mpirun_argv(st_, opts.args, opts.ranks_per_node)
            print(f"on node0: {' '.join(argv_)}", flush=True)
            return launchers.run_parallel(st_, {st_.nodes[0].hostname: argv_})[st_.nodes[0].hostname]
        if opts.cmd == "bandwidth" and "," in opts.a:
            senders = [x for x in opts.a.split(",") if x]
            nbytes = opts.bytes or int((st_.bits_per_second or 8e9) / 8 * 0.5 / len(senders))
            r = measure.incast(st_, senders, opts.b, nbytes)
            conf = f" (configured {st_.bits_per_second / 1e6:g} Mbit/s a link)" if st_.bits_per_second else " (unshaped)"
            print(f"{' + '.join(senders)} -> {opts.b} at once: {r['bits_per_second'] / 1e6:.1f} Mbit/s in all{conf}")
            return 0
        if opts.cmd == "bandwidth":
            r = measure.pingpong(st_, opts.a, opts.b)
            print(json.dumps(r, indent=1))
            if r.get("bits_per_second"):
                conf = f" (configured {st_.bits_per_second / 1e6:g} Mbit/s)" if st_.bits_per_second else " (unshaped)"
                print(f"{opts.a} <-> {opts.b}: {r['bits_per_second'] / 1e6:.1f} Mbit/s{conf} "
                      f"(the slope of one-way time over {r['sizes'][0]}..{r['sizes'][-1]} bytes; "
                      f"`status` measures the latency)")
            return 0
    except ClusterUnavailable as e:
        print(f"minitorch_dist.cluster: {e}", file=sys.stderr)
        return 2
    except (ValueError, KeyError, RuntimeError) as e:
        print(f"minitorch_dist.cluster: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

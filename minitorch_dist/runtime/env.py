"""Where does this process run? Rank code started by an outside launcher finds its rank here.

Recognised, in this order:
- `python -m minitorch_dist.run` and `torchrun`: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT;
- `mpirun`/`mpiexec` (MPICH, Open MPI, Intel MPI, PMIx): PMI_RANK/PMI_SIZE, OMPI_COMM_WORLD_*, PMIX_RANK;
- SLURM `srun`: SLURM_PROCID, SLURM_STEP_NUM_TASKS (a batch script itself is not a rank); rank 0's
  host from MASTER_ADDR, else the step's first node (SLURM_STEP_NODELIST).
A process started by none of them is the caller of a local job: launch() starts the ranks.
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass

HOSTED_STORE_VARS = ("MINITORCH_DIST_STORE_HOSTED", "TORCHELASTIC_USE_AGENT_STORE")


@dataclass(frozen=True)
class ExternalJob:
    """This process is one rank of a job started outside launch()."""

    launcher: str            # "minitorch_dist.run", "torchrun", "mpirun", "srun"
    rank: int
    world_size: int
    master_addr: str = "127.0.0.1"
    master_port: int = 0     # 0 for mpirun: the ranks agree on a port themselves

    @property
    def store_hosted(self) -> bool:
        """True when the launcher already hosts the TCPStore (rank 0 must not)."""
        return any(os.environ.get(v, "").lower() in ("1", "true") for v in HOSTED_STORE_VARS)


def _int(name: str) -> int | None:
    value = os.environ.get(name)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def mpi_rank_and_size() -> tuple[int, int] | None:
    """(rank, size) from the variables an MPI launcher sets, without importing mpi4py."""
    for rank_var, size_var in (("PMI_RANK", "PMI_SIZE"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
                               ("PMIX_RANK", "PMIX_SIZE"), ("MPI_LOCALRANKID", "MPI_LOCALNRANKS")):
        rank, size = _int(rank_var), _int(size_var)
        if rank is not None and size is not None:
            return rank, size
    if _int("PMIX_RANK") is not None:   # Open MPI 5 sets PMIX_RANK and OMPI_COMM_WORLD_SIZE
        return _int("PMIX_RANK"), _int("OMPI_COMM_WORLD_SIZE") or 1
    return None


def oversubscribed() -> bool:
    """True when this node runs more MPI ranks than this process may use cores (read from the
    launcher's variables): then a rank that busy-waits takes the CPU from the rank it waits for."""
    local = _int("MPI_LOCALNRANKS") or _int("OMPI_COMM_WORLD_LOCAL_SIZE")
    if local is None:
        return False
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:              # macOS, Windows
        cores = os.cpu_count() or 1
    return local > cores


def slurm_hostnames(text: str) -> list[str]:
    """SLURM's compressed host list expanded, as `scontrol show hostnames` does:
    "node[0-2,5],gpu01" -> node0 node1 node2 node5 gpu01 (zero padding kept: n[08-10] -> n08 n09 n10)."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text + ","):
        depth += (c == "[") - (c == "]")
        if c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    hosts = []
    for part in filter(None, (p.strip() for p in parts)):
        m = re.match(r"^(.*?)\[([^\]]*)\](.*)$", part)
        if m is None:
            hosts.append(part)
            continue
        prefix, ranges, rest = m.groups()
        tails = slurm_hostnames(rest) if "[" in rest else [rest]
        for r in ranges.split(","):
            lo, _, hi = r.partition("-")
            hosts += [f"{prefix}{k:0{len(lo)}d}{tail}" for k in range(int(lo), int(hi or lo) + 1) for tail in tails]
    return hosts


def slurm_master() -> tuple[str, int]:
    """MASTER_ADDR/MASTER_PORT for srun. MASTER_ADDR from the environment (the README's recipe: the
    job's first node), else the job step's first node, where srun puts rank 0 (a step on one node:
    127.0.0.1). A MASTER_ADDR that names a node of the job this step does not run on (`srun -w node1`
    in a job that begins at node0) is refused at once: rank 0 listens on the step's first node, and
    every other rank would wait 5 minutes for a node where no rank runs."""
    step = slurm_hostnames(os.environ.get("SLURM_STEP_NODELIST", ""))
    nodes = _int("SLURM_STEP_NUM_NODES") or _int("SLURM_NNODES") or _int("SLURM_JOB_NUM_NODES") or 1
    addr = os.environ.get("MASTER_ADDR")
    if addr is None:
        if nodes > 1 and not step:
            raise RuntimeError(
                "srun across several nodes: set MASTER_ADDR to the first node's hostname, e.g. "
                "export MASTER_ADDR=$(scontrol show hostnames $SLURM_JOB_NODELIST | head -n1)")
        addr = step[0] if nodes > 1 else "127.0.0.1"
    elif step and addr not in step and addr in slurm_hostnames(os.environ.get("SLURM_JOB_NODELIST", "")):
        raise RuntimeError(
            f"MASTER_ADDR={addr} is a node of this job but not of this job step, which runs on "
            f"{','.join(step)}: rank 0 runs on {step[0]}. For a step on part of the job's nodes, "
            f"export MASTER_ADDR=$(scontrol show hostnames \"$SLURM_STEP_NODELIST\" | head -n1) inside it, "
            f"or leave MASTER_ADDR unset (srun's first node is taken)")
    port = _int("MASTER_PORT")
    if port is None:   # one port per job step, so two jobs on a node do not collide
        job, step_id = _int("SLURM_JOB_ID") or 0, _int("SLURM_STEP_ID") or 0
        port = 20000 + (job * 31 + step_id) % 20000
    return addr, port


def detect_external() -> ExternalJob | None:
    """The outside job this process belongs to, or None (then launch() starts local ranks)."""
    rank, size = _int("RANK"), _int("WORLD_SIZE")
    if rank is not None and size is not None and "MASTER_ADDR" in os.environ:
        launcher = "minitorch_dist.run" if "MINITORCH_DIST_RUN" in os.environ else "torchrun"
        port = _int("MASTER_PORT")
        if not port:
            raise RuntimeError(f"{launcher} set MASTER_PORT={os.environ.get('MASTER_PORT')!r}: give a real "
                               f"port (e.g. torchrun --master-port 29500), not 0")
        return ExternalJob(launcher, rank, size, os.environ["MASTER_ADDR"], port)
    mpi = mpi_rank_and_size()
    if mpi is not None:
        return ExternalJob("mpirun", mpi[0], mpi[1])
    if "SLURM_STEP_ID" in os.environ and _int("SLURM_PROCID") is not None:
        size = _int("SLURM_STEP_NUM_TASKS") or _int("SLURM_NTASKS") or 1
        if size > 1:
            addr, port = slurm_master()
            return ExternalJob("srun", _int("SLURM_PROCID"), size, addr, port)
    return None


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (prefer binding port 0 where you can)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


DEFAULT_DEADLINE = 60.0      # seconds a blocking Group call may wait before its deadlock report


def default_deadline() -> float | None:
    """MINITORCH_DIST_DEADLINE (seconds; 'none' for no limit), else 60 s."""
    value = os.environ.get("MINITORCH_DIST_DEADLINE")
    if value is None:
        return DEFAULT_DEADLINE
    return None if value.lower() in ("none", "inf", "0") else float(value)

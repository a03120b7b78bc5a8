"""Fair share: each grading's processes in cgroups of their own, so a neighbour keeps its time.

    share = FairShare.create("grading name")     # grading process, as root
    share.join_grading(zygote_pid)               # the zygote and all it forks: one CPU share
    box.cgroups = share.sandbox_procs            # Sandbox.enter (still root) joins these: memory limit
    share.remove()                               # at the end, once every process is gone

Layout (cgroup v1, the controllers this machine mounts one per folder):

    cpu/<own>/minitorch-<pid>-<id>/              cpu.shares 1024: the grading weighs as one process
                                                 against every other grading, however many it runs
    memory/<own>/minitorch-<pid>-<id>/sandbox/   memory.limit_in_bytes: the sandboxed processes
                                                 (rank hosts, ranks, mpiexec) of the grading together

`<own>` is the cgroup this process is in (a container puts us below the root). The sandboxed
processes cannot leave: moving a process needs write access to another cgroup.procs, which is
root's. Where the folders cannot be made (no root, a read-only /sys/fs/cgroup in a container, a
cgroup v2 machine whose controllers are not delegated here) the layer says why and nothing else
changes: the rlimits still bound each process.
"""

from __future__ import annotations

import os
import secrets

ROOT = "/sys/fs/cgroup"
CPU_SHARES = 1024                    # every grading the same weight
MEMORY_SHARE = 0.6                   # of the machine's memory, for one grading's sandboxed processes
PREFIX = "minitorch-"


def _own_path(controller: str) -> str | None:
    """This process's cgroup (v1) for `controller`, e.g. "/" or "/process_api/abc"."""
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, names, path = line.rstrip("\n").split(":", 2)
                if controller in names.split(","):
                    return path
    except OSError:
        return None
    return None


def machine_memory() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    raise OSError("no MemTotal in /proc/meminfo")


def _write(path: str, value) -> None:
    with open(path, "w") as f:
        f.write(str(value))


def sweep_stale(parent: str) -> None:
    """Remove empty cgroups of gradings whose process is gone (a grader that crashed)."""
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for name in names:
        if not name.startswith(PREFIX):
            continue
        pid = name[len(PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            for sub in ("sandbox", ""):
                try:
                    os.rmdir(os.path.join(parent, name, sub))
                except OSError:
                    pass


class FairShare:
    """One grading's cgroups (or none, with the reason in `layer`)."""

    def __init__(self, folders: list[str], sandbox_procs: list[str], grading_procs: list[str], layer: str):
        self.folders, self.sandbox_procs, self.grading_procs, self.layer = folders, sandbox_procs, grading_procs, layer

    @classmethod
    def create(cls, memory: int | None = None) -> "FairShare":
        if os.geteuid() != 0:
            return cls([], [], [], "unavailable: needs root")
        cpu_own, mem_own = _own_path("cpu"), _own_path("memory")
        if cpu_own is None or mem_own is None or not os.path.isdir(os.path.join(ROOT, "cpu")):
            return cls([], [], [], "unavailable: no cgroup v1 cpu and memory controllers here (a cgroup v2-only "
                                   "machine is not supported yet); each process keeps its rlimits")
        name = f"{PREFIX}{os.getpid()}-{secrets.token_hex(3)}"
        cpu_parent = os.path.join(ROOT, "cpu", cpu_own.lstrip("/"))
        mem_parent = os.path.join(ROOT, "memory", mem_own.lstrip("/"))
        cpu = os.path.join(cpu_parent, name)
        grading_mem = os.path.join(mem_parent, name)
        sandbox_mem = os.path.join(grading_mem, "sandbox")
        share = cls([], [], [], "")
        try:
            sweep_stale(cpu_parent)
            sweep_stale(mem_parent)
            memory = memory or int(machine_memory() * MEMORY_SHARE)
            for folder in (cpu, grading_mem, sandbox_mem):
                os.mkdir(folder, 0o755)
                share.folders.append(folder)
            _write(os.path.join(cpu, "cpu.shares"), CPU_SHARES)
            _write(os.path.join(sandbox_mem, "memory.limit_in_bytes"), memory)
        except OSError as exc:
            share.remove()
            return cls([], [], [], f"unavailable: the grading's cgroups could not be made ({exc})")
        share.grading_procs = [os.path.join(cpu, "cgroup.procs")]
        share.sandbox_procs = [os.path.join(cpu, "cgroup.procs"), os.path.join(sandbox_mem, "cgroup.procs")]
        share.layer = (f"active: the grading's processes share one CPU weight ({CPU_SHARES} cpu.shares, as much as "
                       f"any other grading however many processes it starts); its sandboxed processes "
                       f"together are limited to {memory >> 20} MiB of memory (cgroup v1)")
        return share

    def join_grading(self, pid: int) -> None:
        """Put `pid` (a zygote or a test process, before it forks anything) in the grading's CPU share."""
        for procs in self.grading_procs:
            try:
                _write(procs, pid)
            except OSError:
                pass                     # it exited already

    def pids(self) -> list[int]:
        """Every process still in the grading's cgroups (the kernel's list, not a report from inside)."""
        found = set()
        for folder in self.folders:
            try:
                with open(os.path.join(folder, "cgroup.procs")) as f:
                    found.update(int(line) for line in f if line.strip())
            except OSError:
                continue
        return sorted(found)

    def remove(self) -> None:
        """Remove the folders (deepest first); a folder with a process still in it stays."""
        for folder in reversed(self.folders):
            try:
                os.rmdir(folder)
            except OSError:
                pass
        self.folders = []

"""Fork server: import torch, pytest and the runtime once, then fork one child per graded test.

    python -m autograder.zygote        (started by autograder.runner, in the kit copy)

Protocol: one JSON job per line on stdin, one JSON reply per line on stdout.
    job   {"args": [pytest args], "env": {...}, "cwd": dir, "output": file, "limit": seconds,
           "sandbox": {...} | null, "scratch": dir | null}
    reply {"status": "exited" | "timeout", "code": int | null, "wall": s, "leftover": n, "host_output": text,
           "memory_mib": the test process's peak memory above the zygote's (the kernel's count)}
The first line written is {"ready": pid, "network": layer text}. The line "quit" (or the end of input)
ends the zygote.

The zygote runs in the grader's copy of the kit, which holds the stubs, never the submission:
it and the pytest children it forks are trusted and never import or run student code. For a
job with a sandbox it first forks the test's rank host (autograder.rank_host: the uid, rlimits,
the student's kit copy), then the pytest child, whose launches go through that host. It never
runs a torch op (forking after OpenMP has started is unsafe); each pytest child does:
os.setsid(), stdout and stderr to the job's output file, pytest.main(args). At the end of a
job every process of the sandbox uid is killed; the zygote is also a child subreaper, so
whatever a test leaves behind comes back to it and is killed before the reply is sent.
With AUTOGRADER_NETNS=1 the zygote first moves into a network namespace of its own.
"""

from __future__ import annotations

import gc
import glob
import importlib
import json
import os
import sys
import traceback


def student_modules(root: str = ".") -> set[str]:
    """Module names of every homework's editable files (assignments/*/homework.json)."""
    names = set()
    for path in glob.glob(os.path.join(root, "assignments", "*", "homework.json")):
        with open(path) as f:
            for rel in json.load(f)["editable"]:
                names.add(rel[:-len(".py")].replace("/", "."))
    return names


_BASELINE_KIB = 0        # the zygote's own peak memory once warm: what every test process starts from
_PARENT = 0              # the grader that started this zygote (AUTOGRADER_PARENT)


def preload_site_packages() -> None:
    """What every zygote imports from site-packages, never from a kit (also the zygotes' mother's
    preload, autograder/zygote_mother.py): psutil, pytest, torch, torch.distributed, mpi4py's package."""
    import psutil  # noqa: F401
    import pytest  # noqa: F401
    import torch  # noqa: F401
    import torch.distributed  # noqa: F401
    try:
        import mpi4py  # noqa: F401   (the package only: MPI itself is initialized by mpiexec ranks)
    except ImportError:
        pass


PRELOAD_VAR = "AUTOGRADER_PRELOAD"     # the homework's preload, comma-separated (set by autograder.session)


def import_preload(missing_ok: bool = False) -> None:
    """Import what the homework's manifest lists under "preload" (PRELOAD_VAR): hw2's torch._dynamo,
    which the first torch optimizer imports (4-7 s per rank when not inherited; 2.5 s per zygote when
    preloaded, so not for homeworks that build no optimizer). The zygotes' mother imports the
    site-packages part of it (zygote_mother.site_preload, missing_ok: the zygote's own import then says
    what is missing), so a zygote forked from it finds those imported already."""
    for name in filter(None, os.environ.get(PRELOAD_VAR, "").split(",")):
        try:
            importlib.import_module(name)
        except ImportError:
            if not missing_ok:
                raise


def _preload() -> None:
    preload_site_packages()
    import_preload()
    preload_kit()


def preload_kit() -> None:
    """What a zygote imports from its kit copy, beyond its mother's imports."""
    import autograder.plugin  # noqa: F401
    import minitorch_dist.runtime  # noqa: F401
    # the homeworks' shared rank harness, which every rank's payload imports: the rank hosts forked
    # from here, and every rank and sim engine they fork, inherit it (64 sim ranks importing it took
    # 0.73 s, 0.30 s with it loaded in their parent); none of it imports a student's file (below)
    import assignments.common.case_suites  # noqa: F401
    import assignments.common.rank_runs  # noqa: F401
    leaked = sorted(student_modules() & set(sys.modules))
    assert not leaked, f"the zygote must not import student modules, but imported {leaked}"


def _child(job: dict, zygote: int) -> None:
    """In the forked child: run pytest for one job, then _exit. Never returns."""
    code = 70
    try:
        from autograder.isolate import die_with_parent
        die_with_parent(zygote)
        os.setsid()
        out = os.open(job["output"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(out)
        os.close(null)
        sys.stdin = open(0, closefd=False)
        sys.stdout = open(1, "w", buffering=1, closefd=False, errors="replace")
        sys.stderr = open(2, "w", buffering=1, closefd=False, errors="replace")
        os.environ.update(job["env"])
        os.chdir(job["cwd"])
        import pytest
        code = int(pytest.main(job["args"]))
    except BaseException:  # noqa: BLE001 - whatever happens, report it in the output and exit
        traceback.print_exc()
    finally:
        try:
            from minitorch_dist import shutdown
            shutdown()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def run_job(job: dict) -> dict:
    from autograder import isolate, rank_host
    box = rank_host.box_from_spec(job["sandbox"]) if job.get("sandbox") else None
    host = None
    if box is not None:
        host = rank_host.fork_host(box, job["scratch"])
        job["env"] = {**job["env"], **rank_host.host_env(job["scratch"])}
    me = os.getpid()
    pid = os.fork()
    if pid == 0:
        _child(job, me)
    usage: dict = {}
    # a grader killed meanwhile (this zygote orphaned) ends the test now, not at its limit; between
    # jobs the zygote ends at the end of its input
    status, code, wall = isolate.wait_limited(pid, float(job["limit"]), usage=usage,
                                              abandoned=lambda: os.getppid() != _PARENT)
    leftover = 0
    if box is not None:
        leftover = max(0, box.kill_all() - 1)            # every process of the uid but the host itself
    leftover += isolate.reap_children()
    reply = {"status": status, "code": code, "wall": round(wall, 3), "leftover": leftover,
             "memory_mib": round(max(0, usage.get("maxrss_kib", 0) - _BASELINE_KIB) / 1024, 1)}
    if host is not None:
        reply["host_output"] = rank_host.output_tail(job["scratch"])
    return reply


MADV_HUGEPAGE, MADV_COLLAPSE = 14, 25         # Linux's madvise advice numbers (every architecture)
HUGE = 2 << 20                                # a transparent huge page (x86-64, arm64 with 4 KiB pages)


def settle() -> None:
    """Once warm: what this process imported moved out of the collector's reach, its heap in huge pages.

    Everything imported so far lives as long as the process: frozen, a forked test process's
    collections (pytest's own at exit among them) no longer walk, and so copy, the whole heap (0.5 s
    less per test function measured on hw5's GPipe tests). The zygotes' mother (zygote_mother.py)
    settles once it has imported torch, and each zygote again after its own imports: a zygote then
    collects only what it imported itself (0.1 s less) and re-collapses only the huge pages its
    imports wrote to (benchmarks/fork_bench.py --zygotes)."""
    gc.collect()
    gc.freeze()
    huge_pages()


def huge_pages() -> int:
    """Back the zygote's heap (its anonymous mappings of 2 MiB or more) with transparent huge pages;
    the bytes the kernel collapsed.

    Every job, rank host, rank and sim engine of a grading is forked from this process (or from a fork
    of it), and a fork copies the parent's page table: one entry per 4 KiB page of its ~150 MiB heap
    (torch, pytest, the runtime), ~10 ms per fork+exit. With the heap in 2 MiB pages a fork copies one
    entry per huge page: 4 ms (measured here, benchmarks/fork_bench.py). A page a child writes to is
    still copied 4 KiB at a time (the kernel splits the huge mapping in the child). MADV_COLLAPSE
    (Linux 6.1+) does it at once, at 30-300 ms of CPU; the heap grows by the unused 4 KiB pages of the
    huge pages it makes (~1 MiB here). Where the kernel lacks it or has transparent huge pages off,
    madvise fails and nothing changes."""
    import ctypes
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        madvise = libc.madvise
        madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        with open("/proc/self/maps") as f:
            maps = f.read().splitlines()
    except (OSError, AttributeError):
        return 0
    collapsed = 0
    for line in maps:
        fields = line.split()
        if not fields[1].startswith("rw") or (len(fields) > 5 and fields[5] != "[heap]"):
            continue                        # only writable anonymous mappings and the brk heap
        low, high = (int(x, 16) for x in fields[0].split("-"))
        start, end = (low + HUGE - 1) & ~(HUGE - 1), high & ~(HUGE - 1)
        if end - start >= HUGE:
            madvise(start, end - start, MADV_HUGEPAGE)
            if madvise(start, end - start, MADV_COLLAPSE) == 0:
                collapsed += end - start
    return collapsed


def main() -> None:
    sys.stdout = sys.stderr                 # fd 1 is the reply channel; stray prints go to stderr
    global _PARENT
    _PARENT = int(os.environ.get("AUTOGRADER_PARENT", os.getppid()))
    if os.getppid() != _PARENT:             # the grader is gone already
        return
    network = "unavailable: not asked for"
    if os.environ.get("AUTOGRADER_NETNS") == "1":
        from autograder.sandbox import isolate_network
        network = isolate_network()
        if network.startswith("active"):     # one test at a time in it: whole-namespace counts are its own
            os.environ["MINITORCH_DIST_PRIVATE_NETNS"] = "1"
    _preload()
    settle()
    global _BASELINE_KIB
    import resource
    _BASELINE_KIB = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    from autograder import isolate
    isolate.become_subreaper()
    os.write(1, (json.dumps({"ready": os.getpid(), "network": network}) + "\n").encode())
    for line in sys.stdin.buffer:
        if line.strip() == b'"quit"':       # the grader closes: ends even while a fork of it holds this pipe
            return
        try:
            reply = run_job(json.loads(line))
        except Exception as exc:  # noqa: BLE001
            reply = {"status": "error", "code": None, "wall": 0.0, "leftover": 0,
                     "error": f"{type(exc).__name__}: {exc}"}
        if reply["status"] == "abandoned":    # the test and the uid's processes are killed; nobody reads on
            return
        os.write(1, (json.dumps(reply) + "\n").encode())


if __name__ == "__main__":
    main()

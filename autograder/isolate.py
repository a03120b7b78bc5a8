"""Keep graded code on a leash: process trees, wall-clock limits, and a sweep for escapees.

Every graded test runs in its own session (os.setsid). Its rank workers call setpgrp and
mpiexec starts a new session, so a process group alone does not hold them all. On expiry
(or when a test ends) the whole tree is collected with psutil *before* anything is killed
(a dead parent's children are re-parented and no longer found from it), then the test's
process group is killed and every collected process is killed one by one. The processes
that orphaned themselves anyway (double fork) come back to the grader, which is a child
subreaper, and are killed too. Last line of defence: each grading run puts a token in the
environment of everything it starts; `sweep(token)` kills whatever still carries it.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time

import psutil

TOKEN_VAR = "MINITORCH_AUTOGRADER_RUN"


def become_subreaper() -> bool:
    """Linux: orphans of our descendants are re-parented to us (PR_SET_CHILD_SUBREAPER)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes
        return ctypes.CDLL("libc.so.6", use_errno=True).prctl(36, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def die_with_parent(parent: int) -> None:
    """Linux: the kernel SIGKILLs this process when `parent`, the process that forked it, dies (and it
    exits now if that already happened). A zygote or test process then never outlives a grader that
    was killed, and with it go the rank hosts (which die with the zygote, sandbox.py)."""
    from minitorch_dist.runtime.launching.isolation import die_with_parent as kernel_kills_me_with_my_parent
    kernel_kills_me_with_my_parent()                 # what each rank process does (PR_SET_PDEATHSIG)
    if os.getppid() != parent:
        os._exit(70)


def tree(pid: int) -> list[psutil.Process]:
    """`pid` and all its live descendants (empty if `pid` is gone)."""
    try:
        root = psutil.Process(pid)
        return [root] + root.children(recursive=True)
    except psutil.Error:
        return []


def kill_processes(procs: list[psutil.Process], pgid: int | None = None) -> None:
    """SIGKILL a process group (if given) and then each process of `procs`."""
    if pgid is not None:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except OSError:
            pass
    for proc in procs:
        try:
            proc.kill()
        except psutil.Error:
            pass


def kill_tree(pid: int) -> int:
    """Kill `pid`, its process group and every descendant; returns how many were found."""
    procs = tree(pid)                      # collect first: killing re-parents the children
    for proc in procs:
        try:
            proc.suspend()                 # no more forks while we kill
        except psutil.Error:
            pass
    kill_processes(procs, pgid=pid)
    return len(procs)


def reap_children(exclude: tuple[int, ...] = ()) -> int:
    """Kill every live descendant of this process except `exclude`; reap the dead ones."""
    me = psutil.Process()
    found = [p for p in me.children(recursive=True) if p.pid not in exclude]
    kill_processes(found)
    reap_zombies()
    return len(found)


def reap_zombies() -> None:
    """waitpid() every child that has exited (we may be a subreaper: orphans come to us)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def carriers(token: str, var: str = TOKEN_VAR) -> list[psutil.Process]:
    """Live processes whose environment holds var=token (this user's, not this one)."""
    found = []
    needle = f"{var}={token}".encode()
    me = os.getpid()
    for pid in psutil.pids():
        if pid == me:
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    proc = psutil.Process(pid)
                    if proc.status() != psutil.STATUS_ZOMBIE:
                        found.append(proc)
        except (OSError, psutil.Error):
            continue
    return found


def sweep(token: str, wait: float = 2.0) -> list[int]:
    """Kill every process that still carries `token`; returns the pids that were found."""
    if not os.path.isdir("/proc"):
        return []
    found = carriers(token)
    kill_processes(found)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and carriers(token):
        time.sleep(0.05)
    reap_zombies()
    return [p.pid for p in found]


def wait_limited(pid: int, limit: float, poll: float = 0.02, usage: dict | None = None,
                 abandoned=None) -> tuple[str, int | None, float]:
    """Wait for child `pid` at most `limit` s: ("exited", returncode, wall) or ("timeout", None, wall);
    ("abandoned", None, wall) as soon as `abandoned()` says so (the caller's own caller is gone).

    On timeout the child's whole tree is killed and the child reaped. The returncode is
    negative for a signal, as in subprocess. `usage`, if given, gets "maxrss_kib": the child's
    peak resident memory as the kernel counted it. Where the kernel has pidfds the wait ends when
    the child does (`abandoned` asked every 0.25 s); elsewhere it polls every `poll` s.
    """
    start = time.monotonic()
    try:
        ended = [os.pidfd_open(pid)]            # readable once the child has ended
        poll = 0.25
    except (AttributeError, OSError):
        ended = []                              # select() on nothing: a sleep of `poll`
    try:
        while True:
            done, status, rusage = os.wait4(pid, os.WNOHANG)
            if done == pid:
                if usage is not None:
                    usage["maxrss_kib"] = rusage.ru_maxrss
                return "exited", os.waitstatus_to_exitcode(status), time.monotonic() - start
            if abandoned is not None and abandoned():
                kill_tree(pid)
                os.wait4(pid, 0)
                return "abandoned", None, time.monotonic() - start
            if time.monotonic() - start > limit:
                kill_tree(pid)
                rusage = os.wait4(pid, 0)[2]
                if usage is not None:
                    usage["maxrss_kib"] = rusage.ru_maxrss
                return "timeout", None, time.monotonic() - start
            select.select(ended, [], [], max(0.0, min(poll, limit - (time.monotonic() - start))))
    finally:
        for fd in ended:
            os.close(fd)

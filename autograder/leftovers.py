"""What a grader leaves when it is stopped: its temporary folders, and how it ends on SIGTERM.

A grading session makes three folders in the temporary directory (the grader's copy, its records,
the student's copy) and removes them at close(). A grader killed outright (SIGKILL, the OOM killer, a
container stopped) cannot: its folders stay. So each session writes who owns them into its records
folder (root-only: the sandbox cannot forge it): the grader's pid, that process's start time, its pid
namespace and the three paths. The next session on the machine removes the folders of every owner
that is gone (`sweep_dead`), never of a live one, nor of one in another pid namespace (whose pids
mean something else). A grader stopped by SIGTERM or SIGHUP (a timeout, a closed terminal) ends as
on Ctrl-C (`end_on_sigterm`): the session's close() runs and nothing is left.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import tempfile
import threading

OWNER = "owner.json"            # in the records folder
PREFIX = "autograder-"
_RECORDS = "autograder-run-"    # the records folder's prefix (session.py makes it)


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/pid/stat), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _pid_namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def claim(records: str, folders: list[str]) -> None:
    """Write who owns `folders` (this process) into `records`, for sweep_dead."""
    me = os.getpid()
    owner = {"pid": me, "start": _start_time(me), "pidns": _pid_namespace(), "folders": folders}
    with open(os.path.join(records, OWNER), "w") as f:
        json.dump(owner, f)


def _ours(path: str, root: str) -> bool:
    """A folder a session of this machine made: directly in `root`, our prefix, root-owned, no link."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return (os.path.dirname(path) == root and os.path.basename(path).startswith(PREFIX)
            and not os.path.islink(path) and os.path.isdir(path) and st.st_uid == os.geteuid())


def sweep_dead(root: str | None = None) -> list[str]:
    """Remove the folders of sessions whose grader is gone; returns the folders removed."""
    root = os.path.realpath(root or tempfile.gettempdir())
    removed, here = [], _pid_namespace()
    try:
        names = [n for n in os.listdir(root) if n.startswith(_RECORDS)]
    except OSError:
        return removed
    for name in names:
        records = os.path.join(root, name)
        if not _ours(records, root):
            continue
        try:
            with open(os.path.join(records, OWNER)) as f:
                owner = json.load(f)
            pid, start, pidns, folders = owner["pid"], owner["start"], owner["pidns"], list(owner["folders"])
        except (OSError, ValueError, KeyError, TypeError):
            continue                    # a session still starting, or not one of ours: left alone
        if pidns != here or (start is not None and _start_time(int(pid)) == start):
            continue                    # alive (or unknowable from here)
        for path in [p for p in folders if isinstance(p, str)] + [records]:
            path = os.path.realpath(path) if not os.path.islink(path) else path
            if _ours(path, root):
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
    return removed


@contextlib.contextmanager
def end_on_sigterm():
    """While in this block, SIGTERM and SIGHUP end the grader as Ctrl-C does (KeyboardInterrupt): the
    running session's close() removes its folders and every process. A second signal during that close
    is ignored. The handlers before it are put back at its end (a test may call a main() in-process)."""
    signals = (signal.SIGTERM, signal.SIGHUP)
    if threading.current_thread() is not threading.main_thread():
        yield                           # handlers can only be set in the main thread
        return
    before = {sig: signal.getsignal(sig) for sig in signals}

    def stop(signum, frame):
        for sig in signals:
            signal.signal(sig, signal.SIG_IGN)
        raise KeyboardInterrupt(f"stopped by {signal.Signals(signum).name}")

    for sig in signals:
        signal.signal(sig, stop)
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)

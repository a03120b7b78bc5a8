"""Sandbox users: reserve a uid for a grading, kill everything it runs, remove what it left.

    uid = free_uid(taken)           # a uid no process uses and no other grading holds (flock)
    kill_uid(uid)                   # every process of the uid, at once (kill(-1) as the uid)
    remove_files_of(uid)            # what it left in /tmp, /dev/shm, ...
    remove_ipc_of(uid)              # its SysV shared memory, message queues and semaphores
    release_uid(uid)

Used by autograder.sandbox after each test and at the end of a grading.
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import signal
import stat
import time

from autograder.isolate import reap_zombies

UID_BASE = 61000            # sandbox uids: UID_BASE .. UID_BASE + UID_SPAN - 1, one per runner
UID_SPAN = 4000
SHARED_FOLDERS = ("/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue", "/run/lock")   # writable by anyone
LOCKS = "/run/minitorch-autograder"       # root-only: a lock file per sandbox uid in use
_held: dict[int, int] = {}                # uid -> the open lock file this process holds


def free_uid(taken: set[int]) -> int:
    """A uid in the sandbox range that no process uses, no runner of this grading took, and no
    other grading on this machine holds (an flock on LOCKS/<uid>, held until this process exits)."""
    busy = set(taken) | {owner_uid(pid) for pid in _pids()}
    start = (os.getpid() * 7919) % UID_SPAN
    for k in range(UID_SPAN):
        uid = UID_BASE + (start + k) % UID_SPAN
        if uid not in busy and lock_uid(uid):
            taken.add(uid)
            return uid
    raise RuntimeError("no free sandbox uid")


def lock_uid(uid: int) -> bool:
    """Take the lock of `uid` for this process (False if another process holds it)."""
    import fcntl
    os.makedirs(LOCKS, mode=0o700, exist_ok=True)
    info = os.lstat(LOCKS)
    if info.st_uid != 0 or stat.S_IMODE(info.st_mode) & 0o077 or not stat.S_ISDIR(info.st_mode):
        raise RuntimeError(f"{LOCKS} must be a root-only folder (mode 700); remove it and grade again")
    fd = os.open(os.path.join(LOCKS, str(uid)), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False
    _held[uid] = fd
    return True


def release_uid(uid: int) -> None:
    """Give the uid back (its lock) once nothing of it is left."""
    fd = _held.pop(uid, None)
    if fd is not None:
        os.close(fd)


def _pids() -> list[int]:
    return [int(d) for d in os.listdir("/proc") if d.isdigit()] if os.path.isdir("/proc") else []


def owner_uid(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def processes_of(uid: int) -> list[int]:
    """Live (not zombie) processes whose owner is `uid`."""
    found = []
    for pid in _pids():
        if owner_uid(pid) != uid:
            continue
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                if f.read().rsplit(b")", 1)[1].split()[0] != b"Z":
                    found.append(pid)
        except (OSError, IndexError):
            continue
    return found


def kill_uid(uid: int, wait: float = 5.0) -> int:
    """SIGKILL every process of `uid`: a child becomes the uid and calls kill(-1), which reaches
    every process of the uid at once (a fork bomb cannot outrun it). Repeats until none is left."""
    listed = processes_of(uid)
    found = len(listed)
    deadline = time.monotonic() + wait
    alive = found > 0 and not (_kill_listed(uid, listed) and _gone(uid, 0.02))
    while alive and time.monotonic() < deadline:
        pid = os.fork()
        if pid == 0:
            try:
                os.setresuid(uid, uid, uid)
                os.kill(-1, signal.SIGKILL)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        alive = not _gone(uid, 0.02)
    reap_zombies()
    return found


def _kill_listed(uid: int, pids: list[int]) -> bool:
    """SIGKILL the listed processes that still belong to `uid`, each through a pidfd opened before its
    owner is read, so a pid reused meanwhile is never signalled; no fork of this (large) process,
    7-15 ms each. False where pidfds are missing. What this misses (a child forked meanwhile) the
    caller's kill(-1) as the uid gets."""
    if not hasattr(os, "pidfd_open"):
        return False
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except OSError as exc:
            if exc.errno in (errno.ENOSYS, errno.EPERM):
                return False
            continue                                    # gone already
        try:
            if owner_uid(pid) == uid:                   # the pidfd's process, if it is alive now
                signal.pidfd_send_signal(fd, signal.SIGKILL)
        except OSError:
            pass
        finally:
            os.close(fd)
    return True


def _gone(uid: int, within: float) -> bool:
    """Whether every process of `uid` has died (reaping those that come to us) within `within` s,
    looked at every millisecond: a killed process is gone in about one, and a test's end waits on
    this (a fixed 20 ms sleep was 40% of what the end of a test cost)."""
    end = time.monotonic() + within
    while True:
        reap_zombies()
        if not processes_of(uid):
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(0.001)


def remove_files_of(uid: int, folders=SHARED_FOLDERS) -> list[str]:
    """Delete what `uid` owns in the folders anyone may write (never following links); returns it."""
    removed = []
    for top in folders:
        try:
            entries = list(os.scandir(top))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.stat(follow_symlinks=False).st_uid != uid:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
                removed.append(entry.path)
            except OSError:
                continue
    return removed


SYSV_IPC = {                 # /proc/sysvipc file -> (owner and creator uid columns, remover)
    "shm": (("uid", "cuid"), lambda libc, ident: libc.shmctl(ident, 0, None)),             # IPC_RMID
    "msg": (("uid", "cuid"), lambda libc, ident: libc.msgctl(ident, 0, None)),
    "sem": (("uid", "cuid"), lambda libc, ident: libc.semctl(ident, 0, 0)),
}


def ipc_objects_of(uid: int) -> list[tuple[str, int]]:
    """SysV IPC objects (kind, id) owned or created by `uid` in this IPC namespace."""
    found = []
    for kind, (columns, _) in SYSV_IPC.items():
        try:
            with open(f"/proc/sysvipc/{kind}") as f:
                header, *rows = [line.split() for line in f if line.strip()]
        except (OSError, ValueError):
            continue
        at = [header.index(c) for c in columns] + [1]            # column 1 is the object's id
        for row in rows:
            try:
                if uid in (int(row[at[0]]), int(row[at[1]])):
                    found.append((kind, int(row[at[2]])))
            except (IndexError, ValueError):
                continue
    return found


def remove_ipc_of(uid: int) -> list[tuple[str, int]]:
    """Remove the SysV IPC objects of `uid` (a later grading on the same uid must not find them)."""
    libc = ctypes.CDLL(None, use_errno=True)
    removed = []
    for kind, ident in ipc_objects_of(uid):
        if SYSV_IPC[kind][1](libc, ident) == 0:
            removed.append((kind, ident))
    return removed

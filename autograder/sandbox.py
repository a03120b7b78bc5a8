"""The sandbox every student process of a grading runs in, in layers (each reported in results.json).

    box = Sandbox.create(kit, student_kit, scratch_root)        # grading process, as root
    box.network_isolation()                                      # in the zygote (preexec): netns
    box.enter(scratch)                                           # in a forked child, before student code
    box.kill_all()                                               # after each test: every process of the uid

Layers, each "active: ..." or "unavailable: why" in `extra_data.sandbox`:
  user        a uid of its own per runner (no other process has it), no supplementary groups,
              no_new_privs (setuid programs cannot give privileges back); only when started as root
  files       the student's kit copy read-only to that uid (root-owned, group-readable by the
              grading's gid), the grader's own copy (hidden tests, the kit without the submission),
              scratch and results unreadable (mode 700, root), a private writable scratch per test;
              the pristine kit's solutions/, autograder/, tests/, tools/ and .git made owner-only
  limits      rlimits: memory (data segment), CPU time, file size, processes, open files
  network     a network namespace with only loopback, shared by the grader's test processes and
              the ranks (gloo and MPI run inside it), where the kernel allows unshare(CLONE_NEWNET)
  processes   at the end of every test, everything running as the uid is killed (kill(-1) from a
              child that became the uid: nothing it started escapes, whatever its environment or
              session), and the zygote is a child subreaper; then what the uid left in the folders
              anyone may write (/tmp, /dev/shm, ...) is deleted

Without root (a student's laptop) the user, files and processes layers are unavailable: the
grade is still taken in processes that never run student code (see autograder/README.md).
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import shutil
import signal
import stat
import struct
import sys
import time
from dataclasses import dataclass, field

UID_BASE = 61000            # sandbox uids: UID_BASE .. UID_BASE + UID_SPAN - 1, one per runner
UID_SPAN = 4000
SECRET_DIRS = ("solutions", "autograder", "tests", "tools", ".git")   # of the pristine kit
LIMITS = {                  # rlimit name -> soft = hard limit for every student process
    "RLIMIT_DATA": 6 << 30,          # bytes of heap and anonymous memory, per process
    "RLIMIT_CPU": 600,               # seconds of CPU, per process (tests have wall limits far below)
    "RLIMIT_FSIZE": 256 << 20,       # bytes per file written
    "RLIMIT_NPROC": 2048,            # processes and threads of the uid
    "RLIMIT_NOFILE": 4096,           # open files per process
}
SHARED_FOLDERS = ("/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue", "/run/lock")   # writable by anyone
PRIVATE_ENV = ("AUTOGRADER_RESULTS", "AUTOGRADER_NONCE", "AUTOGRADER_COLLECT", "AUTOGRADER_PRELOAD",
               "AUTOGRADER_NETNS", "PYTHONPATH")       # the grader's, not the sandbox's
_libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET = 0x40000000
PR_SET_NO_NEW_PRIVS = 38
PR_SET_PDEATHSIG = 1


def is_root() -> bool:
    return os.geteuid() == 0


def limits_text() -> str:
    return ", ".join(f"{k[len('RLIMIT_'):].lower()} {v}" for k, v in LIMITS.items())


@dataclass
class Sandbox:
    """One runner's sandbox: its uid (None without root), the student kit, its scratch root."""

    student_kit: str
    scratch_root: str
    trusted_kit: str
    uid: int | None = None
    gid: int | None = None
    layers: dict[str, str] = field(default_factory=dict)

    # -- set up, in the grading process --------------------------------------------------------
    @classmethod
    def create(cls, trusted_kit: str, student_kit: str, scratch_root: str, gid: int | None,
               taken: set[int], own_user: bool = True) -> "Sandbox":
        """A sandbox with a fresh uid (not in `taken`, running no process) when root and `own_user`;
        its gid is `gid`, or the uid itself for the grading's first sandbox. Without a uid the rank
        host still runs apart from the grader, as the grader's user."""
        box = cls(student_kit, scratch_root, trusted_kit)
        if is_root() and own_user:
            box.uid = free_uid(taken)
            box.gid = box.uid if gid is None else gid
            box.layers["user"] = f"active: uid {box.uid}, gid {box.gid}, no supplementary groups, no_new_privs"
            box.layers["processes"] = "active: every process of the uid is killed after each test"
        else:
            why = ("unavailable: " + ("switched off (--no-sandbox)" if is_root() else "the grader does not run as root")
                   + ", so student code runs as the grader's user (still never in a grading process)")
            box.layers["user"] = why
            box.layers["processes"] = ("partial: each test's process tree and session are killed; a process "
                                       "that detaches from both can outlive its test until the end-of-run sweep")
        box.layers["limits"] = f"active: {limits_text()}"
        return box

    def job_scratch(self, name: str) -> str:
        """A private writable folder for one test (owned by the uid, mode 700)."""
        path = os.path.join(self.scratch_root, name)
        os.makedirs(path, mode=0o700)
        if self.uid is not None:
            os.chown(path, self.uid, self.gid)
        return path

    # -- in a forked child, before any student code ---------------------------------------------
    def enter(self, scratch: str) -> None:
        """Become the sandboxed user in this (forked, single-threaded) process. Never returns on failure:
        raises, and the caller must exit without running anything."""
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        for name, value in LIMITS.items():
            if name == "RLIMIT_NPROC" and self.uid is None:
                continue                     # counts the grader's own processes when it is the same user
            resource.setrlimit(getattr(resource, name), (value, value))
        if self.uid is not None:
            os.setgroups([])
            os.setresgid(self.gid, self.gid, self.gid)
            os.setresuid(self.uid, self.uid, self.uid)
            if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
                raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        os.umask(0o077)
        os.chdir(self.student_kit)
        keep = {k: v for k, v in os.environ.items() if k not in PRIVATE_ENV}
        os.environ.clear()
        os.environ.update(keep, HOME=scratch, TMPDIR=scratch, PYTHONPATH=self.student_kit,
                          PYTHONDONTWRITEBYTECODE="1",
                          MINITORCH_DIST_PATH_MAP=f"{self.trusted_kit}={self.student_kit}")
        sys.path[:] = [self.student_kit] + [p for p in sys.path if not p.startswith(self.trusted_kit)]
        for module in list(sys.modules.values()):     # packages imported before: look in the student kit
            path = getattr(module, "__path__", None)
            if isinstance(path, list) and any(p.startswith(self.trusted_kit) for p in path):
                path[:] = [p.replace(self.trusted_kit, self.student_kit, 1) for p in path]

    # -- after each test -------------------------------------------------------------------------
    def kill_all(self, wait: float = 5.0) -> int:
        """Kill every process running as the uid, then remove what it left in the folders anyone
        may write (/tmp, /dev/shm, ...); returns how many processes were found (0 without a uid)."""
        if self.uid is None:
            return 0
        found = kill_uid(self.uid, wait)
        remove_files_of(self.uid)
        return found

    def release(self) -> None:
        """Give the uid back for other gradings (after kill_all)."""
        if self.uid is not None:
            release_uid(self.uid)


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
    found = len(processes_of(uid))
    deadline = time.monotonic() + wait
    while processes_of(uid) and time.monotonic() < deadline:
        pid = os.fork()
        if pid == 0:
            try:
                os.setresuid(uid, uid, uid)
                os.kill(-1, signal.SIGKILL)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        _reap()
        time.sleep(0.02)
    _reap()
    return found


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


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


# -- the network namespace (in the zygote, before it starts anything) ----------------------------
def isolate_network() -> str:
    """Move this process into a new network namespace with only loopback up; the layer's text."""
    if not is_root():
        return "unavailable: needs root"
    if _libc.unshare(CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        return f"unavailable: unshare(CLONE_NEWNET) failed ({errno.errorcode.get(err, err)}: {os.strerror(err)})"
    try:
        import fcntl
        import socket
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            ifreq = struct.pack("16sH14s", b"lo", 0, b"")
            flags = struct.unpack("16sH14s", fcntl.ioctl(s, 0x8913, ifreq))[1]          # SIOCGIFFLAGS
            fcntl.ioctl(s, 0x8914, struct.pack("16sH14s", b"lo", flags | 0x1, b""))   # SIOCSIFFLAGS, IFF_UP
    except OSError as exc:
        return f"unavailable: loopback could not be brought up ({exc})"
    return "active: a network namespace of its own with only loopback (no other host or grading reachable)"


# -- files -----------------------------------------------------------------------------------------
def make_student_kit(trusted_kit: str, dest: str, gid: int | None, exclude: list[str]) -> None:
    """Copy the grader's kit copy to `dest` without the grader, solutions, hidden tests or links;
    root-owned, readable (not writable) by the group `gid` only."""
    skip = {"autograder", "tools", "solutions", ".git", ".venv"}
    excluded = {os.path.normpath(e) for e in exclude}
    for folder, dirs, names in os.walk(trusted_kit):
        rel_dir = os.path.relpath(folder, trusted_kit)
        dirs[:] = [d for d in dirs if not (rel_dir == "." and d in skip) and d != "__pycache__"
                   and os.path.normpath(os.path.join(rel_dir, d)) not in excluded]
        os.makedirs(os.path.join(dest, rel_dir), exist_ok=True)
        for n in names:
            rel = os.path.normpath(os.path.join(rel_dir, n))
            src = os.path.join(folder, n)
            if rel in excluded or not stat.S_ISREG(os.lstat(src).st_mode):
                continue
            shutil.copyfile(src, os.path.join(dest, rel))
    seal(dest, gid)


def seal(path: str, gid: int | None) -> None:
    """Everything under `path` root-owned (when root), group `gid` may read, nobody else anything."""
    dir_mode, file_mode = (0o750, 0o640) if gid is not None else (0o755, 0o644)
    for folder, dirs, names in os.walk(path):
        for entry, mode in [(folder, dir_mode)] + [(os.path.join(folder, n), file_mode) for n in names]:
            if gid is not None:
                os.chown(entry, 0, gid, follow_symlinks=False)
            os.chmod(entry, mode)


def protect_secrets(root: str) -> str:
    """Make the pristine kit's secret folders owner-only (the venv stays readable); the layer's text."""
    if not is_root():
        return "unavailable: not root, so the kit's solutions/ and hidden tests keep their permissions"
    changed = []
    for name in SECRET_DIRS:
        path = os.path.join(root, name)
        if os.path.isdir(path) and os.stat(path).st_mode & 0o077:
            os.chmod(path, 0o700)
            changed.append(name)
    note = f" (made owner-only now: {', '.join(changed)})" if changed else ""
    return f"active: {', '.join(SECRET_DIRS)} of the kit are owner-only{note}"


def open_interpreter() -> list[str]:
    """Give others search (x) permission on the folders above the interpreter and the venv, so the
    sandbox user can run Python (e.g. a pyenv Python under a private /root); returns what changed."""
    changed = []
    targets = {os.path.realpath(sys.executable), os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix)}
    for target in targets:
        path = os.path.dirname(target) if os.path.isfile(target) else target
        while path and path != os.sep:
            mode = os.stat(path).st_mode
            if not mode & 0o001:
                os.chmod(path, stat.S_IMODE(mode) | 0o001)
                changed.append(path)
            path = os.path.dirname(path)
    return changed

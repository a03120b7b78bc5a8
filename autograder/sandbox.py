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
              anyone may write (/tmp, /dev/shm, ...) and its SysV IPC objects are deleted; the rank
              host dies with the zygote (parent-death signal, set after the uid change, which clears it)
  ipc         each test's rank host gets an IPC namespace and a mount namespace with a private
              /dev/shm (a small tmpfs): shared memory, message queues and semaphores die with the
              test's processes (without namespaces: removed by uid after each test)
  fair share  each grading's processes in cgroups of their own (autograder/cgroups.py): an equal CPU
              share beside other gradings, and a memory limit for the sandboxed processes

Without root (a student's laptop) the user, files and processes layers are unavailable: the
grade is still taken in processes that never run student code (see autograder/README.md).
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import signal
import struct
import sys
from dataclasses import dataclass, field

from autograder.uids import free_uid, kill_uid, release_uid, remove_files_of, remove_ipc_of

LIMITS = {                  # rlimit name -> soft = hard limit for every student process
    "RLIMIT_DATA": 6 << 30,          # bytes of heap and anonymous memory, per process
    "RLIMIT_CPU": 600,               # seconds of CPU, per process (tests have wall limits far below)
    "RLIMIT_FSIZE": 256 << 20,       # bytes per file written
    "RLIMIT_NPROC": 2048,            # processes and threads of the uid
    "RLIMIT_NOFILE": 4096,           # open files per process
}
PRIVATE_ENV = ("AUTOGRADER_RESULTS", "AUTOGRADER_NONCE", "AUTOGRADER_COLLECT", "AUTOGRADER_PRELOAD",
               "AUTOGRADER_NETNS", "AUTOGRADER_INPUT_SECRET", "PYTHONPATH")       # the grader's, not the sandbox's
_libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET = 0x40000000
CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
MS_REC, MS_PRIVATE, MS_NOSUID, MS_NODEV = 0x4000, 0x40000, 0x2, 0x4
PRIVATE_SHM = "size=256m,mode=1777"      # the tmpfs a test's processes see as /dev/shm
PR_SET_NO_NEW_PRIVS = 38
PR_SET_PDEATHSIG = 1
PR_GET_PDEATHSIG = 2


def is_root() -> bool:
    return os.geteuid() == 0


def limits_text(limits: dict) -> str:
    return ", ".join(f"{k[len('RLIMIT_'):].lower()} {v}" for k, v in limits.items())


@dataclass
class Sandbox:
    """One runner's sandbox: its uid (None without root), the student kit, its scratch root."""

    student_kit: str
    scratch_root: str
    trusted_kit: str
    uid: int | None = None
    gid: int | None = None
    limits: dict[str, int] = field(default_factory=lambda: dict(LIMITS))
    private_ipc: bool = False                # enter() unshares IPC and mounts (a private /dev/shm)
    cgroups: list[str] = field(default_factory=list)    # cgroup.procs files enter() joins (fair share)
    layers: dict[str, str] = field(default_factory=dict)

    # -- set up, in the grading process --------------------------------------------------------
    @classmethod
    def create(cls, trusted_kit: str, student_kit: str, scratch_root: str, gid: int | None,
               taken: set[int], own_user: bool = True, limits: dict | None = None, private_ipc: bool = False,
               cgroups: list[str] | None = None) -> "Sandbox":
        """A sandbox with a fresh uid (not in `taken`, running no process) when root and `own_user`;
        its gid is `gid`, or the uid itself for the grading's first sandbox. Without a uid the rank
        host still runs apart from the grader, as the grader's user."""
        box = cls(student_kit, scratch_root, trusted_kit, limits={**LIMITS, **(limits or {})},
                  private_ipc=private_ipc and is_root(), cgroups=list(cgroups or []) if is_root() else [])
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
        box.layers["limits"] = f"active: {limits_text(box.limits)}"
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
        parent = os.getppid()
        for procs in self.cgroups:               # as root: the sandbox cannot leave them afterwards
            with open(procs, "w") as f:
                f.write(str(os.getpid()))
        if self.private_ipc:
            enter_private_ipc()
        for name, value in self.limits.items():
            if name == "RLIMIT_NPROC" and self.uid is None:
                continue                     # counts the grader's own processes when it is the same user
            hard = value + 5 if name == "RLIMIT_CPU" else value      # SIGXCPU at the soft limit, not SIGKILL
            resource.setrlimit(getattr(resource, name), (value, hard))
        if self.uid is not None:
            os.setgroups([])
            os.setresgid(self.gid, self.gid, self.gid)
            os.setresuid(self.uid, self.uid, self.uid)
            if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
                raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        # after the uid change, which clears it: the host dies with its parent (the zygote)
        if _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
        if os.getppid() != parent:
            raise RuntimeError("the parent died while the sandbox was entered")
        os.umask(0o077)
        os.chdir(self.student_kit)
        keep = {k: v for k, v in os.environ.items() if k not in PRIVATE_ENV}
        if self.uid is not None:          # the uid has no passwd entry: getpass.getuser() (torch on CUDA
            keep.update(USER=f"student{self.uid}", LOGNAME=f"student{self.uid}")   # asks) reads these
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
        remove_ipc_of(self.uid)
        return found

    def release(self) -> None:
        """Give the uid back for other gradings (after kill_all)."""
        if self.uid is not None:
            release_uid(self.uid)


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




# -- the IPC and mount namespaces (in a rank host, as root, before it becomes the uid) -------------
def enter_private_ipc() -> None:
    """Give this process an IPC namespace and a private /dev/shm (tmpfs): SysV objects, POSIX
    queues and shared-memory files of the test die with its processes. Raises OSError."""
    if _libc.unshare(CLONE_NEWIPC | CLONE_NEWNS) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"unshare(CLONE_NEWIPC | CLONE_NEWNS) failed: {os.strerror(err)}")
    if _libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:      # no mount leaks out
        err = ctypes.get_errno()
        raise OSError(err, f"making / private failed: {os.strerror(err)}")
    if os.path.isdir("/dev/shm") and _libc.mount(b"tmpfs", b"/dev/shm", b"tmpfs", MS_NOSUID | MS_NODEV,
                                                 PRIVATE_SHM.encode()) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mounting a private /dev/shm failed: {os.strerror(err)}")


def probe_private_ipc() -> str:
    """Whether enter_private_ipc works here (tried in a forked child): the ipc layer's text."""
    if not is_root():
        return "unavailable: needs root"
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            enter_private_ipc()
            code = 0
        except OSError as exc:
            code = 10 + (exc.errno or 0) % 200
        finally:
            os._exit(code)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    if code == 0:
        return (f"active: an IPC namespace and a private /dev/shm (tmpfs, {PRIVATE_SHM.split(',')[0][5:]}) per "
                f"test; SysV IPC objects of the uid are also removed after each test")
    err = code - 10
    return (f"unavailable: unshare(CLONE_NEWIPC | CLONE_NEWNS) refused ({errno.errorcode.get(err, err)}); "
            f"the uid's SysV IPC objects and /dev/shm files are removed after each test instead")

"""Rank isolation (gradings only): each rank process in a Landlock domain of its own.

    MINITORCH_DIST_ISOLATE_RANKS=1       # set by the autograder for its rank processes
    isolation.isolate_rank()              # in a rank, after fork (or at the start of an mpiexec rank),
                                          # before any code under test runs
    MINITORCH_DIST_SIM_ENGINE=1           # every sandboxed grading, Landlock or not: sim runs in an
                                          # engine process (sim/processes.py; close_inherited, undumpable)

Every rank of a grading runs as the same sandbox uid, so without this a rank could hand its input
to a sibling outside the sockets whose traffic the grader measures: through a file in a folder
they share, the sibling's memory (/proc/PID/mem, process_vm_readv), a FIFO or a unix socket. The
domain (Linux's Landlock: unprivileged, inherited by children, irrevocable; no namespaces) lets a
rank:
  read      the system's and Python's folders, sys.path, the working folder, /sys, a few devices,
            its own /proc/PID and a few global /proc files; never another rank's folder or /proc/PID
  write     only in a private folder made here (TMPDIR and HOME point to it), and /dev/null & co
  create    no socket file and no FIFO anywhere (pathname unix sockets cannot be bound)
  ptrace    nothing outside its own domain (so no sibling's, rank host's or launcher's memory)
  scope     (ABI 6) no abstract unix socket and no signal outside its own domain
and a seccomp filter (seccomp.py) refuses System V IPC, message queues, IP sockets other than TCP (none is a
file; UDP would carry data that the kernel's traffic count leaves out) and setting or reading
another process's rlimits, affinity, scheduling and priority (a sibling could write them, another
read them). Inherited descriptors are
closed first. TCP (gloo, MPI's netmod, the launcher's link, the store) is not restricted. Standard
library only: the grader loads this file by itself (autograder.session) to state the layer.
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys
import tempfile

VAR = "MINITORCH_DIST_ISOLATE_RANKS"
ENGINE_VAR = "MINITORCH_DIST_SIM_ENGINE"       # every grading, Landlock or not: sim/processes.py
CREATE_RULESET, ADD_RULE, RESTRICT_SELF = 444, 445, 446      # the same number on every architecture
VERSION_FLAG, RULE_PATH_BENEATH = 1, 1
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR, MAKE_REG = 1 << 4, 1 << 5, 1 << 6, 1 << 7, 1 << 8
MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15                  # ABI 2, 3, 5
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1                # ABI 6
READ = EXECUTE | READ_FILE | READ_DIR
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV   # what a rule on a file may allow
PR_SET_NO_NEW_PRIVS, PR_SET_DUMPABLE, PR_SET_PDEATHSIG = 38, 4, 1
READ_TREES = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc", "/opt", "/sys")
PROC_FILES = ("cpuinfo", "meminfo", "stat", "filesystems", "sys", "version", "loadavg", "uptime", "driver")
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/nvidia*", "/dev/dri/*")

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def wanted() -> bool:
    return os.environ.get(VAR) == "1"


def engine_wanted() -> bool:
    """A grading (with or without Landlock): a sim run's clock in an engine process (sim/processes.py)."""
    return os.environ.get(ENGINE_VAR) == "1"


def abi() -> tuple[int, str]:
    """(Landlock's ABI version here, why not when 0)."""
    version = _libc.syscall(CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(VERSION_FLAG))
    if version > 0:
        return int(version), ""
    err = ctypes.get_errno()
    return 0, (f"landlock_create_ruleset refused ({os.strerror(err)}: the kernel lacks Landlock, or it is off "
               f"or filtered)")


def handled_fs(version: int) -> int:
    rights = (1 << 13) - 1
    for since, right in ((2, REFER), (3, TRUNCATE), (5, IOCTL_DEV)):
        if version >= since:
            rights |= right
    return rights


def layer() -> str:
    """The "isolation" layer's line for results.json."""
    version, why = abi()
    if not version:
        return (f"unavailable: {why}; the ranks of a test share their uid's files, /proc and abstract sockets, "
                f"so they can hand each other inputs outside the measured sockets; a sim run of up to 64 ranks "
                f"still has a process per rank and its clock in an engine process that no rank can trace, read "
                f"or write (not dumpable; the ranks keep no descriptor but their own link to it)")
    scopes = ("abstract unix sockets and signals scoped to the rank" if version >= 6 else
              "abstract unix sockets and signals NOT scoped (Landlock ABI < 6)")
    return (f"active: Landlock ABI {version}, a domain per rank process: it writes only its own folder, reads "
            f"no other rank's folder or /proc/PID, binds no socket file or FIFO, ptraces nothing outside "
            f"itself; {scopes}; inherited descriptors closed; System V IPC, message queues, IP sockets other "
            f"than TCP and another process's rlimits, affinity and priority refused (seccomp); a sim run of up "
            f"to 64 ranks has a process per rank and its clock in an engine process outside their domains. "
            f"mpi ranks write /dev/shm only until MPI_Init has mapped MPICH's segments, and their link to "
            f"mpiexec (PMI) then carries only MPI_Finalize and MPI_Abort (no MPI_Comm_spawn, no published "
            f"names), before any code under test runs")


def isolate_rank(keep: tuple[int, ...] = (), shared: tuple[str, ...] = ()) -> str:
    """Put this process in a Landlock domain of its own (see the module doc); returns the private
    folder. Raises OSError when Landlock refuses: the caller must not run code under test then.

    First every inherited descriptor but 0-2 and `keep` is closed (mpiexec's process manager leaves
    pipes in every rank, some with both ends: a channel between ranks) and stdin becomes a /dev/null
    of this process's own: an open file that ranks share carries data in its offset and flags.
    `shared`: folders the rank may also write although its siblings can too (MPICH's /dev/shm), until
    drop_shared()."""
    version, why = abi()
    if not version:
        raise OSError(why)
    close_inherited(keep)
    folder = tempfile.mkdtemp(prefix=f"rank{os.getpid()}-", dir=os.environ.get("TMPDIR") or None)
    _restrict(version, folder, shared, first=True)
    os.environ.update(TMPDIR=folder, HOME=folder)
    tempfile.tempdir = folder
    _state.update(version=version, folder=folder, shared=tuple(shared))
    return folder


def drop_shared() -> bool:
    """A domain inside this rank's own, with the same rules less isolate_rank's `shared` folders: an mpi
    rank once MPI_Init has mapped (and this kit unlinked) every segment in /dev/shm, which siblings
    could otherwise use to swap inputs while the code under test runs. True when one was made."""
    if not _state.get("shared"):
        return False
    _restrict(_state["version"], _state["folder"], (), first=False)
    _state["shared"] = ()
    return True


_state: dict = {}       # this process's domain: Landlock version, private folder, shared folders


def _restrict(version: int, folder: str, shared: tuple[str, ...], first: bool) -> None:
    """landlock_restrict_self with this rank's rules (_rules); the first time, no_new_privs and the
    seccomp filter too."""
    rights = handled_fs(version)
    attr = _RulesetAttr(rights, 0, SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if version >= 6 else 0)
    size = ctypes.sizeof(attr) if version >= 6 else 8
    ruleset = _check(_libc.syscall(CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0)),
                     "landlock_create_ruleset")
    try:
        for path, allowed in _rules(folder, rights, shared):
            if allowed == READ and folder.startswith(path.rstrip(os.sep) + os.sep):
                raise OSError(f"the ranks' folders ({os.path.dirname(folder)}) lie in {path}, which every "
                              f"rank may read")
            _allow(ruleset, path, allowed)
        if first and _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            _check(-1, "prctl(PR_SET_NO_NEW_PRIVS)")
        _check(_libc.syscall(RESTRICT_SELF, ruleset, ctypes.c_uint32(0)), "landlock_restrict_self")
        if first:
            from .seccomp import deny_unmeasured_ipc      # here: the grader loads this file by itself
            deny_unmeasured_ipc()
    finally:
        os.close(ruleset)


def close_inherited(keep: tuple[int, ...] = ()) -> None:
    """Close every descriptor but 0-2 and `keep`; stdin becomes a /dev/null of this process's own."""
    for fd in _open_descriptors():
        if fd > 2 and fd not in keep:
            os.close(fd)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)


def die_with_parent() -> None:
    """Linux: the kernel SIGKILLs this process when the thread that forked it ends (PR_SET_PDEATHSIG);
    elsewhere nothing. For every process the kit forks (ranks, rank hosts, relays): none outlives its parent."""
    if sys.platform.startswith("linux"):
        _libc.prctl(PR_SET_PDEATHSIG, 9)


def undumpable() -> None:
    """PR_SET_DUMPABLE 0: no process without CAP_SYS_PTRACE, the same uid's included, can trace this one
    or open its /proc/PID/mem, fd/ or environ (process_vm_readv, pidfd_getfd alike). Landlock or not."""
    if _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        _check(-1, "prctl(PR_SET_DUMPABLE)")


def _open_descriptors() -> list[int]:
    listed = os.listdir("/proc/self/fd")            # the listing's own descriptor is closed by now
    return [fd for fd in map(int, listed) if _is_open(fd)]


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


def _rules(folder: str, rights: int, shared: tuple[str, ...] = ()):
    """(path, rights) pairs: read-only trees, this process's own /proc entry, devices, its folder."""
    reads = list(READ_TREES) + [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
                                os.path.dirname(os.path.realpath(sys.executable)), os.getcwd()]
    reads += [p for p in sys.path if p] + os.environ.get("PYTHONPATH", "").split(os.pathsep)
    for path in dict.fromkeys(os.path.realpath(p) for p in reads if p):
        yield path, READ
    yield f"/proc/{os.getpid()}", READ | (WRITE_FILE & rights)
    for name in PROC_FILES:
        yield f"/proc/{name}", READ
    for pattern in DEVICES:
        for path in glob.glob(pattern):
            yield path, READ_FILE | WRITE_FILE | (IOCTL_DEV & rights)
    for path in (folder, *shared):
        yield path, rights & ~(MAKE_SOCK | MAKE_FIFO | MAKE_CHAR | MAKE_BLOCK)


def _allow(ruleset: int, path: str, allowed: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return                                   # not on this machine
    try:
        if not os.path.isdir(path):
            allowed &= FILE_RIGHTS
        rule = _PathBeneath(allowed, fd)
        _check(_libc.syscall(ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.byref(rule), ctypes.c_uint32(0)),
               f"landlock_add_rule({path})")
    finally:
        os.close(fd)


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what} failed: {os.strerror(err)}")
    return result

"""The seccomp filter of a grading's rank processes (isolation.isolate_rank installs it after Landlock).

    deny_unmeasured_ipc()      # in the rank, no_new_privs already set
    install(prog)              # any filter written as install's labelled program (tests use it too)

It refuses (EPERM) what Landlock does not see and the grader does not count: System V IPC and
message queues (the ranks of a test share an IPC namespace), IP sockets other than TCP, the calls
that set or read another process's rlimits, affinity, scheduling and priority, and every system call
of another ABI. Standard library only.
"""

from __future__ import annotations

import ctypes
import os
import platform

PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
# Per architecture: (audit arch, [shmget, shmat, semget, msgget, mq_open], socket, lowest number of
# another ABI of it: x32). System V IPC and message queues are not files: Landlock does not see them
SECCOMP = {"x86_64": (0xC000003E, [29, 30, 64, 68, 240], 41, 0x40000000),
           "aarch64": (0xC00000B7, [194, 196, 190, 186, 180], 198, None)}
# Calls that set or read another process's attributes by pid, which a sibling could write and read
# (x86_64 only, the one machine they were tested on): {number: (the "which" argument's allowed value or
# None, the pid argument's index)}; allowed only on pid 0 or this process. prlimit64, sched_{set,get}-
# {affinity,param,scheduler,attr}, sched_rr_get_interval, {get,set}priority (PRIO_PROCESS), ioprio_{get,
# set} (IOPRIO_WHO_PROCESS)
BY_PID = {"x86_64": {302: (None, 0), 203: (None, 0), 204: (None, 0), 142: (None, 0), 143: (None, 0),
                     144: (None, 0), 145: (None, 0), 148: (None, 0), 314: (None, 0), 315: (None, 0),
                     140: (0, 1), 141: (0, 1), 252: (1, 1), 251: (1, 1)}}

_libc = ctypes.CDLL(None, use_errno=True)


def deny_unmeasured_ipc() -> bool:
    """A seccomp filter (EPERM): shmget, shmat, semget, msgget and mq_open (the ranks of a test share an
    IPC namespace); IPv4/IPv6 sockets other than TCP (UDP would carry data the grader does not count);
    the BY_PID calls on another process (its rlimits, affinity, priority: a sibling's to write or read);
    every system call of another ABI (i386, x32). False where this machine's numbers are not known here."""
    known = SECCOMP.get(platform.machine())
    if known is None:
        return False
    arch, numbers, socket_nr, other_abi = known
    allow, deny = 0x7FFF0000, 0x00050000 | 1                  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | EPERM
    prog = [("ld", 4), ("jeq", arch, "native", "deny"), "native", ("ld", 0)]     # seccomp_data: nr 0, arch 4
    prog += [("jge", other_abi, "deny", None)] if other_abi else []
    prog += [("jeq", nr, "deny", None) for nr in numbers]
    by_pid = BY_PID.get(platform.machine(), {})
    prog += [("jeq", nr, f"pid{nr}", None) for nr in by_pid]
    prog += [("jeq", socket_nr, None, "allow"), ("ld", 16)]                      # socket(domain, type, ...)
    prog += [("jeq", 2, "inet", None), ("jeq", 10, "inet", "allow"), "inet", ("ld", 24), ("and", 0xF),
             ("jeq", 1, "allow", "deny")]
    for nr, (which, index) in by_pid.items():                                    # args at 16 + 8 i (low half)
        prog += [f"pid{nr}"] + ([("ld", 16), ("jeq", which, None, "deny")] if which is not None else [])
        prog += [("ld", 16 + 8 * index), ("jeq", 0, "allow", None), ("jeq", os.getpid(), "allow", "deny")]
    prog += ["allow", ("ret", allow), "deny", ("ret", deny)]
    install(prog)
    return True


def install(prog: list) -> None:
    """Assemble `prog` (see _assemble) and make it this process's seccomp filter (no_new_privs set)."""
    filters = _assemble(prog)
    fprog = _SockFprog(len(filters), ctypes.cast(filters, ctypes.c_void_p))
    if _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_SECCOMP) failed: {os.strerror(err)}")


def _assemble(prog: list):
    """Classic BPF from ("ld", offset), ("and", k), ("ret", k), (jeq|jge, k, label if true, label if
    false) with None for the next instruction, and label strings."""
    codes = {"ld": 0x20, "and": 0x54, "ret": 0x06, "jeq": 0x15, "jge": 0x35}
    where, n = {}, 0
    for item in prog:
        if isinstance(item, str):
            where[item] = n
        else:
            n += 1
    out, i = [], 0
    for item in prog:
        if isinstance(item, str):
            continue
        op, k, *jumps = item
        jt, jf = [0 if j is None else where[j] - i - 1 for j in jumps] if jumps else (0, 0)
        out.append(_SockFilter(codes[op], jt, jf, k))
        i += 1
    return (_SockFilter * len(out))(*out)


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.c_void_p)]

"""Start the rank host of one test inside the sandbox: the only place student code runs.

    pid = fork_host(box, scratch)          # in the zygote: a forked child (torch already imported)
    python -m autograder.rank_host SPEC    # --no-zygote: the same, in a fresh python

The child closes every file it inherited (the zygote's job and reply pipes among them) but its
output, enters the sandbox (autograder.sandbox.Sandbox.enter: the uid, rlimits, the student's kit
copy) and serves launchers on its socket (minitorch_dist.runtime.launching.host): every
rank, mpiexec and sim run of the test starts from it.

Its output goes to `<scratch>.host.out`, a file the trusted side creates (root-owned, mode 600)
beside the scratch folder, in the scratch root the sandbox cannot write: the host writes through
the descriptor it was given before it entered the sandbox, and the trusted side later reads a
file that no sandboxed process could replace by a link, a FIFO or a device. The socket, likewise,
is bound there (`<scratch>.host.sock`) before the host becomes the uid: no sandboxed process can
put a proxy of its own in its place.
"""

from __future__ import annotations

import json
import os
import sys
import time

from autograder.sandbox import Sandbox

SOCKET = ".host.sock"        # beside the test's scratch folder: <scratch>.host.sock
OUTPUT_TAIL = 3000           # bytes of the host's output kept for feedback


def output_path(scratch: str) -> str:
    """Where the host's output goes: beside the scratch folder, where only root may create files."""
    return scratch.rstrip(os.sep) + ".host.out"


def open_output(scratch: str) -> int:
    """Create the host's output file (trusted side, before the host starts); a write descriptor."""
    return os.open(output_path(scratch), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_NOFOLLOW
                   | os.O_CLOEXEC, 0o600)


def _become_host(box: Sandbox, scratch: str) -> None:
    """In the child, whose fds 1 and 2 are its output file: clean the other file descriptors,
    enter the sandbox, serve. Never returns."""
    code = 71
    try:
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.closerange(3, 1 << 16)
        server = _bind(socket_path(scratch))
        box.enter(scratch)
        sys.stdout = open(1, "w", buffering=1, closefd=False, errors="replace")
        sys.stderr = open(2, "w", buffering=1, closefd=False, errors="replace")
        from minitorch_dist.runtime.launching.host import serve
        serve(server)
    except BaseException:  # noqa: BLE001 - the test sees "could not reach the rank host"
        try:
            import traceback
            traceback.print_exc()
        except BaseException:  # noqa: BLE001
            pass
    finally:
        os._exit(code)


def fork_host(box: Sandbox, scratch: str) -> int:
    """Fork the rank host of one test; returns its pid once its socket is up (or after 10 s)."""
    out = open_output(scratch)
    pid = os.fork()
    if pid == 0:
        os.setsid()
        os.dup2(out, 1)
        os.dup2(out, 2)
        _become_host(box, scratch)
    os.close(out)
    wait_for_socket(scratch, pid)
    return pid


def socket_path(scratch: str) -> str:
    return scratch.rstrip(os.sep) + SOCKET


def _bind(path: str):
    """The host's listening socket, bound while still root where only root may create files."""
    import socket
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(64)
    return server


def wait_for_socket(scratch: str, pid: int, limit: float = 10.0) -> None:
    end = time.monotonic() + limit
    path = socket_path(scratch)
    while not os.path.exists(path) and time.monotonic() < end:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return
        time.sleep(0.005)


def host_env(scratch: str) -> dict:
    """What the test process needs in its environment to launch through the host."""
    return {"MINITORCH_DIST_RANK_HOST": socket_path(scratch)}


def output_tail(scratch: str, limit: int = OUTPUT_TAIL) -> str:
    """The end of what the host and its children wrote to their own stdout/stderr (at most `limit`
    bytes, from the regular file the trusted side created; anything else reads as nothing)."""
    import stat
    try:
        fd = os.open(output_path(scratch), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
            return ""
        return os.pread(fd, limit, max(0, info.st_size - limit)).decode(errors="replace")
    finally:
        os.close(fd)


def box_from_spec(spec: dict) -> Sandbox:
    return Sandbox(spec["student_kit"], spec["scratch_root"], spec["trusted_kit"], spec.get("uid"), spec.get("gid"),
                   dict(spec["limits"]), bool(spec.get("private_ipc")), list(spec.get("cgroups", [])))


def box_spec(box: Sandbox) -> dict:
    return {"student_kit": box.student_kit, "scratch_root": box.scratch_root, "trusted_kit": box.trusted_kit,
            "uid": box.uid, "gid": box.gid, "limits": box.limits, "private_ipc": box.private_ipc,
            "cgroups": box.cgroups}


def main() -> None:
    spec = json.loads(sys.argv[1])
    _become_host(box_from_spec(spec), spec["scratch"])


if __name__ == "__main__":
    main()

"""Start the rank host of one test inside the sandbox: the only place student code runs.

    pid = fork_host(box, scratch)          # in the zygote: a forked child (torch already imported)
    python -m autograder.rank_host SPEC    # --no-zygote: the same, in a fresh python

The child closes every file it inherited (the zygote's job and reply pipes among them), sends its
output to `scratch/host.out`, enters the sandbox (autograder.sandbox.Sandbox.enter: the uid,
rlimits, the student's kit copy) and serves launchers on `scratch/host.sock`
(minitorch_dist.runtime.launching.host): every rank, mpiexec and sim run of the test starts from it.
"""

from __future__ import annotations

import json
import os
import sys
import time

from autograder.sandbox import Sandbox

SOCKET = "host.sock"
OUTPUT = "host.out"


def _become_host(box: Sandbox, scratch: str) -> None:
    """In the child: clean file descriptors, enter the sandbox, serve. Never returns."""
    code = 71
    try:
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.dup2(null, 2)
        os.closerange(3, 1 << 16)
        box.enter(scratch)
        out = os.open(os.path.join(scratch, OUTPUT), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(out)
        sys.stdout = open(1, "w", buffering=1, closefd=False, errors="replace")
        sys.stderr = open(2, "w", buffering=1, closefd=False, errors="replace")
        from minitorch_dist.runtime.launching.host import serve
        serve(os.path.join(scratch, SOCKET))
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
    pid = os.fork()
    if pid == 0:
        os.setsid()
        _become_host(box, scratch)
    wait_for_socket(scratch, pid)
    return pid


def wait_for_socket(scratch: str, pid: int, limit: float = 10.0) -> None:
    end = time.monotonic() + limit
    path = os.path.join(scratch, SOCKET)
    while not os.path.exists(path) and time.monotonic() < end:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return
        time.sleep(0.005)


def host_env(scratch: str) -> dict:
    """What the test process needs in its environment to launch through the host."""
    return {"MINITORCH_DIST_RANK_HOST": os.path.join(scratch, SOCKET)}


def output_tail(scratch: str, limit: int = 3000) -> str:
    """The end of what the host and its children wrote to their own stdout/stderr."""
    try:
        with open(os.path.join(scratch, OUTPUT), "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - limit))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def box_from_spec(spec: dict) -> Sandbox:
    return Sandbox(spec["student_kit"], spec["scratch_root"], spec["trusted_kit"], spec.get("uid"), spec.get("gid"),
                   dict(spec["limits"]))


def box_spec(box: Sandbox) -> dict:
    return {"student_kit": box.student_kit, "scratch_root": box.scratch_root, "trusted_kit": box.trusted_kit,
            "uid": box.uid, "gid": box.gid, "limits": box.limits}


def main() -> None:
    spec = json.loads(sys.argv[1])
    _become_host(box_from_spec(spec), spec["scratch"])


if __name__ == "__main__":
    main()

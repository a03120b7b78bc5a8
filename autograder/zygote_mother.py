"""Zygotes forked from one warm process per grader: torch is imported once, not once per zygote.

    pid = fork_zygote(root, env, (stdin_fd, stdout_fd, stderr_fd))    # None: start one the usual way

Every zygote (autograder.zygote) imports torch before it forks its first job: 1.3-3.2 s of CPU,
and a run of the kit's own suite started 168 of them (a grading session has one per job slot). The
mother is a plain Python that has imported what every zygote imports from site-packages
(zygote.preload_site_packages: torch, pytest, ...; nothing of the kit, so no grading's copy
shadows another's) and forks a
zygote on request. The child takes its descriptors (stdin, stdout, stderr, passed over a socket),
its working folder, environment and sys.path as a fresh `python -m autograder.zygote` in that
folder would have them, and runs the kit copy's autograder.zygote as __main__.

Only what the import of torch reads from the environment must match: the mother is started with
those variables (OMP_*, TORCH_*, CUDA_*, LD_*, PYTHON* but PYTHONPATH, ...; IMPORT_ENV), one mother
per distinct set and homework preload: a homework's `preload` modules from site-packages
(AUTOGRADER_PRELOAD, never a module of the kit: site_preload) are imported by its mother, not by each
of its zygotes (torch._dynamo for homeworks 2, 3, 5 and 6: 0.8-1.0 s of CPU a zygote, 71 of the 169
zygotes a run of the kit's suite started). Once its imports are done the mother settles
(autograder.zygote.settle). A mother ends when its grader does (it checks its parent every second)
or when the grader closes the socket; its zygotes, whose parent it is, then end too (autograder.zygote
watches its parent). Student code never runs in the mother: it runs in jobs forked by a zygote,
in the sandbox, with every inherited descriptor closed.
"""

from __future__ import annotations

import json
import os
import re
import select
import socket
import subprocess
import sys
import threading

from autograder.zygote import PRELOAD_VAR

IMPORT_ENV = re.compile(r"^(OMP_|KMP_|GOMP_|MKL_|OPENBLAS_|TORCH_|PYTORCH_|CUDA_|NCCL_|LD_|MALLOC_|PYTHON(?!PATH=|"
                        r"DONTWRITEBYTECODE=))")
# The mother's environment holds AREA_VAR=xxx... (ENV_AREA bytes): each zygote writes its own environment
# over that memory, so that /proc/PID/environ of the zygote and of everything it forks shows it, as for
# a zygote started with it (isolate.sweep finds a grading's processes by a token there).
AREA_VAR, ENV_AREA = "AUTOGRADER_ZYGOTE_ENV_AREA", 1 << 16
KIT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
START_LIMIT = 300.0          # a new mother imports torch first: 20 s has been seen on a loaded machine
_lock = threading.Lock()
_mothers: dict[tuple, "Mother"] = {}


def import_env(env: dict) -> dict:
    """The variables of `env` that importing torch (or starting Python) may read."""
    return {k: v for k, v in env.items() if IMPORT_ENV.match(f"{k}={v}")}


def site_preload(env: dict) -> str:
    """The modules of `env`'s PRELOAD_VAR (comma-separated) that the mother may import: those whose
    top-level package is not one of the kit's (the zygotes import the kit from their own copy)."""
    names = [n for n in env.get(PRELOAD_VAR, "").split(",") if n]
    kit = set(os.listdir(KIT))
    return ",".join(n for n in names if not {n.split(".")[0], n.split(".")[0] + ".py"} & kit)


class Mother:
    """The grader's side: a mother process and the socket to it."""

    def __init__(self, env: dict):
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        boot = f"import sys; sys.path.insert(0, {KIT!r}); from autograder.zygote_mother import serve; serve({theirs.fileno()})"
        self.proc = subprocess.Popen([sys.executable, "-c", boot], cwd="/", env=env,
                                     pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, start_new_session=True)
        theirs.close()
        self.pid = self.proc.pid

    def fork(self, root: str, env: dict, fds: tuple[int, int, int]) -> int | None:
        if self.proc.poll() is not None:
            return None
        try:
            socket.send_fds(self.sock, [json.dumps({"root": root, "env": env}).encode()], list(fds))
            reply = self.sock.recv(4096) if select.select([self.sock], [], [], START_LIMIT)[0] else b""
        except OSError:
            return None
        return json.loads(reply).get("pid") if reply else None

    def close(self) -> None:
        self.sock.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def available() -> bool:
    """Whether zygotes come from a mother: not with AUTOGRADER_NO_MOTHER=1, nor where this kernel (or a
    container's seccomp filter) refuses pidfds, which watch a zygote that is not the grader's child."""
    if os.environ.get("AUTOGRADER_NO_MOTHER") == "1":
        return False
    try:
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError):
        return False
    return True


def warm(env: dict) -> None:
    """Start the mother for zygotes with environment `env` now, if there is none: its import of torch
    then overlaps what the grader does before its first zygote (copying the kit)."""
    if available():
        with _lock:
            _mother(env)


def _mother(env: dict) -> tuple[tuple, Mother]:
    """(key, the running mother for `env`'s import-time variables and site_preload), started if there
    is none."""
    variables, preload = tuple(sorted(import_env(env).items())), site_preload(env)
    key = (variables, preload)
    mother = _mothers.get(key)
    if mother is None or mother.proc.poll() is not None:
        mother = _mothers[key] = Mother({**dict(variables), **{k: env[k] for k in ("PATH", "HOME") if k in env},
                                         PRELOAD_VAR: preload, AREA_VAR: "x" * ENV_AREA})
    return key, mother


def fork_zygote(root: str, env: dict, fds: tuple[int, int, int]) -> int | None:
    """The pid of a zygote for the kit copy `root` with environment `env` and
    stdin/stdout/stderr `fds`, forked from this grader's mother (started on first use); None where
    no mother could fork one (the caller then starts a zygote as a fresh Python)."""
    if len(_environ_block(env)) > ENV_AREA:
        return None
    with _lock:
        for _ in range(2):                  # a mother killed meanwhile (a sweep of the grader's children)
            key, mother = _mother(env)
            pid = mother.fork(root, env, fds)
            if pid is not None:
                return pid
            _mothers.pop(key).close()
        return None


def pids() -> set[int]:
    """This grader's mothers that are running (long-lived helpers, not leftovers of a grading)."""
    with _lock:
        return {m.pid for m in _mothers.values() if m.proc.poll() is None}


def close_all() -> None:
    """End every mother of this grader (its zygotes end with it)."""
    with _lock:
        for mother in _mothers.values():
            mother.close()
        _mothers.clear()


# -- the mother process -------------------------------------------------------------------------
def serve(fd: int) -> None:
    """The mother: preload, then fork a zygote for each request until the grader goes away."""
    from autograder.isolate import reap_zombies
    from autograder.zygote import import_preload, preload_site_packages, settle
    preload_site_packages()
    import_preload(missing_ok=True)    # site_preload's part: never the kit's
    grader = os.getppid()
    sock = socket.socket(fileno=fd)
    base_path = [p for p in sys.path if p and os.path.abspath(p) != KIT]
    for name in [m for m in sys.modules if m == "autograder" or m.startswith("autograder.")]:
        del sys.modules[name]          # the zygotes import the grader package from their kit copy
    settle()
    while os.getppid() == grader:
        reap_zombies()                 # zygotes that ended
        if not select.select([sock], [], [], 1.0)[0]:
            continue
        msg, fds, _, _ = socket.recv_fds(sock, 1 << 20, 3)
        if not msg:
            reap_zombies()
            return                     # the grader closed its end
        request = json.loads(msg)
        pid = os.fork()
        if pid == 0:
            _become_zygote(request, fds, sock.fileno(), base_path)
        for f in fds:
            os.close(f)
        sock.send(json.dumps({"pid": pid}).encode())


def _become_zygote(request: dict, fds: list[int], sock: int, base_path: list[str]) -> None:
    """In the forked child: become `python -m autograder.zygote` run in request["root"]. Never returns."""
    code = 70
    try:
        os.close(sock)
        os.setsid()
        for target, f in enumerate(fds):
            os.dup2(f, target)
        os.closerange(3, 1 << 16)
        root, env = request["root"], request["env"]
        os.chdir(root)
        os.environ.clear()
        os.environ.update(env)
        _show_environ(env)
        sys.dont_write_bytecode = bool(env.get("PYTHONDONTWRITEBYTECODE"))
        extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        sys.path[:] = [root, *extra, *base_path]
        import importlib
        import runpy
        importlib.invalidate_caches()
        sys.argv = [os.path.join(root, "autograder", "zygote.py")]
        runpy.run_module("autograder.zygote", run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - reported on the zygote's stderr, the grader's log of it
        import traceback
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _environ_block(env: dict) -> bytes:
    return b"".join(f"{k}={v}".encode() + b"\0" for k, v in env.items())


def _show_environ(env: dict) -> None:
    """Write `env` over this process's initial environment strings (the kernel's env_start..env_end,
    /proc/PID/environ), padded with NULs: the mother's AREA_VAR reserved the room."""
    import ctypes
    with open("/proc/self/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    start, end = int(fields[47]), int(fields[48])       # fields 50 and 51 of proc(5), after pid and comm
    block = _environ_block(env)
    if end - start < len(block):
        raise RuntimeError(f"the zygote's environment ({len(block)} bytes) exceeds its room ({end - start})")
    ctypes.memmove(start, block + b"\0" * (end - start - len(block)), end - start)

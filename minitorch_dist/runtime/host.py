"""A rank host: a helper process that starts rank processes for a launcher in another process.

    MINITORCH_DIST_RANK_HOST=/path/host.sock      # in the launcher's environment
    launch(fn, 4)                                  # ranks are forked by the host, not by the caller

The autograder runs the code under test only in processes it does not trust (another user, a
sandbox): the pytest process that judges must never run it, nor read anything from it that could
run code. The host is such a process, started by the grader with torch already imported; it
listens on a Unix socket and, for each launcher connection, starts one of:

    ("ranks", world_size, address, authkey, spec)   gloo ranks forked from the host (worker.serve)
    ("mpiexec", cmd, extra_env)                     mpiexec and its ranks
    ("sim", payload)                                a whole sim run in one forked process

and reports ("pids", [...]) / ("pid", pid) and later ("exit", who, code[, output tail]) for each
process it started. Everything the host and its ranks send back is plain data (plain.py). When the
launcher's connection closes, the host kills what it started for it. The launcher side of the
protocol is HostLink, with stand-ins for multiprocessing.Process and subprocess.Popen that the
Pool uses unchanged.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from multiprocessing.connection import Connection

from . import channel

HOST_VAR = "MINITORCH_DIST_RANK_HOST"
PATH_MAP_VAR = "MINITORCH_DIST_PATH_MAP"     # "launcher_root=host_root": the caller's sys.path, as seen here


def host_address() -> str | None:
    """The rank host's socket path when this process launches through one, else None."""
    return os.environ.get(HOST_VAR) or None


def map_path(entry: str) -> str:
    """A launcher's sys.path entry as the host sees it (PATH_MAP_VAR), else unchanged."""
    spec = os.environ.get(PATH_MAP_VAR, "")
    if "=" in spec:
        old, new = spec.split("=", 1)
        if entry == old or entry.startswith(old.rstrip(os.sep) + os.sep):
            return new + entry[len(old):]
    return entry


# -- the host (runs in the sandbox) ---------------------------------------------------------
class _Link:
    """One launcher connection on the host side, and what was started for it."""

    def __init__(self, conn: Connection):
        self.conn = conn
        self.children: dict[int, object] = {}      # pid -> rank number, "mpiexec" or "sim"
        self.logs: dict[int, object] = {}          # pid -> output file of mpiexec

    def notify(self, msg) -> None:
        try:
            channel.send_plain(self.conn, msg)
        except OSError:
            pass

    def kill(self) -> None:
        for pid in self.children:
            for kill in (os.killpg, os.kill):
                try:
                    kill(pid, signal.SIGKILL)
                except OSError:
                    pass


def serve(path: str) -> None:
    """Listen on the Unix socket `path` and start what launchers ask for (single-threaded: forks
    are safe). Runs until killed."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(64)
    links: dict[int, _Link] = {}
    while True:
        ready = select.select([server] + [lk.conn for lk in links.values()], [], [], 0.05)[0]
        for item in ready:
            if item is server:
                sock, _ = server.accept()
                link = _Link(Connection(sock.detach()))
                links[link.conn.fileno()] = link
                continue
            link = links[item.fileno()]
            try:
                msg = channel.recv(link.conn)           # from the launcher: trusted
            except (EOFError, OSError):
                link.kill()
                del links[item.fileno()]
                link.conn.close()
                continue
            _start(link, msg, server, links)
        _reap(links)


def _start(link: _Link, msg, server, links) -> None:
    kind = msg[0]
    if kind == "ranks":
        _, world_size, address, authkey, spec = msg
        pids = [_fork(lambda r=r: _rank_main(r, world_size, address, authkey, spec), server, links)
                for r in range(world_size)]
        link.children.update({pid: rank for rank, pid in enumerate(pids)})
        link.notify(("pids", pids))
    elif kind == "mpiexec":
        _, cmd, extra_env = msg
        log = tempfile.TemporaryFile()
        proc = subprocess.Popen(cmd, env=dict(os.environ, **extra_env), stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        link.children[proc.pid], link.logs[proc.pid] = "mpiexec", log
        link.notify(("pid", proc.pid))
    elif kind == "sim":
        pid = _fork(lambda: _sim_main(link.conn, msg[1]), server, links, keep=link.conn)
        link.children[pid] = "sim"


def _fork(main, server, links, keep=None) -> int:
    pid = os.fork()
    if pid:
        return pid
    code = 70
    try:
        server.close()
        for other in links.values():
            if other.conn is not keep:
                other.conn.close()
        main()
        code = 0
    except BaseException:  # noqa: BLE001 - a child never returns into the host's loop
        import traceback
        traceback.print_exc()
    finally:
        os._exit(code)


def _reap(links: dict[int, _Link]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        for link in links.values():
            if pid in link.children:
                who = link.children.pop(pid)
                log = link.logs.pop(pid, None)
                tail = ""
                if log is not None:
                    log.seek(0)
                    tail = log.read().decode(errors="replace")[-3000:]
                    log.close()
                link.notify(("exit", who, os.waitstatus_to_exitcode(status), tail))


def _rank_main(rank: int, world_size: int, address, authkey: bytes, spec: dict) -> None:
    from .worker import forked_main
    forked_main(rank, world_size, address, authkey, spec)


def _sim_main(conn: Connection, payload: bytes) -> None:
    """A whole sim run in this process; its output and result go back over `conn` as plain data."""
    import cloudpickle

    from .errors import RankError
    from .sim import run_sim
    from .worker import RankStream, user_traceback  # noqa: F401
    lock = threading.Lock()

    def send(msg) -> None:
        with lock:
            channel.send_plain(conn, msg)

    sys.stdout, sys.stderr = RankStream(send, "stdout"), RankStream(send, "stderr")
    sys_path, payload = payload
    for entry in reversed(sys_path):          # where the launcher's functions are importable from
        if map_path(entry) not in sys.path:
            sys.path.insert(0, map_path(entry))
    fn, world_size, args, kwargs, options = cloudpickle.loads(payload)
    try:
        res = run_sim(fn, world_size, args, kwargs, **options)
        reply = ("result", list(res), res.counters, res.events, res.wall_time, res.sim_time)
    except RankError as err:
        reply = ("error", err)
    except BaseException as exc:  # noqa: BLE001 - reported to the launcher like a rank's failure
        reply = ("error", RankError(0, world_size, type(exc).__name__, str(exc), user_traceback(exc)))
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        send(reply)
    except Exception as exc:  # noqa: BLE001 - e.g. a return value that is not plain data
        send(("error", RankError(0, world_size, "TypeError", f"the run's result could not be sent back to the "
                                                              f"launcher ({exc})")))


# -- the launcher side ----------------------------------------------------------------------
class HostLink:
    """The launcher's connection to the rank host, and the exits it has reported."""

    def __init__(self, address: str):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(address)
        except OSError as exc:
            from .errors import LaunchError
            raise LaunchError(f"could not reach the rank host at {address} ({exc}); it runs the ranks "
                              f"in the grader's sandbox and may have been killed") from None
        self.conn = Connection(sock.detach())
        self.exits: dict[object, int] = {}
        self.tails: dict[object, str] = {}
        self.lost = False

    def request(self, msg, reply: bool = True):
        channel.send(self.conn, msg)
        return self.next(60.0) if reply else None

    def next(self, timeout: float | None):
        """The next message from the host (None on timeout); records exits on the way."""
        if self.lost or not self.conn.poll(timeout):
            return None
        try:
            msg = channel.recv_plain(self.conn)
        except (EOFError, OSError):
            self.lost = True
            return None
        if msg[0] == "exit":
            self.exits[msg[1]], self.tails[msg[1]] = msg[2], msg[3]
        return msg

    def pump(self) -> None:
        while not self.lost and self.conn.poll(0):
            self.next(0)

    def exit_code(self, who) -> int | None:
        self.pump()
        if who not in self.exits and self.lost:
            return -signal.SIGKILL               # the host is gone, and its children with it
        return self.exits.get(who)

    def close(self) -> None:
        """Let go: the host kills whatever it still runs for this link."""
        self.lost = True
        self.conn.close()


class HostProcess:
    """A rank forked by the host, seen as a multiprocessing.Process (pid, exitcode, join, kill)."""

    def __init__(self, link: HostLink, rank: int, pid: int):
        self.link, self.rank, self.pid = link, rank, pid

    @property
    def exitcode(self) -> int | None:
        return self.link.exit_code(self.rank)

    def join(self, timeout: float | None = None) -> None:
        end = None if timeout is None else time.monotonic() + timeout
        while self.exitcode is None and (end is None or time.monotonic() < end):
            self.link.next(0.02 if end is None else max(0.0, min(0.02, end - time.monotonic())))

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except OSError:
            pass


class HostPopen:
    """mpiexec started by the host, seen as a subprocess.Popen (pid, poll, wait, returncode)."""

    def __init__(self, link: HostLink, pid: int):
        self.link, self.pid = link, pid

    @property
    def returncode(self) -> int | None:
        return self.link.exit_code("mpiexec")

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        end = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            if end is not None and time.monotonic() >= end:
                raise subprocess.TimeoutExpired("mpiexec", timeout)
            self.link.next(0.02)
        return self.returncode

    def output_tail(self) -> str:
        return self.link.tails.get("mpiexec", "")


def start_ranks(address: str, world_size: int, pool_address, authkey: bytes, spec: dict) -> list[HostProcess]:
    """Fork `world_size` gloo ranks on the host; they connect back to `pool_address`."""
    link = HostLink(address)
    reply = link.request(("ranks", world_size, tuple(pool_address), authkey, spec))
    if not reply or reply[0] != "pids":
        from .errors import LaunchError
        raise LaunchError(f"the rank host did not start {world_size} ranks (reply {reply!r})")
    return [HostProcess(link, rank, pid) for rank, pid in enumerate(reply[1])]


def start_mpiexec(address: str, cmd: list[str], extra_env: dict) -> HostPopen:
    """Run `cmd` (mpiexec ...) on the host with the host's environment plus `extra_env`."""
    link = HostLink(address)
    reply = link.request(("mpiexec", list(cmd), dict(extra_env)))
    if not reply or reply[0] != "pid":
        from .errors import LaunchError
        raise LaunchError(f"the rank host did not start mpiexec (reply {reply!r})")
    return HostPopen(link, reply[1])


def run_sim_on_host(address: str, fn, world_size: int, args, kwargs, options: dict):
    """run_sim(...) in a process forked by the host; returns the RunResult or raises its RankError."""
    import cloudpickle

    from .errors import LaunchError, RankError
    from .pool import Pool
    from .results import RunResult
    link = HostLink(address)
    try:
        payload = cloudpickle.dumps((fn, world_size, tuple(args), dict(kwargs or {}), options))
        link.request(("sim", (tuple(sys.path), payload)), reply=False)
        while True:
            msg = link.next(None)
            if msg is None or msg[0] == "exit":
                code = link.exits.get("sim")
                raise RankError(0, world_size, "RankExited", f"the sim run's process ended (exit code {code}) "
                                                             f"before it reported a result")
            if msg[0] == "out":
                Pool.print_output(None, msg)
            elif msg[0] == "result":
                _, values, counters, events, wall, sim_time = msg
                return RunResult(values, counters, events, backend="sim", wall_time=wall, sim_time=sim_time)
            elif msg[0] == "error":
                if isinstance(msg[1], RankError):
                    raise msg[1]
                raise LaunchError(f"the sim run failed: {msg[1]!r}")
    finally:
        link.close()

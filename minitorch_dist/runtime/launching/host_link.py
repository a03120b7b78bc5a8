"""The launcher's side of a rank host (host.py): ask it for ranks, mpiexec or a sim run, and
follow what it reports.

    MINITORCH_DIST_RANK_HOST=/path/host.sock      # set: launch() goes through the host
    procs = start_ranks(address, 4, pool_address, authkey, spec)    # stand-ins for mp.Process
    popen = start_mpiexec(address, cmd, extra_env)                  # a stand-in for subprocess.Popen
    result = run_sim_on_host(address, fn, 1024, args, kwargs, options)

Everything the host sends is read as plain data (plain.py). Closing a link makes the host kill
whatever it still runs for it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from multiprocessing.connection import Connection

from ..errors import LaunchError, RankError
from . import channel, plain

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


def extend_path(sys_path) -> None:
    """Put a launcher's sys.path entries (as the host sees them) before this process's: functions
    pickled by reference import from them."""
    for entry in reversed(sys_path):
        entry = map_path(entry)
        if entry not in sys.path:
            sys.path.insert(0, entry)


class HostLink:
    """The launcher's connection to the rank host, and the exits it has reported."""

    def __init__(self, address: str):
        import socket
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(address)
        except OSError as exc:
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
        """Close the link: the host kills every process it started for it. Never a signal to
        self.pid, which is only what the host reported (it runs untrusted code)."""
        self.link.close()


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
        raise LaunchError(f"the rank host did not start {world_size} ranks (reply {reply!r})")
    return [HostProcess(link, rank, pid) for rank, pid in enumerate(reply[1])]


def start_mpiexec(address: str, cmd: list[str], extra_env: dict) -> HostPopen:
    """Run `cmd` (mpiexec ...) on the host with the host's environment plus `extra_env`."""
    link = HostLink(address)
    reply = link.request(("mpiexec", list(cmd), dict(extra_env)))
    if not reply or reply[0] != "pid":
        raise LaunchError(f"the rank host did not start mpiexec (reply {reply!r})")
    return HostPopen(link, reply[1])


def run_sim_on_host(address: str, fn, world_size: int, args, kwargs, options: dict, own=None):
    """run_sim(...) in a process forked by the host; returns the RunResult or raises its RankError.
    `own`: launch's rank_args, each rank's pickled apart (meta["own"]): where the ranks are processes
    (the sim engine) rank r's process holds rank_args[r] only."""
    import cloudpickle

    from ..results import RunResult
    from ..sim.network import SimNetwork
    link = HostLink(address)
    try:
        payload = cloudpickle.dumps((fn, world_size, tuple(args), dict(kwargs or {}), options))
        net = options.get("network") or SimNetwork()
        meta = {"world_size": world_size, "alpha": net.alpha, "beta": net.beta, "eager_limit": net.eager_limit,
                "collectives": options.get("collectives", True), "trace": options.get("trace", True),
                "own": None if own is None else [cloudpickle.dumps(tuple(a)) for a in own]}
        link.request(("sim", (tuple(sys.path), payload, meta)), reply=False)
        while True:
            msg = link.next(None)
            if msg is None or msg[0] == "exit":
                code = link.exits.get("sim")
                raise RankError(0, world_size, "RankExited", f"the sim run's process ended (exit code {code}) "
                                                             f"before it reported a result")
            if msg[0] == "out":
                channel.print_output(None, msg)
            elif msg[0] in ("result", "encoded result"):      # encoded: each rank's value as the rank sent it
                _, values, counters, events, wall, sim_time = msg
                if msg[0] == "encoded result":
                    values = [plain.decode(v) for v in values]
                return RunResult(values, counters, events, backend="sim", wall_time=wall, sim_time=sim_time)
            elif msg[0] == "error":
                if isinstance(msg[1], RankError):
                    if len(msg) > 2 and msg[2] is not None:     # the rank's exception, as the rank sent it
                        try:
                            msg[1].cause = plain.decode(msg[2])
                        except plain.PlainDataError:
                            pass
                    raise msg[1]
                raise LaunchError(f"the sim run failed: {msg[1]!r}")
    finally:
        link.close()

"""A rank host: a helper process that starts rank processes for a launcher in another process.

    MINITORCH_DIST_RANK_HOST=/path/host.sock      # in the launcher's environment
    launch(fn, 4)                                  # ranks are forked by the host, not by the caller

The autograder runs the code under test only in processes it does not trust (another user, a
sandbox): the pytest process that judges must never run it, nor read anything from it that could
run code. The host is such a process, started by the grader with torch already imported; it
listens on a Unix socket and, for each launcher connection, starts one of:

    ("ranks", world_size, address, authkey, spec)   gloo ranks forked from the host (worker.serve)
    ("mpiexec", cmd, extra_env)                     mpiexec and its ranks
    ("sim", payload)                                a whole sim run in one forked process (in a
                                                    grading: the engine, its ranks processes: sim/processes.py)

and reports ("pids", [...]) / ("pid", pid) and later ("exit", who, code[, output tail]) for each
process it started. Everything the host and its ranks send back is plain data (plain.py). When the
launcher's connection closes, the host kills what it started for it. The launcher side of the
protocol is host_link.py.
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
from multiprocessing.connection import Connection

from ..errors import RankError
from . import channel
from .host_link import extend_path


# -- the host (runs in the sandbox) ---------------------------------------------------------
_PIDFDS: dict[int, int] = {}     # pid of a child -> its pidfd: readable when it ends (wakes serve's loop)
_UNWATCHED = [False]             # a child without a pidfd: the loop looks for exits every 50 ms instead
_OUTPUTS: set[int] = set()       # read ends of the ranks' own stdout/stderr pipes: copied to the host's


def _watch(pid: int) -> None:
    try:
        _PIDFDS[pid] = os.pidfd_open(pid)
    except (AttributeError, OSError):      # not Linux >= 5.3, or out of descriptors
        _UNWATCHED[0] = True


def _preload() -> None:
    """Import the gloo backend once here, not in every rank forked from here after the fork."""
    try:
        from ..backends import backend_class
        backend_class("gloo")
    except Exception:  # noqa: BLE001 - a rank that needs it reports the failure itself
        pass


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


def serve(where) -> None:
    """Listen on the Unix socket `where` (a path, or a socket already bound and listening) and start
    what launchers ask for (single-threaded: forks are safe). Runs until killed."""
    if isinstance(where, socket.socket):
        server = where
    else:
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(where)
        server.listen(64)
    links: dict[int, _Link] = {}
    _preload()
    while True:
        waits = [server] + [lk.conn for lk in links.values()] + list(_PIDFDS.values()) + list(_OUTPUTS)
        ready = select.select(waits, [], [], 0.05 if _UNWATCHED[0] else 1.0)[0]
        for item in ready:
            if item in _OUTPUTS:
                _forward(item)
                continue
            if isinstance(item, int):              # a child ended: _reap below reports it
                continue
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
        pids = []
        for r in range(world_size):        # each rank's output through a pipe of its own: no open file
            out, into = os.pipe()          # (offset, flags) that ranks share, and so could signal through
            _OUTPUTS.add(out)
            pids.append(_fork(lambda r=r, into=into: _rank_main(r, world_size, address, authkey, spec, into),
                              server, links))
            os.close(into)
        for pid in pids:
            _watch(pid)
        link.children.update({pid: rank for rank, pid in enumerate(pids)})
        link.notify(("pids", pids))
    elif kind == "mpiexec":
        _, cmd, extra_env = msg
        log = tempfile.TemporaryFile()
        proc = subprocess.Popen(cmd, env=dict(os.environ, **extra_env), stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        link.children[proc.pid], link.logs[proc.pid] = "mpiexec", log
        _watch(proc.pid)
        link.notify(("pid", proc.pid))
    elif kind == "sim":
        pid = _fork(lambda: _sim_main(link.conn, msg[1]), server, links, keep=link.conn)
        link.children[pid] = "sim"
        _watch(pid)


def _fork(main, server, links, keep=None) -> int:
    pid = os.fork()
    if pid:
        return pid
    code = 70
    try:
        server.close()
        for fd in [*_PIDFDS.values(), *_OUTPUTS]:
            os.close(fd)
        _PIDFDS.clear()
        _OUTPUTS.clear()
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
        if pid in _PIDFDS:
            os.close(_PIDFDS.pop(pid))
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


def _forward(fd: int) -> None:
    """Copy what a rank wrote to its stdout/stderr to the host's own output."""
    data = os.read(fd, 1 << 16)
    if not data:
        _OUTPUTS.discard(fd)
        os.close(fd)
        return
    try:
        os.write(1, data)
    except OSError:            # past the file size limit: dropped
        pass


def _rank_main(rank: int, world_size: int, address, authkey: bytes, spec: dict, output: int) -> None:
    from .worker import forked_main
    for fd in (1, 2):
        os.dup2(output, fd)
    os.close(output)
    forked_main(rank, world_size, address, authkey, spec)


def _sim_main(conn: Connection, payload: bytes) -> None:
    """A whole sim run in this process; its output and result go back over `conn` as plain data."""
    import cloudpickle

    from ..errors import user_traceback
    from ..sim import processes
    from ..sim.network import run_sim
    from . import isolation, per_rank
    from .worker import RankStream, isolate, isolate_sim_process
    sys_path, payload, meta = payload
    world_size = meta["world_size"]
    engine = isolation.engine_wanted() and world_size <= processes.MAX_RANKS   # a grading: the clock out of reach
    if not engine:                            # in a grading: no reach into the test's other processes
        isolate(keep=(conn.fileno(),))
    lock = threading.Lock()

    def send(msg) -> None:
        with lock:
            channel.send_plain(conn, msg)

    sys.stdout, sys.stderr = RankStream(send, "stdout"), RankStream(send, "stderr")
    try:
        if engine:                            # the ranks' domains are made beside the engine's, not in it
            reply = processes.run_on_processes(payload, sys_path, meta, send,
                                               lambda fds: isolate_sim_process((conn.fileno(), *fds)))
        else:
            extend_path(sys_path)             # where the launcher's functions are importable from
            fn, world_size, args, kwargs, options = cloudpickle.loads(payload)
            if meta.get("own") is not None:   # threads of one process: each rank picks its own element
                fn = per_rank.appended(fn, [cloudpickle.loads(a) for a in meta["own"]])
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

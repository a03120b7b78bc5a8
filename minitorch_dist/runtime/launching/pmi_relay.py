"""An mpiexec rank's link to the process manager, closed to the code under test (gradings only).

    pmi_relay.start()     # in an mpiexec rank before its Landlock domain and MPI_Init (worker._mpi_main)
    pmi_relay.seal()      # once the world communicator is built, before any code under test runs

MPICH's ranks talk to hydra over PMI_FD (PMI-1: text commands, one a line; "mcmd=" commands end with
"endcmd"). MPI_Init needs it (the key-value space carries every rank's address); afterwards the
same link would let rank code move data between ranks outside the sockets whose traffic the grader
measures (MPI_Publish_name / MPI_Lookup_name store strings in hydra) and start processes outside
the ranks' Landlock domains (MPI_Comm_spawn: hydra starts them). So in a grading the rank forks a
relay before its domain is made (the relay is outside it: no rank can trace or signal it): the
relay holds the real PMI_FD, and the rank gets one end of a socketpair on the same descriptor
number. Until seal() every command passes; after it only finalize and abort do. Any other command
is answered rc=1 (publish, lookup, spawn, put, get: the rank's MPI call fails, and explain() adds
why to the rank's reported error), or, if the relay does not know its answer, ends the relay; the
relay also says it on stderr. Standard library only.
"""

from __future__ import annotations

import os
import select
import socket
import sys

ALLOWED_SEALED = (b"cmd=finalize", b"cmd=abort")
REFUSED = ("in a grading a rank's link to mpiexec (PMI) carries only MPI_Init, MPI_Finalize and MPI_Abort: "
           "MPI_Comm_spawn, MPI_Publish_name, MPI_Lookup_name and the like are refused")
RESULTS = {b"publish_name": b"publish_result", b"unpublish_name": b"unpublish_result", b"lookup_name": b"lookup_result",
           b"spawn": b"spawn_result", b"put": b"put_result", b"get": b"get_result"}   # a refusal's answer (rc=1)
_seal_fd: list[int] = []
_sealed: list[bool] = []


def start() -> bool:
    """Fork the relay; PMI_FD's descriptor becomes this rank's end of it. False without PMI_FD."""
    pmi = os.environ.get("PMI_FD", "")
    if not pmi.isdigit():
        return False
    real = int(pmi)
    mine, theirs = socket.socketpair()
    seal_r, seal_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            from .isolation import close_inherited, die_with_parent
            die_with_parent()                             # SIGKILL when the rank ends
            end = theirs.detach()
            close_inherited(keep=(real, end, seal_r))
            _relay(real, end, seal_r, os.environ.get("PMI_RANK", "?"))
        except BaseException:  # noqa: BLE001 - the relay never returns into the rank's code
            code = 70
        finally:
            os._exit(code)
    os.close(seal_r)
    theirs.close()
    os.dup2(mine.fileno(), real)          # the same number: MPI_Init reads PMI_FD from the environment
    mine.close()
    _seal_fd.append(seal_w)
    return True


def keep() -> tuple[int, ...]:
    """The descriptors the rank must keep open through its isolation (its seal pipe)."""
    return tuple(_seal_fd)


def seal() -> None:
    """From now on the relay passes finalize and abort only (nothing when start() made no relay)."""
    while _seal_fd:
        fd = _seal_fd.pop()
        os.write(fd, b"s")
        os.close(fd)
        _sealed.append(True)


def explain(message: str) -> str:
    """A failed rank's message, with why when MPICH says a PMI call failed behind a sealed relay."""
    if _sealed and ("pmi" in message.lower() or "MPI_Comm_spawn" in message):   # spawn's other ranks: no "pmi"
        return f"{message}\n({REFUSED})"
    return message


def _relay(real: int, rank_end: int, seal_fd: int, rank: str) -> None:
    sealed, pending = False, b""
    while True:
        watched = [real, rank_end] + ([] if sealed else [seal_fd])
        ready = select.select(watched, [], [])[0]
        if not sealed and (seal_fd in ready or rank_end in ready):
            sealed = _sealed_now(seal_fd)            # written before any later command of the rank
        if real in ready:
            data = os.read(real, 65536)
            if not data:
                return
            _send_all(rank_end, data)
        if rank_end in ready:
            data = os.read(rank_end, 65536)
            if not data:
                return
            if not sealed:
                _send_all(real, data)
                continue
            pending += data
            while True:
                command, pending = _split(pending)
                if command is None:
                    break
                if not command.startswith(ALLOWED_SEALED):
                    name = command.split(b"\n", 1)[0].split(b" ", 1)[0].split(b"=", 1)[-1]
                    why = f"{name.decode(errors='replace')} refused: {REFUSED}"
                    print(f"rank {rank}: {why}", file=sys.stderr, flush=True)
                    answer = RESULTS.get(name)
                    if answer is None:
                        return
                    _send_all(rank_end, b"cmd=%s rc=1 msg=%s\n" % (answer, why.replace(" ", "_").encode()))
                    continue
                _send_all(real, command)


def _sealed_now(seal_fd: int) -> bool:
    if not select.select([seal_fd], [], [], 0)[0]:
        return False
    os.read(seal_fd, 1)                       # a byte, or EOF: the rank wrote it, or is gone
    return True


def _split(buffer: bytes) -> tuple[bytes | None, bytes]:
    """(the first whole command, the rest) of `buffer`, or (None, buffer) while it is incomplete."""
    end = b"endcmd\n" if buffer.startswith(b"mcmd=") else b"\n"
    at = buffer.find(end)
    if at < 0:
        return None, buffer
    return buffer[:at + len(end)], buffer[at + len(end):]


def _send_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data):]

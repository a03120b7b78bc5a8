"""The TCPStore of a local job: its server in the launcher, listening on 127.0.0.1 alone.

    listener = store_listener()                  # bound and listening: its port goes to the ranks
    ... start the ranks ...                      # they may connect now: the kernel queues them
    store = store_server(listener, world_size)   # torch's server takes the socket over

torch's own listening socket takes every interface, IPv6 first: each rank's connection then
comes from ::ffff:127.0.0.1, a name /etc/hosts does not hold, and the server asks DNS for it, one
connection after another on its one thread; a lost DNS answer stalled every rank 5 s (about one
start of 8 ranks in 4 on a loaded machine). A socket of our own, AF_INET on 127.0.0.1, is looked
up in /etc/hosts, and no other machine can reach the store. The server starts after the ranks were
forked: forking no longer copies its running thread, and the forks start that much sooner.
"""

from __future__ import annotations

import datetime
import os
import socket

import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=60)


def takes_listener() -> bool:
    """Can this torch's TCPStore serve on a socket it is given (master_listen_fd)?"""
    return "master_listen_fd" in (dist.TCPStore.__init__.__doc__ or "")


def store_listener() -> socket.socket:
    """A TCP socket listening on 127.0.0.1 on a port the OS picked (two jobs never collide)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
    except BaseException:
        sock.close()
        raise
    return sock


def store_server(world_size: int, listener: socket.socket | None = None):
    """The job's TCPStore server, on `listener` (taken over: closed with the store) when given and
    this torch can, else on a port of torch's own choosing."""
    if listener is None or not takes_listener():
        if listener is not None:
            listener.close()
        return dist.TCPStore("127.0.0.1", 0, world_size, True, wait_for_workers=False, timeout=TIMEOUT)
    port = listener.getsockname()[1]
    fd = listener.detach()
    try:
        return dist.TCPStore("127.0.0.1", port, world_size, True, wait_for_workers=False, timeout=TIMEOUT,
                             master_listen_fd=fd)
    except TypeError:          # refused before torch took the descriptor
        os.close(fd)
        raise


def store_client(host: str, port: int, world_size: int):
    """A rank's client of the job's store."""
    return dist.TCPStore(host, port, world_size, False, timeout=TIMEOUT)

"""TCP probes run inside the nodes, by file path with the standard library only (no torch import,
so they start in milliseconds):

    python probe.py serve PORT                  # echo server for one connection, then exits
    python probe.py rtt HOST PORT [COUNT]       # round trips of 1 byte: JSON {min_s, median_s}
    python probe.py pingpong HOST PORT SIZES..  # round trips of SIZES bytes each way: JSON, with the
                                                # alpha-beta fit (one way: alpha + n * beta)
    python probe.py sink PORT                   # receives one stream, answers 1 byte, exits
    python probe.py stream HOST PORT NBYTES     # sends NBYTES one way: JSON {bytes, seconds}

A message is an 8-byte length then that many bytes; the server sends the same number back.
"""

import json
import socket
import statistics
import struct
import sys
import time

CHUNK = 1 << 20


def _recv_exact(sock, n: int, buf: bytearray) -> None:
    view = memoryview(buf)[:n]
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], min(CHUNK, n - got))
        if k == 0:
            raise ConnectionError("peer closed")
        got += k


def _accept_one(port: int) -> tuple[socket.socket, socket.socket]:
    """(listener, connection): the first client on `port` (every address), waited for up to 30 s."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("0.0.0.0", port))
    listener.listen(1)
    listener.settimeout(30)
    conn, _ = listener.accept()
    return listener, conn


def serve(port: int) -> None:
    listener, conn = _accept_one(port)
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = bytearray(8)
    try:
        while True:
            head = bytearray(8)
            _recv_exact(conn, 8, head)
            (n,) = struct.unpack("!Q", head)
            if len(buf) < n:
                buf = bytearray(n)
            _recv_exact(conn, n, buf)
            conn.sendall(memoryview(buf)[:n])
    except ConnectionError:
        pass
    finally:
        conn.close()
        listener.close()


def sink(port: int) -> None:
    listener, conn = _accept_one(port)
    head = bytearray(8)
    _recv_exact(conn, 8, head)
    (n,) = struct.unpack("!Q", head)
    buf = bytearray(CHUNK)
    got = 0
    while got < n:
        k = conn.recv_into(buf, min(CHUNK, n - got))
        if k == 0:
            break
        got += k
    conn.sendall(b"k")
    conn.close()
    listener.close()


def _connect(host: str, port: int, wait: float = 15.0) -> socket.socket:
    deadline = time.monotonic() + wait
    while True:
        try:
            sock = socket.create_connection((host, port), timeout=60)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def round_trips(sock, n: int, count: int) -> list:
    """Seconds of `count` round trips of n bytes each way."""
    out = bytes(n)
    back = bytearray(max(n, 1))
    times = []
    for _ in range(count):
        t0 = time.perf_counter()
        sock.sendall(struct.pack("!Q", n) + out)
        _recv_exact(sock, n, back)
        times.append(time.perf_counter() - t0)
    return times


def fit(sizes: list, one_way: list) -> tuple:
    """Least-squares alpha, beta of one_way = alpha + n * beta."""
    mx, my = statistics.fmean(sizes), statistics.fmean(one_way)
    sxx = sum((x - mx) ** 2 for x in sizes)
    beta = sum((x - mx) * (y - my) for x, y in zip(sizes, one_way)) / sxx
    return my - beta * mx, beta


def main(argv: list) -> None:
    cmd = argv[0]
    if cmd == "serve":
        serve(int(argv[1]))
        return
    if cmd == "sink":
        sink(int(argv[1]))
        return
    sock = _connect(argv[1], int(argv[2]))
    with sock:
        if cmd == "rtt":
            count = int(argv[3]) if len(argv) > 3 else 50
            round_trips(sock, 1, 5)                      # warm up
            t = round_trips(sock, 1, count)
            print(json.dumps({"min_s": min(t), "median_s": statistics.median(t), "count": count}))
        elif cmd == "pingpong":
            sizes = [int(s) for s in argv[3:]]
            round_trips(sock, sizes[0], 2)
            rows = []
            for n in sizes:
                reps = 3 if n >= 1 << 20 else 10
                rows.append((n, min(round_trips(sock, n, reps)) / 2))
            alpha, beta = fit([r[0] for r in rows], [r[1] for r in rows])
            print(json.dumps({"sizes": sizes, "one_way_s": [r[1] for r in rows], "alpha_s": alpha,
                              "beta_s_per_byte": beta, "bits_per_second": 8 / beta if beta > 0 else None}))
        elif cmd == "stream":
            n = int(argv[3])
            payload = memoryview(bytes(min(n, CHUNK)))
            t0 = time.perf_counter()
            sock.sendall(struct.pack("!Q", n))
            left = n
            while left:
                k = min(left, len(payload))
                sock.sendall(payload[:k])
                left -= k
            _recv_exact(sock, 1, bytearray(1))
            print(json.dumps({"bytes": n, "seconds": time.perf_counter() - t0}))
        else:
            raise SystemExit(f"unknown probe command {cmd!r}")


if __name__ == "__main__":
    main(sys.argv[1:])

"""python -m minitorch_dist.run -n N script.py [args...]: start N ranks of a script (torchrun-like).

Each rank is a fresh `python script.py args...` with RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR and MASTER_PORT set (the port is picked by the OS: jobs never collide),
so launch() in the script runs that rank only, exactly as under torchrun. Output
lines are prefixed with "[rank r]". If a rank fails, the others are stopped and
the exit code is the failed rank's; Ctrl-C stops every rank.
"""

from __future__ import annotations

import argparse
import datetime
import os
import signal
import subprocess
import sys
import threading
import time

from .runtime.backends import process_backends


def _pump(stream, rank: int, out, prefix: bool) -> None:
    for line in iter(stream.readline, b""):
        text = line.decode(errors="replace")
        out.write(f"[rank {rank}] {text}" if prefix else text)
        out.flush()


def _kill(procs) -> None:
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    for p in procs:
        p.wait()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m minitorch_dist.run", description=__doc__.split("\n")[0])
    parser.add_argument("-n", "--nproc", type=int, required=True, help="number of ranks")
    parser.add_argument("--backend", default="gloo", choices=process_backends(),
                        help="%(choices)s (for mpi use mpirun; sim runs in one process: python script.py)")
    parser.add_argument("--device", default=None, choices=["cpu", "cuda"],
                        help="where each rank computes (group.device); nccl is always cuda")
    parser.add_argument("--deadline", type=float, default=None, help="seconds a blocking op may wait")
    parser.add_argument("--no-prefix", action="store_true", help="do not prefix output with [rank r]")
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    opts = parser.parse_args(argv)
    if opts.nproc < 1:
        parser.error("-n must be at least 1")

    import torch.distributed as dist   # imported here so --help stays fast
    store = dist.TCPStore("127.0.0.1", 0, opts.nproc, True, wait_for_workers=False,
                          timeout=datetime.timedelta(seconds=300))
    env = dict(os.environ, WORLD_SIZE=str(opts.nproc), LOCAL_WORLD_SIZE=str(opts.nproc),
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(store.port), MINITORCH_DIST_RUN="1",
               MINITORCH_DIST_STORE_HOSTED="1", MINITORCH_DIST_BACKEND=opts.backend)
    env.setdefault("OMP_NUM_THREADS", "1")
    if opts.device is not None:
        env["MINITORCH_DIST_DEVICE"] = opts.device
    if opts.deadline is not None:
        env["MINITORCH_DIST_DEADLINE"] = str(opts.deadline)
    procs, pumps = [], []
    try:
        for rank in range(opts.nproc):
            p = subprocess.Popen([sys.executable, opts.script, *opts.args], start_new_session=True,
                                 env=dict(env, RANK=str(rank), LOCAL_RANK=str(rank)),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
            procs.append(p)
            for stream, out in ((p.stdout, sys.stdout), (p.stderr, sys.stderr)):
                t = threading.Thread(target=_pump, args=(stream, rank, out, not opts.no_prefix), daemon=True)
                t.start()
                pumps.append(t)
        while True:
            codes = [p.poll() for p in procs]
            failed = [(r, c) for r, c in enumerate(codes) if c not in (None, 0)]
            if failed:
                rank, code = failed[0]
                _kill(procs)
                for t in pumps:
                    t.join(1)
                how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
                sys.stderr.write(f"minitorch_dist.run: rank {rank} failed ({how}); stopped the other "
                                 f"ranks. Its error is printed above with the prefix [rank {rank}].\n")
                return code if code > 0 else 1
            if all(c == 0 for c in codes):
                for t in pumps:
                    t.join(5)
                return 0
            time.sleep(0.05)
    except KeyboardInterrupt:
        _kill(procs)
        sys.stderr.write("minitorch_dist.run: interrupted; every rank was stopped\n")
        return 130


if __name__ == "__main__":
    sys.exit(main())

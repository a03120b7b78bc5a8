"""Every Group op on the mpi backend, for any world size; rank 0 prints every rank's results.

    mpirun -n 5 python tests/runtime/mpi_scripts/ops.py

Each rank first runs the exercise every backend passes (tests/runtime/exercise.py),
then this file's checks against closed forms: every wire dtype, zero-size and 0-dim
tensors, out-of-order waits, sub-groups. Rank 0 prints two lines, read by
tests/runtime/test_mpi.py, which takes the verdict:
  MTD_RESULT [json per rank]: failed checks, a few values, counters and the ledger
      of what the rank sent, received and reduced (after the exercise);
  MTD_EXERCISE <base64 pickle>: every rank's exercise() results, for check_exercise.
"""

from __future__ import annotations

import base64
import json
import math
import os
import pickle
import sys
from collections import defaultdict

import torch

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..")))  # tests.*

from minitorch_dist.runtime.transports import wire
from minitorch_dist.runtime.errors import MessageMismatchError
from minitorch_dist import launch
from minitorch_dist.runtime.transports.mpi_progress import _mpi
from tests.runtime.exercise import exercise

P2P_DTYPES = wire.DTYPES  # every dtype the wire format carries
# every wire dtype (MPI reduces float16, bfloat16, float8 and bool in a wider copy)
REDUCE_DTYPES = [getattr(torch, name) for name in (
    "float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "uint16",
    "uint32", "uint64", "bool", "complex64", "complex128", "float8_e4m3fn", "float8_e5m2")
    if hasattr(torch, name)]
SHAPES = [(3, 5), (0,), (2, 0), ()]  # incl. zero-size and 0-dim


def pattern(dtype: torch.dtype, shape, owner: int, salt: int = 0) -> torch.Tensor:
    """A tensor that depends on (owner, salt), exactly representable in `dtype`."""
    n = math.prod(shape)
    base = (torch.arange(n, dtype=torch.float64) + 7 * owner + salt) % 16
    if dtype == torch.bool:
        t = base % 2 == 0
    elif dtype.is_complex:
        t = torch.complex(base, -base).to(dtype)
    else:
        t = base.to(dtype)
    return t.reshape(shape)


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Same dtype, shape and bytes (works for float8 and bool too)."""
    return (a.dtype == b.dtype and a.shape == b.shape
            and torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8)))


class Checker:
    """Collects failed checks, and a ledger of what Group calls should have counted."""

    def __init__(self, group):
        self.group = group
        self.failures: list[str] = []
        # op -> [calls, messages sent, bytes sent, messages received, bytes received, tensor bytes]
        self.ledger = defaultdict(lambda: [0, 0, 0, 0, 0, 0])

    def check(self, ok: bool, what: str) -> None:
        if not ok:
            self.failures.append(what)

    def count(self, op: str, sent: torch.Tensor | None = None, recv: torch.Tensor | None = None,
              coll_bytes: int = 0) -> None:
        row = self.ledger[op]
        row[0] += 1
        if sent is not None:
            row[1] += 1
            row[2] += sent.numel() * sent.element_size()
        if recv is not None:
            row[3] += 1
            row[4] += recv.numel() * recv.element_size()
        row[5] += coll_bytes


def p2p(g, c: Checker) -> None:
    """send/recv in a ring, isend/irecv batches waited out of order, sendrecv, fan-in/out."""
    p, r = g.size, g.rank
    right, left = (r + 1) % p, (r - 1) % p
    # 1. blocking ring: even ranks send first, odd ranks receive first
    for i, dtype in enumerate(P2P_DTYPES):
        for j, shape in enumerate(SHAPES):
            tag = (i + j) % 5
            out = pattern(dtype, shape, r, salt=i)
            buf = torch.empty(shape, dtype=dtype)
            if r % 2 == 0:
                g.send(out, right, tag)
                g.recv(buf, left, tag)
            else:
                g.recv(buf, left, tag)
                g.send(out, right, tag)
            c.count("send", sent=out)
            c.count("recv", recv=buf)
            c.check(same(buf, pattern(dtype, shape, left, salt=i)), f"send/recv {dtype} {shape}")
    # 2. isend/irecv: many messages on one tag, receives waited in reverse order
    shapes = [(i + 1, 2) for i in range(len(P2P_DTYPES))]
    recvs = [(g.irecv(torch.empty(s, dtype=d), left, tag=7), d, s) for d, s in zip(P2P_DTYPES, shapes)]
    outs = [pattern(d, s, r, salt=3) for d, s in zip(P2P_DTYPES, shapes)]
    sends = [g.isend(t, right, tag=7) for t in outs]
    for handle, dtype, shape in reversed(recvs):
        got = handle.wait()
        c.count("irecv", recv=got)
        c.check(same(got, pattern(dtype, shape, left, salt=3)), f"irecv {dtype} {shape}")
    for handle, t in zip(sends, outs):
        handle.wait()
        c.count("isend", sent=t)
    # 3. sendrecv: small, large (4 MB, rendezvous protocol), into a non-contiguous buffer
    for shape, dtype in (((4, 4), torch.float32), ((1 << 20,), torch.float32), ((3, 4), torch.bfloat16)):
        out = pattern(dtype, shape, r, salt=5)
        buf = torch.empty(shape, dtype=dtype)
        if shape == (3, 4):
            buf = torch.empty((4, 3), dtype=dtype).t()
        got = g.sendrecv(out, right, buf, left, tag=3)
        c.count("sendrecv", sent=out, recv=buf)
        c.check(got is buf and same(got.contiguous(), pattern(dtype, shape, left, salt=5)),
                f"sendrecv {dtype} {shape}")
    # 4. all-to-all of 4 MB messages (rendezvous), sends waited first: the receives must
    #    progress without being waited on (irecv posts their payloads' receives at once)
    n = 1 << 20
    recvs = {q: g.irecv(torch.empty(n), q, tag=8) for q in range(p) if q != r}
    outs = {q: torch.full((n,), float(100 * r + q)) for q in range(p) if q != r}
    sends = {q: g.isend(outs[q], q, tag=8) for q in outs}
    for q, h in sends.items():
        h.wait()
        c.count("isend", sent=outs[q])
    for q, h in recvs.items():
        got = h.wait()
        c.count("irecv", recv=got)
        c.check(bool((got == 100 * q + r).all()), f"all-to-all 4 MB from {q}")
    # 5. rank 0 to every rank and back, receives posted in reverse order
    if r == 0:
        handles = [(q, g.irecv(torch.empty(2, dtype=torch.int64), q, tag=9)) for q in reversed(range(1, p))]
        for q in range(1, p):
            out = torch.tensor([0, q])
            g.send(out, q, tag=9)
            c.count("send", sent=out)
        for q, h in handles:
            got = h.wait()
            c.count("irecv", recv=got)
            c.check(got.tolist() == [q, 0], f"fan-in from {q}")
    else:
        buf = torch.empty(2, dtype=torch.int64)
        g.recv(buf, 0, tag=9)
        c.count("recv", recv=buf)
        c.check(buf.tolist() == [0, r], "fan-out to this rank")
        out = torch.tensor([r, 0])
        g.send(out, 0, tag=9)
        c.count("send", sent=out)


def closed_form(op: str, p: int) -> float:
    """The reduction over p ranks of reduce_input's values (q + 1; 1 + q % 2 for prod)."""
    return {"sum": p * (p + 1) / 2, "max": p, "min": 1, "prod": 2 ** (p // 2), "avg": (p + 1) / 2}[op]


def reduce_input(op: str, dtype: torch.dtype, q: int, shape=(5,)) -> torch.Tensor:
    if dtype == torch.bool:
        return torch.full(shape, q == 0)
    value = 1 + q % 2 if op == "prod" else q + 1
    return torch.full(shape, float(value), dtype=torch.float64).to(dtype)


def reduce_expected(op: str, dtype: torch.dtype, p: int, shape=(5,)) -> torch.Tensor:
    if dtype == torch.bool:  # sum/max: any rank true (rank 0 is); prod/min: all ranks true
        return torch.full(shape, op in ("sum", "max") or p == 1)
    return torch.full(shape, closed_form(op, p), dtype=torch.float64).to(dtype)


def collectives(g, c: Checker, values: dict) -> None:
    p, r = g.size, g.rank
    g.barrier()
    c.count("barrier")
    # all_reduce: closed forms for every op and dtype
    for dtype in REDUCE_DTYPES:
        ops = ["sum", "prod"] if dtype.is_complex else ["sum", "max", "min", "prod"]
        if (dtype.is_floating_point or dtype.is_complex) and dtype.itemsize > 1:  # torch cannot divide float8
            ops.append("avg")
        for op in ops:
            x = reduce_input(op, dtype, r)
            got = g.all_reduce(x, op)
            c.count("all_reduce", coll_bytes=x.numel() * x.element_size())
            want = reduce_expected(op, dtype, p)
            ok = torch.allclose(got, want, rtol=1e-2) if op == "avg" else same(got, want)
            c.check(got is x and ok, f"all_reduce {op} {dtype}: got {got.tolist()}")
            if dtype == torch.float32:
                values[f"all_reduce_{op}"] = got[0].item()
    # all_reduce: random data against a single-process reference
    for dtype in (torch.float32, torch.float64):
        inputs = [torch.randn(257, generator=torch.Generator().manual_seed(q), dtype=dtype) for q in range(p)]
        got = g.all_reduce(inputs[r].clone())
        c.count("all_reduce", coll_bytes=inputs[r].numel() * inputs[r].element_size())
        c.check(torch.allclose(got, torch.stack(inputs).sum(0), rtol=1e-5, atol=1e-5), f"all_reduce randn {dtype}")
    for shape in ((0,), (3, 0)):
        x = torch.empty(shape)
        c.check(g.all_reduce(x).shape == shape, f"all_reduce zero-size {shape}")
        c.count("all_reduce")
    # all_gather
    for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.bool, torch.int64, torch.complex64):
        for shape in ((2, 3), (0, 3)):
            x = pattern(dtype, shape, r, salt=1)
            got = g.all_gather(x)
            c.count("all_gather", coll_bytes=x.numel() * x.element_size())
            want = torch.cat([pattern(dtype, shape, q, salt=1) for q in range(p)])
            c.check(same(got, want), f"all_gather {dtype} {shape}")
    got = g.all_gather(torch.tensor(r))
    c.count("all_gather", coll_bytes=8)
    values["all_gather_scalar"] = got.tolist()
    # reduce_scatter: rows k of rank q hold q + 1 + k
    for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.int64):
        for op in ("sum", "max", "min"):
            x = (torch.arange(2 * p, dtype=torch.float64)[:, None] + r + 1).expand(2 * p, 3).to(dtype)
            got = g.reduce_scatter(x, op)
            c.count("reduce_scatter", coll_bytes=x.numel() * x.element_size())
            k = torch.arange(2 * r, 2 * r + 2, dtype=torch.float64)[:, None].expand(2, 3)
            base = {"sum": p * (p + 1) / 2 + p * k, "max": p + k, "min": 1 + k}[op]
            c.check(same(got, base.to(dtype)), f"reduce_scatter {op} {dtype}: got {got.tolist()}")
            if dtype == torch.float32 and op == "sum":
                values["reduce_scatter_sum"] = got[:, 0].tolist()
    for dtype, op, want in ((torch.bool, "sum", True), (torch.bool, "prod", p == 1),
                            (torch.int32, "prod", 2 ** (p // 2))):
        x = reduce_input(op, dtype, r, shape=(p, 2))
        got = g.reduce_scatter(x, op)
        c.count("reduce_scatter", coll_bytes=x.numel() * x.element_size())
        c.check(same(got, torch.full((1, 2), want, dtype=dtype)), f"reduce_scatter {op} {dtype}")
    x = torch.empty(0, 4)
    c.check(g.reduce_scatter(x).shape == (0, 4), "reduce_scatter zero-size")
    c.count("reduce_scatter")
    # broadcast: every wire dtype, from the last rank and from rank 0
    for src in sorted({p - 1, 0}):
        for dtype in P2P_DTYPES:
            for shape in ((3, 2), (0,)):
                x = pattern(dtype, shape, src, salt=2) if r == src else torch.zeros(shape, dtype=dtype)
                got = g.broadcast(x, src)
                c.count("broadcast", coll_bytes=x.numel() * x.element_size())
                c.check(got is x and same(got, pattern(dtype, shape, src, salt=2)),
                        f"broadcast {dtype} {shape} from {src}")


def subgroups(g, c: Checker, values: dict) -> None:
    p, r = g.size, g.rank
    parity = [q for q in range(p) if q % 2 == r % 2]
    half = [q for q in range(p) if (q < (p + 1) // 2) == (r < (p + 1) // 2)]
    for members in (parity, half, list(range(p)), list(range(p))):
        sg = g.subgroup(members)
        c.check(sg.ranks == tuple(members) and sg.size == len(members) and sg.rank == members.index(r),
                f"subgroup {members}: ranks {sg.ranks}, rank {sg.rank}")
        x = torch.tensor([float(r)])
        c.check(sg.all_reduce(x).item() == sum(members), f"subgroup {members} all_reduce")
        c.count("all_reduce", coll_bytes=4)
        c.check(sg.all_gather(torch.tensor(r)).tolist() == members, f"subgroup {members} all_gather")
        c.count("all_gather", coll_bytes=8)
        x = torch.tensor([r])
        c.check(sg.broadcast(x, src=len(members) - 1).item() == members[-1], f"subgroup {members} broadcast")
        c.count("broadcast", coll_bytes=8)
        sg.barrier()
        c.count("barrier")
        if sg.size > 1:  # a ring inside the sub-group; peers named by sub-group rank
            right, left = (sg.rank + 1) % sg.size, (sg.rank - 1) % sg.size
            out, buf = torch.tensor([r]), torch.empty(1, dtype=torch.int64)
            sg.sendrecv(out, right, buf, left)
            c.count("sendrecv", sent=out, recv=buf)
            c.check(buf.item() == members[left], f"subgroup {members} sendrecv")
            try:  # errors in a sub-group name sub-group ranks, and world ranks where they differ
                if len(members) == p:
                    pass
                elif sg.rank % 2 == 0 and right != 0:
                    sg.send(torch.zeros(2, 3), right, tag=11)
                    c.count("send", sent=torch.zeros(2, 3))
                elif sg.rank % 2 == 1:
                    buf = torch.empty(3, 2)
                    c.count("recv", recv=buf)
                    sg.recv(buf, left, tag=11)
                    c.check(False, "mismatched recv in a sub-group did not raise")
            except MessageMismatchError as exc:
                sender = f"rank {left}" + ("" if members[left] == left else f" (world rank {members[left]})")
                c.check(f"from {sender} (tag 11)" in str(exc), f"sub-group mismatch text: {exc}")
                values["subgroup_mismatch"] = str(exc)
        if members == parity:
            nested = sg.subgroup([sg.rank])
            c.check(nested.size == 1 and nested.ranks == (r,), "nested size-1 subgroup")
            c.check(nested.all_reduce(torch.tensor([2.0])).item() == 2.0, "size-1 all_reduce")
            c.count("all_reduce", coll_bytes=4)
    values["world_ranks"] = list(g.ranks)


def cuda(g, c: Checker, values: dict) -> None:
    """CUDA tensors travel through host copies (skipped without a GPU)."""
    values["cuda"] = torch.cuda.is_available()
    if not values["cuda"]:
        return
    p, r = g.size, g.rank
    x = torch.full((4,), float(r + 1), device="cuda")
    c.check(g.all_reduce(x).cpu().tolist() == [p * (p + 1) / 2] * 4, "cuda all_reduce")
    c.count("all_reduce", coll_bytes=16)
    c.check(g.all_gather(x[:1]).device.type == "cuda", "cuda all_gather device")
    c.count("all_gather", coll_bytes=4)
    if p > 1:
        buf = torch.empty(3, device="cuda", dtype=torch.bfloat16)
        out = torch.full((3,), float(r), device="cuda", dtype=torch.bfloat16)
        g.sendrecv(out, (r + 1) % p, buf, (r - 1) % p)
        c.count("sendrecv", sent=out, recv=buf)
        c.check(buf.cpu().tolist() == [float((r - 1) % p)] * 3, "cuda sendrecv")


def _counts(g) -> dict:
    return {op: [n.calls, n.messages_sent, n.bytes_sent, n.messages_recv, n.bytes_recv, n.tensor_bytes]
            for op, n in g.counters.by_op.items()}


def main(g):
    # 1. the exercise every backend passes (tests/runtime/exercise.py), checked in pytest
    shared = exercise(g)
    before = _counts(g)
    # 2. this file's own checks; counters from here on must equal the ledger
    c, values = Checker(g), {}
    if g.size > 1:
        p2p(g, c)
    collectives(g, c, values)
    subgroups(g, c, values)
    cuda(g, c, values)
    counters = {}
    for op, row in _counts(g).items():
        delta = [a - b for a, b in zip(row, before.get(op, [0] * 6))]
        if any(delta):
            counters[op] = delta
    result = {"rank": g.rank, "size": g.size, "backend": g.backend, "failures": c.failures,
              "values": values, "counters": counters, "ledger": dict(c.ledger)}
    # one writer: lines from several ranks may interleave in mpirun's merged stdout
    gathered = _mpi().COMM_WORLD.gather((result, shared), root=0)
    if g.rank == 0:
        print("MTD_RESULT " + json.dumps([mine for mine, _ in gathered]), flush=True)
        blob = base64.b64encode(pickle.dumps([theirs for _, theirs in gathered])).decode()
        print("MTD_EXERCISE " + blob, flush=True)


if __name__ == "__main__":
    launch(main, None, deadline=60.0)

"""One rank function that exercises every Group operation, and the checker of its results.

The rank function only records what it received; the verdict is taken in pytest by
`check_exercise`, against closed forms (rank r fills r: the sum is p(p-1)/2). Used by
the gloo, mpi and sim tests alike, so every backend passes the same checks.
"""

from __future__ import annotations

import math

import torch

P2P_DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "uint8", "int8", "bool",
              "complex64", "int16"]
REDUCE_DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32"]
SHAPES = [(3,), (2, 3), (), (0,), (4, 0, 2)]


def _fill(shape, value: int, dtype: torch.dtype) -> torch.Tensor:
    if dtype == torch.bool:
        return torch.full(shape, bool(value % 2), dtype=dtype)
    return torch.full(shape, value, dtype=dtype)


def exercise(group, p2p_dtypes=P2P_DTYPES, reduce_dtypes=REDUCE_DTYPES) -> dict:
    """Run every op once or more; return what arrived, per op."""
    p, r = group.size, group.rank
    right, left = (r + 1) % p, (r - 1) % p
    out: dict = {"rank": r, "size": p, "p2p": {}, "reduce": {}}
    if p > 1:
        for name in p2p_dtypes:
            dtype = getattr(torch, name)
            for shape in SHAPES:
                # blocking ring: even ranks send first, odd ranks receive first (p odd: last rank too)
                buf = torch.empty(shape, dtype=dtype)
                tag = SHAPES.index(shape)
                if r % 2 == 0 and not (p % 2 == 1 and r == p - 1):
                    group.send(_fill(shape, r, dtype), right, tag)
                    group.recv(buf, left, tag)
                else:
                    group.recv(buf, left, tag)
                    group.send(_fill(shape, r, dtype), right, tag)
                out["p2p"][name, shape] = buf.clone()
        # isend/irecv all-to-all with per-pair tags, small (inline) and large payloads;
        # the sends are waited first: receives must progress without being waited on.
        for n in (2, 3000):
            handles, bufs = [], {}
            for q in range(p):
                if q != r:
                    bufs[q] = torch.empty(n, dtype=torch.float64)
                    handles.append(group.irecv(bufs[q], q, tag=q))
            for q in range(p):
                if q != r:
                    handles.append(group.isend(torch.full((n,), float(r * 1000 + q), dtype=torch.float64), q, tag=r))
            for h in reversed(handles):
                h.wait()
            out["alltoall", n] = {q: b.unique().tolist() for q, b in bufs.items()}
        # sendrecv around the ring, non-contiguous receive buffer
        nc = torch.empty(3, 2).t()
        group.sendrecv(torch.full((2, 3), float(r)), right, nc, left)
        out["sendrecv"] = nc.clone()
    group.barrier()
    for name in reduce_dtypes:
        dtype = getattr(torch, name)
        res = {}
        for op in ("sum", "max", "min", "prod"):
            value = r + 1 if op == "prod" else r
            res[op] = group.all_reduce(_fill((5,), value, dtype), op).tolist()
        if dtype.is_floating_point:
            res["avg"] = group.all_reduce(_fill((2,), r, dtype), "avg").tolist()
        res["empty"] = tuple(group.all_reduce(torch.empty(0, dtype=dtype)).shape)
        res["all_gather"] = group.all_gather(_fill((2,), r, dtype)).tolist()
        res["reduce_scatter"] = group.reduce_scatter(_fill((2 * p, 3), r, dtype)).tolist()
        rows = torch.arange(2 * p)               # row i is i + r here: a wrong row or op shows
        res["reduce_scatter_ops"] = {op: group.reduce_scatter((rows + r).to(dtype), op).tolist()
                                     for op in ("sum", "max", "min")}
        res["reduce_scatter_ops"]["prod"] = group.reduce_scatter((1 + (rows == 2 * r)).to(dtype), "prod").tolist()
        res["broadcast"] = group.broadcast(_fill((3,), r, dtype), src=p - 1).tolist()
        out["reduce"][name] = res
    out["all_gather_scalar"] = group.all_gather(torch.tensor(float(r))).tolist()
    # asynchronous collectives: started in one order, waited on in the reverse order
    strided = torch.zeros(4, 3).t()[0]                       # a non-contiguous view
    strided.fill_(float(r))
    handles = [group.all_reduce(torch.full((3,), float(r)), async_op=True),
               group.all_reduce(strided, "avg", async_op=True),
               group.broadcast(torch.full((2,), float(r)), src=0, async_op=True),
               group.all_gather(torch.tensor([float(r)]), async_op=True),
               group.reduce_scatter(torch.full((p,), float(r)), async_op=True)]
    out["async"] = [h.wait().tolist() for h in reversed(handles)][::-1] + [strided.tolist(), handles[0].done]
    members = list(range(0, p, 2)) if r % 2 == 0 else list(range(1, p, 2))
    sub = group.subgroup(members)
    out["subgroup"] = (sub.rank, sub.size, list(sub.ranks), sub.all_reduce(torch.tensor([float(r)])).item())
    if sub.size > 1:
        x = torch.empty(1)
        sub.sendrecv(torch.tensor([float(r)]), (sub.rank + 1) % sub.size, x, (sub.rank - 1) % sub.size)
        out["subgroup_ring"] = x.item()
    c = group.counters
    out["counters"] = (c.messages_sent, c.bytes_sent, c.messages_recv, c.bytes_recv)
    return out


def _expected_p2p_count(p: int, p2p_dtypes) -> tuple[int, int]:
    """(messages, bytes) each rank sends in exercise() (and receives: the pattern is symmetric)."""
    if p == 1:
        return 0, 0
    msgs, nbytes = 0, 0
    for name in p2p_dtypes:
        size = torch.empty(0, dtype=getattr(torch, name)).element_size()
        for shape in SHAPES:
            msgs += 1
            nbytes += math.prod(shape) * size
    msgs += 2 * (p - 1) + 1             # two all-to-alls, sendrecv
    nbytes += (p - 1) * (2 + 3000) * 8 + 6 * 4
    return msgs, nbytes


def check_exercise(results: list[dict], p2p_dtypes=P2P_DTYPES, reduce_dtypes=REDUCE_DTYPES) -> None:
    """Assert every rank's results against closed forms."""
    p = len(results)
    for r, res in enumerate(results):
        assert (res["rank"], res["size"]) == (r, p)
        left = (r - 1) % p
        for (name, shape), buf in res["p2p"].items():
            dtype = getattr(torch, name)
            assert buf.dtype == dtype and tuple(buf.shape) == shape, (r, name, shape)
            assert torch.equal(buf, _fill(shape, left, dtype)), (r, name, shape, buf)
        if p > 1:
            assert len(res["p2p"]) == len(p2p_dtypes) * len(SHAPES)
            for n in (2, 3000):
                assert res["alltoall", n] == {q: [float(q * 1000 + r)] for q in range(p) if q != r}
            assert torch.equal(res["sendrecv"], torch.full((2, 3), float(left)))
        for name in reduce_dtypes:
            got = res["reduce"][name]
            assert got["sum"] == [p * (p - 1) // 2] * 5, (r, name, got["sum"])
            assert got["max"] == [p - 1] * 5 and got["min"] == [0] * 5
            assert got["prod"] == [math.factorial(p)] * 5 or name in ("float16", "bfloat16") and p > 5
            if "avg" in got:
                assert got["avg"] == [pytest_approx((p - 1) / 2)] * 2
            assert got["empty"] == (0,)
            assert got["all_gather"] == [q for q in range(p) for _ in range(2)]
            assert got["reduce_scatter"] == [[p * (p - 1) // 2] * 3] * 2
            mine = [2 * r, 2 * r + 1]
            assert got["reduce_scatter_ops"] == {"sum": [p * i + p * (p - 1) // 2 for i in mine],
                                                 "max": [i + p - 1 for i in mine], "min": mine,
                                                 "prod": [2, 1]}, (r, name, got["reduce_scatter_ops"])
            assert got["broadcast"] == [p - 1] * 3
        assert res["all_gather_scalar"] == [float(q) for q in range(p)]
        s, mean = float(p * (p - 1) // 2), (p - 1) / 2
        assert res["async"] == [[s] * 3, [mean] * 4, [0.0] * 2, [float(q) for q in range(p)], [s], [mean] * 4, True]
        members = list(range(r % 2, p, 2))
        assert res["subgroup"] == (members.index(r), len(members), members, float(sum(members)))
        if len(members) > 1:
            i = members.index(r)
            assert res["subgroup_ring"] == float(members[(i - 1) % len(members)])
        msgs, nbytes = _expected_p2p_count(p, p2p_dtypes)
        sub_msgs = 1 if len(members) > 1 else 0
        assert res["counters"] == (msgs + sub_msgs, nbytes + 4 * sub_msgs, msgs + sub_msgs, nbytes + 4 * sub_msgs)


class pytest_approx(float):
    """A float that compares equal within 1e-2 relative (half precision averages)."""

    def __eq__(self, other):
        return abs(float(other) - float(self)) <= 1e-2 * max(1.0, abs(float(self)))

    __hash__ = float.__hash__

"""Provided parts of homework 5 for interleaved schedules and receives posted ahead, without processes:
actions with a chunk, the validator on virtual stages, ChunkGroup's routing and tags, PostingGroup."""

import pytest
import torch

from minitorch_dist.pipeline.actions import Action, parse_action
from minitorch_dist.pipeline.chunks import ChunkGroup
from minitorch_dist.pipeline.posting import PostingGroup
from minitorch_dist.pipeline.stage import MAX_MICROBATCHES, backward_tag, forward_tag
from minitorch_dist.pipeline.validate import ScheduleError, validate_schedule


def chunked_gpipe(p, v, m):
    """GPipe over p v virtual stages, chunk c of rank j = stage c p + j: all forwards, then all backwards."""
    n, lanes = p * v, [[] for _ in range(p)]
    for s in range(n):
        j, c = s % p, s // p
        for i in range(m):
            lanes[j] += ([f"RECV_F{i}c{c}"] if s else []) + [f"F{i}c{c}"] + ([f"SEND_F{i}c{c}"] if s < n - 1 else [])
    for s in reversed(range(n)):
        j, c = s % p, s // p
        for i in range(m):
            lanes[j] += ([f"RECV_B{i}c{c}"] if s < n - 1 else []) + [f"B{i}c{c}"] + ([f"SEND_B{i}c{c}"] if s else [])
    return lanes


def test_actions_carry_a_chunk():
    assert str(Action("F", 3, 1)) == "F3c1" and str(Action("F", 3, 0)) == "F3" == str(Action("F", 3))
    assert parse_action("RECV_B2c1") == Action("RECV_B", 2, 1) and parse_action("F3") == Action("F", 3, 0)
    with pytest.raises(ValueError, match="chunk"):
        Action("F", 0, -1)


@pytest.mark.parametrize("p,v,m", [(2, 2, 1), (2, 2, 3), (3, 2, 2), (2, 3, 2)])
def test_validator_accepts_chunked_schedules(p, v, m):
    lanes = validate_schedule(chunked_gpipe(p, v, m), m, n_chunks=v)
    assert sum(a.kind.startswith("SEND") for lane in lanes for a in lane) == 2 * (p * v - 1) * m


def test_validator_names_chunk_errors():
    lanes = chunked_gpipe(2, 2, 2)
    with pytest.raises(ScheduleError, match="chunk 1 does not exist"):
        validate_schedule(lanes, 2, n_chunks=1)
    lanes[1] = [a for a in lanes[1] if a != "B1c1"]
    with pytest.raises(ScheduleError, match=r"rank 1: F1c1 has no backward"):
        validate_schedule(lanes, 2, n_chunks=2)
    lanes = chunked_gpipe(2, 2, 1)
    lanes[0] = [a for a in lanes[0] if a != "SEND_F0c0"]           # rank 1's chunk 0 waits for nothing
    with pytest.raises(ScheduleError, match=r"rank 1, action 0 \(RECV_F0\): this receive has no matching SEND_F0 on rank 0"):
        validate_schedule(lanes, 1, n_chunks=2)


class FakeGroup:
    def __init__(self, rank, size):
        self.rank, self.size, self.calls = rank, size, []

    def irecv(self, tensor, src, tag=0):
        self.calls.append(("irecv", src, tag))
        return FakeHandle(tensor.fill_(7.0))

    def recv(self, tensor, src, tag=0):
        self.calls.append(("recv", src, tag))
        return tensor.fill_(3.0)

    def isend(self, tensor, dst, tag=0):
        self.calls.append(("isend", dst, tag))


class FakeHandle:
    def __init__(self, t):
        self.t = t

    def wait(self):
        return self.t


def test_chunk_group_routes_to_rank_mod_p_with_a_band_per_boundary():
    p, v = 3, 2
    last = ChunkGroup(FakeGroup(2, p), v, 0)                 # rank 2, chunk 0 = virtual stage 2
    first = ChunkGroup(FakeGroup(0, p), v, 1)                # rank 0, chunk 1 = virtual stage 3
    assert (last.rank, last.size, first.rank) == (2, 6, 3)
    # boundary 2 -> 3 is in chunk 0's band; boundary 0 -> 1 (same micro-batch, ranks 0 -> 1) in chunk 0's band too,
    # but boundary 3 -> 4 (ranks 0 -> 1 again) in chunk 1's band: the two messages 0 -> 1 never share a tag
    band = MAX_MICROBATCHES // v
    assert last._route(3, forward_tag(4), "isend") == (0, 4)
    assert first._route(2, forward_tag(4), "recv") == (2, 4)
    assert first._route(4, forward_tag(4), "isend") == (1, band + 4)
    assert ChunkGroup(FakeGroup(0, p), v, 0)._route(1, forward_tag(4), "isend") == (1, 4)
    assert first._route(4, backward_tag(4), "recv") == (1, MAX_MICROBATCHES + band + 4)
    with pytest.raises(ValueError, match="talks only to stages 2 and 4"):
        first._route(5, 0, "isend")
    with pytest.raises(ValueError, match=f"at most {band} micro-batches"):
        first._route(4, forward_tag(band), "isend")
    with pytest.raises(ValueError, match="at least 2 ranks"):
        ChunkGroup(FakeGroup(0, 1), 2, 0)


def test_posting_group_serves_posted_receives_once():
    g = PostingGroup(FakeGroup(1, 2))
    g.post(torch.zeros(2, 3), 0, 5)
    g.post(torch.zeros(2, 3), 0, 5)                          # already posted: not posted twice
    out = torch.empty(2, 3)
    assert g.recv(out, 0, tag=5) is out and out.eq(7.0).all()
    assert g.recv(torch.empty(2), 0, tag=5).eq(3.0).all()   # nothing posted any more: a plain recv
    assert g.physical.calls == [("irecv", 0, 5), ("recv", 0, 5)]
    g.post(torch.zeros(2, 3), 0, 6)
    with pytest.raises(ValueError, match=r"posted ahead holds \(2, 3\) torch.float32, the buffer given is \(3, 2\)"):
        g.recv(torch.empty(3, 2), 0, tag=6)
    g.post(torch.zeros(4), 0, 7)
    assert g.irecv(torch.empty(4), 0, tag=7).wait().eq(7.0).all() and g.rank == 1

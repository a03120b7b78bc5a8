"""Gloo payloads that travel as the tensor itself (one part: no uint8 view, no slice) or as byte
slices (several parts, or a receive buffer that requires grad) arrive byte for byte, whatever the
dtype (minitorch_dist/runtime/transports/wire.py: wire_parts, whole_payload)."""

import torch

from minitorch_dist import launch
from minitorch_dist.runtime.transports.wire import DTYPES, INLINE_BYTES, wire_parts, whole_payload

ONE_PART = 1 << 17                  # bytes: above INLINE_BYTES, one part
THREE_PARTS = 4000012               # bytes: three parts


def _pattern(nbytes: int, seed: int) -> torch.Tensor:
    """Bytes no wrong offset or dtype conversion could reproduce."""
    return ((torch.arange(nbytes, dtype=torch.int64) * 131 + seed * 7) % 251).to(torch.uint8)


def _cases():
    """[(dtype, numel, requires_grad)]: every wire dtype in one part, then three parts, then one part
    into a buffer that requires grad (a floating dtype)."""
    cases = [(dtype, ONE_PART // dtype.itemsize, False) for dtype in DTYPES]
    return cases + [(torch.uint8, THREE_PARTS, False), (torch.float32, ONE_PART // 4, True)]


def _exchange(group):
    results = []
    for k, (dtype, numel, requires_grad) in enumerate(_cases()):
        sent = _pattern(numel * dtype.itemsize, k).view(dtype)
        if group.rank == 0:
            group.send(sent, 1, tag=k % 8)
            continue
        buf = torch.zeros(numel, dtype=dtype)
        if requires_grad:
            buf.requires_grad_(True)
        got = group.recv(buf, 0, tag=k % 8)
        results.append(bool(torch.equal(got.detach().view(torch.uint8), sent.view(torch.uint8))))
    return results


def test_which_payloads_travel_whole():
    x = torch.zeros(ONE_PART // 4)
    assert whole_payload(x, wire_parts(0, 0, ONE_PART))
    assert not whole_payload(torch.zeros(THREE_PARTS, dtype=torch.uint8), wire_parts(0, 0, THREE_PARTS))
    assert not whole_payload(x.clone().requires_grad_(True), wire_parts(0, 0, ONE_PART))
    assert not whole_payload(torch.zeros(2, ONE_PART // 8).t(), wire_parts(0, 0, ONE_PART))
    assert wire_parts(3, 5, ONE_PART) is wire_parts(3, 5, ONE_PART)         # cached
    assert ONE_PART > INLINE_BYTES and len(wire_parts(0, 0, THREE_PARTS)) == 3


def test_every_dtype_and_part_count_arrives_byte_for_byte():
    got = launch(_exchange, 2, deadline=60)[1]
    assert got == [True] * len(_cases())

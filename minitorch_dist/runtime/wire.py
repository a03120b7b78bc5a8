"""Messages on the wire for the process backends (gloo, mpi): a header, then the payload.

Every Group message is framed as two raw messages on the same wire tag:
  1. a header, int64[16]: magic, sender's op, dtype code, ndim, numel, shape...
  2. the payload bytes (skipped when the tensor is empty).
The receiver reads the header first and checks it against its buffer, so a
mismatch (shape, dtype, size) is a clear MessageMismatchError naming both ranks,
both shapes and both ops, never a truncation or a hang.

Wire tags carry a per-channel sequence number: the k-th message from rank a to
rank b with user tag t travels on tag (t << seq_bits) | (k mod 2^seq_bits). Raw
messages therefore never match the wrong header or payload, whatever order a
program waits on its handles (the same non-overtaking rule MPI gives).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Callable

import torch

from .backend import Work
from .errors import MessageMismatchError

MAGIC = 0x6D74645F  # "mtd_"
HEADER_LEN = 16
MAX_NDIM = HEADER_LEN - 5
TAG_BITS = 11                      # user tags 0..2047
MAX_TAG = (1 << TAG_BITS) - 1
OPS = ("send", "isend", "sendrecv")

_DTYPE_NAMES = ["float32", "float64", "float16", "bfloat16", "int8", "uint8", "int16", "int32",
                "int64", "bool", "complex64", "complex128", "uint16", "uint32", "uint64",
                "float8_e4m3fn", "float8_e5m2"]
DTYPES = [getattr(torch, n) for n in _DTYPE_NAMES if hasattr(torch, n)]
_DTYPE_CODE = {d: i for i, d in enumerate(DTYPES)}


def describe(dtype: torch.dtype, shape) -> str:
    """'float32 of shape (4, 3)'."""
    return f"{str(dtype).replace('torch.', '')} of shape {tuple(shape)}"


def encode_header(tensor: torch.Tensor, op: str) -> torch.Tensor:
    """The int64[16] header describing `tensor`, sent by `op`."""
    if tensor.dim() > MAX_NDIM:
        raise ValueError(f"send: tensors of more than {MAX_NDIM} dimensions are not supported "
                         f"(got {tensor.dim()}); reshape before sending")
    if tensor.dtype not in _DTYPE_CODE:
        raise TypeError(f"send: dtype {tensor.dtype} is not supported by the wire format")
    header = torch.zeros(HEADER_LEN, dtype=torch.int64)
    fields = [MAGIC, OPS.index(op), _DTYPE_CODE[tensor.dtype], tensor.dim(), tensor.numel(),
              *tensor.shape]
    header[:len(fields)] = torch.tensor(fields, dtype=torch.int64)
    return header


def decode_header(header: torch.Tensor) -> tuple[str, torch.dtype, tuple[int, ...]]:
    """(sender's op, dtype, shape) from a header."""
    values = header.tolist()
    if values[0] != MAGIC:
        raise MessageMismatchError("recv: received bytes that are not a minitorch_dist message "
                                   "header (another program, or raw torch.distributed calls mixed "
                                   "with Group calls on the same tag)")
    ndim = values[3]
    return OPS[values[1]], DTYPES[values[2]], tuple(values[5:5 + ndim])


def check_match(buffer: torch.Tensor, sent_dtype: torch.dtype, sent_shape: tuple[int, ...],
                sent_op: str, recv_op: str, receiver: str, sender: str, tag: int) -> None:
    """Raise MessageMismatchError unless `buffer` has exactly the dtype and shape that was sent.

    `receiver` and `sender` name the ranks, e.g. "rank 1" or "rank 1 (world rank 3)".
    Shared by every backend, so the message reads the same everywhere.
    """
    if buffer.dtype == sent_dtype and tuple(buffer.shape) == tuple(sent_shape):
        return
    n_sent = 1
    for d in sent_shape:
        n_sent *= d
    what = "dtype" if buffer.dtype != sent_dtype else "shape"
    if what == "shape" and n_sent != buffer.numel():
        what = "size"
    raise MessageMismatchError(
        f"{recv_op} on {receiver} from {sender} (tag {tag}): the receive buffer is "
        f"{describe(buffer.dtype, buffer.shape)} ({buffer.numel()} elements), but {sender} sent "
        f"{describe(sent_dtype, sent_shape)} ({n_sent} elements) with {sent_op}: the {what} differs. "
        f"What to do: allocate the buffer as torch.empty({tuple(sent_shape)}, "
        f"dtype={sent_dtype}) on {receiver}, or change what {sender} sends.")


def as_bytes(tensor: torch.Tensor) -> torch.Tensor:
    """A flat uint8 view of a contiguous tensor (no copy)."""
    return tensor.reshape(-1).view(torch.uint8)


# -- framing over a raw byte transport ------------------------------------------------------

RawPost = Callable[[torch.Tensor, int, int], Work]  # (uint8 buffer, peer, wire tag) -> Work


class Framer:
    """Frames Group messages for a raw transport that moves uint8 buffers by (peer, wire tag).

    `raw_isend(buf, dst, wire_tag)` and `raw_irecv(buf, src, wire_tag)` post raw
    messages; `seq_bits` is how many low bits of a wire tag hold the sequence number.
    `name_rank(r)` turns a group rank into text for error messages.
    """

    def __init__(self, raw_isend: RawPost, raw_irecv: RawPost, seq_bits: int,
                 name_rank: Callable[[int], str], rank: int):
        self._raw_isend, self._raw_irecv = raw_isend, raw_irecv
        self._seq_mask = (1 << seq_bits) - 1
        self._seq_bits = seq_bits
        self._sent = defaultdict(int)   # (dst, tag) -> messages posted so far
        self._recvd = defaultdict(int)  # (src, tag) -> receives posted so far
        self._name = name_rank
        self._rank = rank

    def _wire_tag(self, tag: int, seq: int) -> int:
        return (tag << self._seq_bits) | (seq & self._seq_mask)

    def isend(self, tensor: torch.Tensor, dst: int, tag: int, op: str) -> Work:
        seq = self._sent[dst, tag]
        self._sent[dst, tag] = seq + 1
        wire_tag = self._wire_tag(tag, seq)
        header = encode_header(tensor, op)
        works = [self._raw_isend(as_bytes(header), dst, wire_tag)]
        if tensor.numel() > 0:
            works.append(self._raw_isend(as_bytes(tensor), dst, wire_tag))
        return _SendWork(works, header, tensor)

    def irecv(self, tensor: torch.Tensor, src: int, tag: int, op: str) -> Work:
        seq = self._recvd[src, tag]
        self._recvd[src, tag] = seq + 1
        wire_tag = self._wire_tag(tag, seq)
        header = torch.empty(HEADER_LEN, dtype=torch.int64)
        header_work = self._raw_irecv(as_bytes(header), src, wire_tag)
        return _RecvWork(self, header_work, header, tensor, src, tag, wire_tag, op)


class _SendWork(Work):
    def __init__(self, works: list[Work], header: torch.Tensor, tensor: torch.Tensor):
        self._works = works
        self._keep = (header, tensor)  # buffers must outlive the transfer

    def wait(self, timeout: float | None) -> None:
        for work in self._works:
            work.wait(timeout)


class _RecvWork(Work):
    def __init__(self, framer: Framer, header_work: Work, header: torch.Tensor,
                 tensor: torch.Tensor, src: int, tag: int, wire_tag: int, op: str):
        self._framer, self._header_work, self._header = framer, header_work, header
        self._tensor, self._src, self._tag, self._wire_tag, self._op = tensor, src, tag, wire_tag, op
        self._done = False

    def wait(self, timeout: float | None) -> None:
        if self._done:
            return
        self._header_work.wait(timeout)
        sent_op, dtype, shape = decode_header(self._header)
        f = self._framer
        check_match(self._tensor, dtype, shape, sent_op, self._op,
                    f._name(f._rank), f._name(self._src), self._tag)
        if self._tensor.numel() > 0:
            f._raw_irecv(as_bytes(self._tensor), self._src, self._wire_tag).wait(timeout)
        self._done = True

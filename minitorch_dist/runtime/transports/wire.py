"""The wire format of the process backends (gloo, mpi): control messages and their checks.

A control message is an int64[16] header (magic, kind, sender's op, dtype, ndim,
numel, tag, sequence number, sender's rank, shape...) followed, for payloads up to
INLINE_BYTES (64 KiB), by the payload itself; receives of control messages post CONTROL_BYTES
(the header and 64 KiB). One message of header and payload costs no more than two up to there:
at 64 KiB, two copies of the payload (~10 us) against a second gloo message (its own
ready-to-receive note, write and read; measured on 2 cores, no faster). Larger payloads
travel as raw messages of their own: on mpi one, on MPI tag (tag << seq bits) | seq; on gloo
one per part of payload_parts(), on part_tag(tag, seq, code), so that a payload only ever meets
a receive of exactly its own byte count, and the header alone (HEADER_BYTES) on
header_tag(tag, seq). How messages flow is framing.py's business (mpi_p2p.py's on mpi).

check_match is shared by every backend (sim too), so a receive whose buffer does not
match what was sent reads the same everywhere: both ranks, both shapes, both ops.
"""

from __future__ import annotations

import ctypes
import functools
import struct

import torch

from ..errors import MessageMismatchError

MAGIC = 0x6D74645F  # "mtd_"
HEADER_LEN = 16                     # int64 fields
HEADER_BYTES = HEADER_LEN * 8
INLINE_BYTES = 64 * 1024            # payloads up to this size ride in the control message
CONTROL_BYTES = HEADER_BYTES + INLINE_BYTES     # what a listener posts; a control message may be shorter
MAX_NDIM = HEADER_LEN - 9
TAG_BITS = 11                       # user tags 0..2047
MAX_TAG = (1 << TAG_BITS) - 1
SEQ_BITS = 19                       # data wire tags fit in 30 bits
CONTROL_TAG = 1 << 30
# gloo part tags (< CONTROL_TAG): code << 17 | (seq mod 64) << 11 | tag, code = exponent << 8 | mantissa
PART_SEQ_BITS, PART_MANT_BITS, PART_EXP_BITS = 6, 8, 5
MAX_PAYLOAD_BYTES = 1 << (PART_MANT_BITS + (1 << PART_EXP_BITS) - 1)   # 2**39: 512 GiB
OPS = ("send", "isend", "sendrecv")
_OP_CODE = {op: i for i, op in enumerate(OPS)}
# kinds: a message's header; goodbye; a copy of a gloo direct header (sent to the listener);
# _NUDGE and _FILL are no longer sent (they served small gloo messages sent to the listener:
# every gloo message is direct now); their numbers stay taken
_MSG, _BYE, _COPY, _NUDGE, _FILL = 0, 1, 2, 3, 4
_HEADER = struct.Struct(f"<{HEADER_LEN}q")   # magic, kind, op, dtype, ndim, numel, tag, seq, src, shape
_HEADER_VIEW = ctypes.c_char * HEADER_BYTES
_NO_DIMS = (0,) * MAX_NDIM
_PART_SEQ_MASK = (1 << PART_SEQ_BITS) - 1

_DTYPE_NAMES = ["float32", "float64", "float16", "bfloat16", "int8", "uint8", "int16", "int32",
                "int64", "bool", "complex64", "complex128", "uint16", "uint32", "uint64",
                "float8_e4m3fn", "float8_e5m2"]
DTYPES = [getattr(torch, n) for n in _DTYPE_NAMES if hasattr(torch, n)]
_DTYPE_CODE = {d: i for i, d in enumerate(DTYPES)}


def describe(dtype: torch.dtype, shape) -> str:
    """'float32 of shape (4, 3)'."""
    return f"{str(dtype).replace('torch.', '')} of shape {tuple(shape)}"


def control_bytes(nbytes: int) -> int:
    """The length of the control message of a payload of `nbytes`."""
    return HEADER_BYTES + (nbytes if nbytes <= INLINE_BYTES else 0)


def encode_header(tensor: torch.Tensor, op: str, tag: int, seq: int, src: int, kind: int = _MSG,
                  out: torch.Tensor | None = None) -> torch.Tensor:
    """The control message announcing `tensor`, sent by `op`: the header, then the payload if it
    fits (both transports accept a message shorter than the posted buffer). `out`: a uint8
    buffer of control_bytes(payload bytes) to write it into (else a new one)."""
    if out is None:
        nbytes = tensor.numel() * tensor.element_size()
        out = torch.empty(control_bytes(nbytes), dtype=torch.uint8)
    write_header(out.data_ptr(), tensor, op, tag, seq, src, kind)
    return out


def write_header(address: int, tensor: torch.Tensor, op: str, tag: int, seq: int, src: int,
                 kind: int = _MSG) -> int:
    """Write encode_header's control message at `address` (room for CONTROL_BYTES); return its
    length. Written through the address, no torch ops: a small send's cost is its overhead."""
    ndim = tensor.dim()
    if ndim > MAX_NDIM:
        raise ValueError(f"{op}: tensors of more than {MAX_NDIM} dimensions are not supported "
                         f"(got {ndim}); reshape before sending")
    code = _DTYPE_CODE.get(tensor.dtype)
    if code is None:
        raise TypeError(f"{op}: dtype {tensor.dtype} is not supported by the wire format")
    numel = tensor.numel()
    nbytes = numel * tensor.element_size()
    inline = nbytes if nbytes <= INLINE_BYTES else 0
    _HEADER.pack_into(_HEADER_VIEW.from_address(address), 0, MAGIC, kind, _OP_CODE[op], code, ndim, numel,
                      tag, seq, src, *tensor.shape, *_NO_DIMS[ndim:])
    if inline:      # the payload's bytes: one copy
        host = tensor if tensor.is_cpu and tensor.is_contiguous() else tensor.cpu().contiguous()
        ctypes.memmove(address + HEADER_BYTES, host.data_ptr(), inline)
    return HEADER_BYTES + inline


def encode_control(kind: int, src: int, numel: int = 0, tag: int = 0, seq: int = 0) -> torch.Tensor:
    """A control message with no tensor (_BYE)."""
    control = torch.zeros(HEADER_LEN * 8, dtype=torch.uint8)
    _HEADER.pack_into(control.numpy(), 0, MAGIC, kind, 0, 0, 0, numel, tag, seq, src, *([0] * MAX_NDIM))
    return control


def decode_header(control: torch.Tensor) -> tuple[int, str, torch.dtype, tuple[int, ...], int, int, int]:
    """(kind, sender's op, dtype, shape, tag, seq, sender's rank) from a control message."""
    values = _HEADER.unpack_from(_HEADER_VIEW.from_address(control.data_ptr()))   # (no numpy: faster)
    if values[0] != MAGIC:
        raise MessageMismatchError("recv: received bytes that are not a minitorch_dist message "
                                   "(raw torch.distributed or MPI calls mixed with Group calls?)")
    ndim = values[4]
    return (values[1], OPS[values[2]], DTYPES[values[3]], tuple(values[9:9 + ndim]), values[6], values[7],
            values[8])


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


@functools.lru_cache(maxsize=1024)
def payload_parts(nbytes: int) -> tuple[tuple[int, int, int], ...]:
    """((offset, length, code), ...): `nbytes` cut into parts of length m * 2**e (m < 2**8, e < 32),
    largest first; code = e << 8 | m names the length exactly. Cached: a message's framing asks
    for its parts on both sides, and a program sends the same sizes again and again.

    Gloo aborts the process when a message is larger than its posted receive. A part's wire
    tag carries its code, so a part only ever meets a receive of its own length. A 4 MiB
    payload is one part; 4000012 bytes (20 significant bits) are three.
    """
    if nbytes >= MAX_PAYLOAD_BYTES:
        raise ValueError(f"messages of {nbytes} bytes are too large for the gloo wire format "
                         f"(at most {MAX_PAYLOAD_BYTES - 1}); send them in pieces")
    parts, offset, left = [], 0, nbytes
    while left:
        exponent = max(0, left.bit_length() - PART_MANT_BITS)
        mantissa = left >> exponent
        length = mantissa << exponent
        parts.append((offset, length, (exponent << PART_MANT_BITS) | mantissa))
        offset, left = offset + length, left - length
    return tuple(parts)


def part_tag(tag: int, seq: int, code: int) -> int:
    """The gloo wire tag of one payload part: user tag, sequence number mod 64, length code."""
    return (code << (TAG_BITS + PART_SEQ_BITS)) | ((seq % (1 << PART_SEQ_BITS)) << TAG_BITS) | tag


@functools.lru_cache(maxsize=4096)
def wire_parts(tag: int, seq_bits: int, nbytes: int) -> tuple[tuple[int, int, int], ...]:
    """((offset, length, wire tag), ...) of a gloo payload of `nbytes` (> INLINE_BYTES); seq_bits: the
    sequence number's low PART_SEQ_BITS, all that a part tag keeps. Cached: both sides ask for every
    message, and working the tags out was the largest Python cost of a 1 MB message."""
    return tuple((offset, length, part_tag(tag, seq_bits, code)) for offset, length, code in payload_parts(nbytes))


def whole_payload(tensor: torch.Tensor, parts) -> bool:
    """Does a payload of one part travel as `tensor` itself? Gloo moves bytes, whatever the dtype,
    so a contiguous tensor needs no uint8 view (two torch calls a side); one requiring grad keeps it."""
    return len(parts) == 1 and not tensor.requires_grad and tensor.is_contiguous()


def with_kind(control: torch.Tensor, kind: int) -> torch.Tensor:
    """A copy of a control message with another kind (a direct header turned into a _COPY)."""
    copy = control.clone()
    copy[8:16] = torch.tensor([kind], dtype=torch.int64).view(torch.uint8)
    return copy


def header_tag(tag: int, seq: int) -> int:
    """The gloo wire tag of a message's header: part_tag(tag, seq, 0) (code 0, which no part has)."""
    return ((seq & _PART_SEQ_MASK) << TAG_BITS) | tag


def as_bytes(tensor: torch.Tensor) -> torch.Tensor:
    """A flat uint8 view of a contiguous tensor (no copy)."""
    return tensor.reshape(-1).view(torch.uint8)

"""Payload copies of the sim backend: raw bytes for plain CPU tensors, torch ops otherwise.

An eager send keeps a copy of its tensor until the matching receive copies it into
the receive buffer. For a small tensor, torch's clone() and copy_() cost a few
microseconds each, mostly dispatch; a ring all-reduce of 1024 ranks sends two
million messages. So the copy of a plain tensor (CPU, dense, contiguous, a real
dtype, no negation bit) is a bytes object, read and written through a ctypes view
of the tensor's memory; the receive buffer's version counter is bumped as copy_()
would (autograd's in-place checks still see the write). Any other tensor or buffer
takes the torch path, exactly as before.
"""

from __future__ import annotations

import ctypes

import torch

RAW_DTYPES = frozenset(d for d in (
    torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8,
    torch.int16, torch.int32, torch.int64, torch.bool,
    *(getattr(torch, n) for n in ("uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e5m2")
      if hasattr(torch, n))))
_Tensor = torch.Tensor
_strided = torch.strided
MAX_RAW = 1 << 30                # bigger messages: torch copies (memory traffic dominates anyway)
increment_version = getattr(torch._C, "_increment_version", None) or (
    lambda tensors: torch.autograd.graph.increment_version(tensors[0]))
arrays: dict[int, type] = {}     # nbytes -> ctypes.c_char * nbytes, for views of tensor memory


def array_of(nbytes: int) -> type:
    """The ctypes array type of `nbytes` bytes (cached: making one costs more than a copy)."""
    array = arrays.get(nbytes)
    if array is None:
        if len(arrays) >= 1024:
            arrays.clear()
        array = arrays[nbytes] = ctypes.c_char * nbytes
    return array


def raw_bytes(tensor: torch.Tensor, nbytes: int) -> bytes | None:
    """The `nbytes` bytes of a plain non-empty tensor, else None (it needs a torch copy).

    Plain: CPU, dense, contiguous, a real dtype, no negation bit.
    """
    if (type(tensor) is _Tensor and 0 < nbytes <= MAX_RAW and tensor.is_cpu
            and tensor.dtype in RAW_DTYPES and tensor.layout is _strided and tensor.is_contiguous()
            and not tensor.is_neg()):
        return array_of(nbytes).from_address(tensor.data_ptr()).raw
    return None


def snapshot(send, tensor: torch.Tensor):
    """The copy an eager send keeps: raw_bytes when it can (dtype and shape go to `send.dtype`
    and `send.shape`), else a torch clone."""
    data = raw_bytes(tensor, tensor.nbytes)
    if data is not None:
        send.dtype, send.shape = tensor.dtype, tensor.shape
        return data
    return (tensor.detach() if tensor.requires_grad else tensor).clone()


def write(buffer: torch.Tensor, data: bytes, dtype: torch.dtype, shape) -> None:
    """buffer.copy_(the tensor `data` holds); `buffer` has that dtype and shape."""
    if (type(buffer) is _Tensor and buffer.is_cpu and not buffer.requires_grad
            and buffer.layout is _strided and buffer.is_contiguous() and not buffer.is_neg()
            and not buffer.is_inference()):
        array_of(len(data)).from_address(buffer.data_ptr()).raw = data
        increment_version((buffer,))
        return
    source = torch.frombuffer(bytearray(data), dtype=dtype).view(shape)
    (buffer.detach() if buffer.requires_grad else buffer).copy_(source)

"""Plain data between processes that do not trust each other: encode and decode without running code.

    blob = encode({"x": torch.ones(3), "counts": (1, 2)})      # in a rank process
    value = decode(blob)                                          # in the launcher

Pickle runs code named in the data it reads, so a launcher that reads a rank's reply with pickle
trusts that rank completely. When the ranks run code that must not be trusted (the autograder's
sandboxed ranks, see host.py), every reply travels in this format instead, and decoding builds only:
None, bool, int, float, complex, str, bytes, list, tuple, dict, torch.dtype, torch.Size, dense CPU
torch.Tensor (from raw bytes, dtype from a fixed list), and the record classes registered with
`plain_record` (built from their fields by the class's own constructor, never from a name chosen
by the data). numpy arrays and scalars are sent as tensors and Python numbers.

Layout: 8-byte length + JSON document, then each buffer as 8-byte length + bytes. Tagged JSON
objects ({"$": "tensor", ...}) stand for what JSON lacks.
"""

from __future__ import annotations

import dataclasses
import json
import struct

import torch

MAX_DEPTH = 200
_LEN = struct.Struct("<Q")
_DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.complex64, torch.complex128,
    torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool)}
_RECORDS: dict[str, tuple[type, tuple[str, ...], bool]] = {}    # name -> (class, fields, by keyword)


class PlainDataError(ValueError):
    """A value that is not plain data (encode), or bytes that are not a valid encoding (decode)."""


def plain_record(cls=None, *, fields: tuple[str, ...] | None = None, name: str | None = None):
    """Class decorator: instances travel as their `fields` and are rebuilt with the constructor.

    Dataclasses default to their fields, passed by keyword; exceptions default to their `args`,
    passed positionally; other classes name `fields`, read as attributes and passed positionally.
    """
    def register(klass):
        keyword = fields is None and dataclasses.is_dataclass(klass)
        if keyword:
            names = tuple(f.name for f in dataclasses.fields(klass))
        elif fields is None and issubclass(klass, BaseException):
            names = ("*args",)
        else:
            names = tuple(fields or ())
        _RECORDS[name or f"{klass.__module__}.{klass.__qualname__}"] = (klass, names, keyword)
        return klass
    return register(cls) if cls is not None else register


def record_name(klass: type) -> str | None:
    """The registered name of `klass`, or None when it is not a plain record. An exception class
    that is not registered travels as its nearest registered base class (a ValueError subclass
    arrives as a ValueError)."""
    names = {registered: name for name, (registered, _, _) in _RECORDS.items()}
    if klass in names:
        return names[klass]
    if isinstance(klass, type) and issubclass(klass, BaseException):
        for base in klass.__mro__[1:]:
            if base in names and _RECORDS[names[base]][1] == ("*args",):
                return names[base]
    return None


def encode(value) -> bytes:
    """`value` as bytes (PlainDataError naming the first value that is not plain data)."""
    buffers: list[bytes] = []
    doc = json.dumps(_enc(value, buffers, 0), separators=(",", ":")).encode()
    parts = [_LEN.pack(len(doc)), doc]
    for buf in buffers:
        parts += [_LEN.pack(len(buf)), buf]
    return b"".join(parts)


def _enc(value, buffers: list, depth: int):
    if depth > MAX_DEPTH:
        raise PlainDataError(f"value nested deeper than {MAX_DEPTH} levels")
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, float)):      # json writes repr(float): every bit, nan and inf kept
        return value if type(value) in (int, float) else (int(value) if isinstance(value, int) else float(value))
    if isinstance(value, complex):
        return {"$": "complex", "v": [repr(value.real), repr(value.imag)]}
    if isinstance(value, list):
        return [_enc(v, buffers, depth + 1) for v in value]
    if isinstance(value, torch.Size):
        return {"$": "size", "v": list(value)}
    if isinstance(value, tuple):
        return {"$": "tuple", "v": [_enc(v, buffers, depth + 1) for v in value]}
    if isinstance(value, dict):
        return {"$": "dict", "v": [[_enc(k, buffers, depth + 1), _enc(v, buffers, depth + 1)]
                                  for k, v in value.items()]}
    if isinstance(value, (bytes, bytearray, memoryview)):
        buffers.append(bytes(value))
        return {"$": "bytes", "b": len(buffers) - 1}
    if isinstance(value, torch.dtype):
        return {"$": "dtype", "v": _dtype_name(value)}
    if isinstance(value, torch.Tensor):
        return _enc_tensor(value, buffers)
    if type(value).__module__ == "numpy":
        import numpy as np
        if isinstance(value, np.ndarray):
            return _enc_tensor(torch.from_numpy(np.ascontiguousarray(value)), buffers)
        if isinstance(value, np.generic):
            return _enc(value.item(), buffers, depth)
    name = record_name(type(value))
    if name is not None:
        _, names, _ = _RECORDS[name]
        if names == ("*args",):
            try:
                return {"$": "rec", "cls": name, "v": [_enc(v, buffers, depth + 1) for v in value.args]}
            except PlainDataError:        # arguments that are not plain data: the message only
                return {"$": "rec", "cls": name, "v": [str(value)]}
        fields = [getattr(value, f) for f in names]
        fields = [None if isinstance(v, BaseException) and record_name(type(v)) is None else v
                  for v in fields]          # a cause that is not a plain record travels as None
        return {"$": "rec", "cls": name, "v": [_enc(v, buffers, depth + 1) for v in fields]}
    raise PlainDataError(f"a {type(value).__module__}.{type(value).__qualname__} is not plain data; "
                         f"return tensors, numbers, strings, lists, tuples or dicts of them")


def _dtype_name(dtype: torch.dtype) -> str:
    name = str(dtype).removeprefix("torch.")
    if name not in _DTYPES:
        raise PlainDataError(f"tensors of dtype {dtype} cannot be sent as plain data")
    return name


def _enc_tensor(t: torch.Tensor, buffers: list) -> dict:
    if t.layout != torch.strided or t.is_quantized:
        raise PlainDataError(f"a {t.layout} tensor is not plain data; send a dense tensor")
    name = _dtype_name(t.dtype)
    flat = t.detach().to("cpu").contiguous().reshape(-1)
    buffers.append(flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b"")
    return {"$": "tensor", "dtype": name, "shape": list(t.shape), "b": len(buffers) - 1}


def decode(blob: bytes):
    """The value `blob` encodes; PlainDataError if it is not a valid encoding. Runs no code from it."""
    try:
        view = memoryview(blob)
        (n,) = _LEN.unpack_from(view, 0)
        pos = _LEN.size + n
        if pos > len(view):
            raise PlainDataError("truncated document")
        doc = json.loads(bytes(view[_LEN.size:pos]))
        buffers = []
        while pos < len(view):
            (k,) = _LEN.unpack_from(view, pos)
            pos += _LEN.size
            if pos + k > len(view):
                raise PlainDataError("truncated buffer")
            buffers.append(view[pos:pos + k])
            pos += k
        return _dec(doc, buffers, 0)
    except PlainDataError:
        raise
    except (ValueError, TypeError, KeyError, IndexError, RecursionError, struct.error, AttributeError) as exc:
        raise PlainDataError(f"not a valid plain-data message ({type(exc).__name__}: {exc})") from None


def _dec(doc, buffers: list, depth: int):
    if depth > MAX_DEPTH:
        raise PlainDataError(f"document nested deeper than {MAX_DEPTH} levels")
    if doc is None or isinstance(doc, (bool, int, float, str)):
        return doc
    if isinstance(doc, list):
        return [_dec(v, buffers, depth + 1) for v in doc]
    if not isinstance(doc, dict):
        raise PlainDataError(f"unexpected JSON value {type(doc).__name__}")
    tag = doc["$"]
    if tag in ("complex", "tuple", "size", "dict", "rec") and not isinstance(doc["v"], list):
        raise PlainDataError(f"a {tag} needs a list of values")
    if tag == "complex":
        return complex(float(doc["v"][0]), float(doc["v"][1]))
    if tag == "tuple":
        return tuple(_dec(v, buffers, depth + 1) for v in doc["v"])
    if tag == "size":
        return torch.Size([int(d) for d in doc["v"]])
    if tag == "dict":
        return {_hashable(_dec(k, buffers, depth + 1)): _dec(v, buffers, depth + 1) for k, v in doc["v"]}
    if tag == "bytes":
        return bytes(buffers[int(doc["b"])])
    if tag == "dtype":
        return _DTYPES[doc["v"]]
    if tag == "tensor":
        return _dec_tensor(doc, buffers)
    if tag == "rec":
        klass, names, keyword = _RECORDS[doc["cls"]]
        values = [_dec(v, buffers, depth + 1) for v in doc["v"]]
        if names == ("*args",):
            return klass(*values)
        if len(values) != len(names):
            raise PlainDataError(f"record {doc['cls']} has {len(values)} fields, expected {len(names)}")
        return klass(**dict(zip(names, values))) if keyword else klass(*values)
    raise PlainDataError(f"unknown tag {tag!r}")


def _hashable(key):
    if isinstance(key, list):
        raise PlainDataError("a list cannot be a dict key")
    return key


def _dec_tensor(doc: dict, buffers: list) -> torch.Tensor:
    dtype = _DTYPES[doc["dtype"]]
    shape = [int(d) for d in doc["shape"]]
    if any(d < 0 for d in shape):
        raise PlainDataError(f"negative tensor shape {shape}")
    buf = buffers[int(doc["b"])]
    numel = 1
    for d in shape:
        numel *= d
    itemsize = torch.empty((), dtype=dtype).element_size()
    if len(buf) != numel * itemsize:
        raise PlainDataError(f"tensor of shape {shape} and dtype {dtype} needs {numel * itemsize} bytes, "
                             f"got {len(buf)}")
    if numel == 0:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(buf), dtype=torch.uint8).view(dtype).reshape(shape)


def _register_runtime_records() -> None:
    """What the runtime itself sends back: counters, trace events, its errors and Python's."""
    from .. import errors
    from ..observe import trace
    for klass in (BaseException, Exception, ArithmeticError, AssertionError, AttributeError, EOFError,
                  ImportError, ModuleNotFoundError, IndexError, KeyError, LookupError, MemoryError,
                  NotImplementedError, OSError, OverflowError, RecursionError, RuntimeError, TimeoutError,
                  TypeError, ValueError, ZeroDivisionError, KeyboardInterrupt, SystemExit):
        plain_record(klass, name=f"builtins.{klass.__name__}")
    for klass in (trace.OpCount, trace.Counters, trace.Event, errors.DistError, errors.DeadlockError,
                  errors.MessageMismatchError, errors.CollectivesDisabledError, errors.PeerFailedError,
                  errors.LaunchError):
        plain_record(klass)
    plain_record(errors.RankError, fields=("rank", "world_size", "exc_type", "message", "remote_traceback",
                                           "cause", "others"))


_register_runtime_records()

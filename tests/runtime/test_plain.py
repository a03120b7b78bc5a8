"""minitorch_dist/runtime/launching/plain.py: what untrusted ranks send back is rebuilt exactly, and nothing in it can run code."""

import json
import math
import pickle
import struct

import numpy as np
import pytest
import torch

from minitorch_dist import DeadlockError, RankError
from minitorch_dist.runtime.launching.plain import PlainDataError, decode, encode, plain_record
from minitorch_dist.runtime.observe.trace import Counters, Event, OpCount


def roundtrip(value):
    return decode(encode(value))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.complex64,
                                   torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool])
def test_tensors_of_every_dtype_come_back_bit_for_bit(dtype):
    x = (torch.randn(3, 5, dtype=torch.float64) * 100).to(dtype)
    for t in (x, x.t(), x[1:, ::2], x[0, 0], x[:0]):          # views, non-contiguous, 0-dim, empty
        got = roundtrip(t)
        assert got.dtype == t.dtype and got.shape == t.shape and got.is_contiguous()
        assert torch.equal(got.view(-1).view(torch.uint8) if t.numel() else got, t.contiguous().view(-1).view(
            torch.uint8) if t.numel() else t)


def test_containers_numbers_and_records():
    value = {"a": [1, 2.5, None, True, "s", b"\x00\xff"], 3: (1, (2,)), ("k", 1): {"nested": [torch.ones(2)]},
             "nan": float("nan"), "inf": -math.inf, "big": 2 ** 100, "c": 1 - 2j, "size": torch.Size([2, 3]),
             "dtype": torch.bfloat16, "np": np.arange(4, dtype=np.int16), "np1": np.float32(1.5),
             "counters": Counters({"send": OpCount(1, 2, 3)}), "event": Event(0, "send", 1, 0, 4, 0.5, 0.75)}
    got = roundtrip(value)
    assert got["a"] == value["a"] and got[3] == (1, (2,)) and isinstance(got[3], tuple)
    assert math.isnan(got["nan"]) and got["inf"] == -math.inf and got["big"] == 2 ** 100 and got["c"] == 1 - 2j
    assert got["size"] == torch.Size([2, 3]) and got["dtype"] is torch.bfloat16
    assert torch.equal(got["np"], torch.arange(4, dtype=torch.int16)) and got["np1"] == 1.5
    assert got["counters"].op("send").bytes_sent == 3 and got["event"] == value["event"]
    assert torch.equal(got[("k", 1)]["nested"][0], torch.ones(2))


def test_exceptions_travel_as_their_nearest_registered_class():
    class MyError(ValueError):
        pass

    err = RankError(1, 4, "MyError", "bad x", "tb", cause=MyError("bad x", object()), others="rank 2: ...")
    got = roundtrip([err, DeadlockError("report"), KeyError("k")])
    assert isinstance(got[0], RankError) and str(got[0]) == str(err)
    assert type(got[0].cause) is ValueError and "bad x" in str(got[0].cause)     # args not plain: the message
    assert type(got[1]) is DeadlockError and str(got[1]) == "report" and type(got[2]) is KeyError


def test_what_is_not_plain_data_is_refused_with_its_type():
    for value in (object(), {"f": print}, [torch.ones(2).to_sparse()]):
        with pytest.raises(PlainDataError, match="not plain data"):
            encode(value)


def _doc(obj) -> bytes:
    doc = json.dumps(obj).encode()
    return struct.pack("<Q", len(doc)) + doc


@pytest.mark.parametrize("blob", [
    pickle.dumps(print),                                             # a pickle is not a plain message
    _doc({"$": "rec", "cls": "os.system", "v": ["echo pwned"]}),     # a class that is not registered
    _doc({"$": "rec", "cls": "builtins.ValueError", "v": {"x": 1}}),
    _doc({"$": "tensor", "dtype": "object", "shape": [1], "b": 0}),
    _doc({"$": "tensor", "dtype": "float32", "shape": [4], "b": 0}) + struct.pack("<Q", 3) + b"abc",
    _doc({"$": "tensor", "dtype": "float32", "shape": [-1], "b": 0}) + struct.pack("<Q", 0),
    _doc({"$": "dict", "v": [[[1], 2]]}),
    _doc({"$": "pickle", "v": "..."}),
    _doc([[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]
                ]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]] * 1),
    b"\x10\x00\x00\x00\x00\x00\x00\x00{}",                          # a length past the end
    b"",
])
def test_malformed_or_hostile_bytes_raise_plain_data_error(blob):
    try:
        got = decode(blob)
    except PlainDataError:
        return
    assert isinstance(got, list)            # the deep list is fine: nesting under the limit


def test_depth_bomb_is_refused():
    doc = b"[" * 5000 + b"]" * 5000
    with pytest.raises(PlainDataError):
        decode(struct.pack("<Q", len(doc)) + doc)


def test_registered_records_are_rebuilt_by_their_constructor():
    @plain_record(fields=("index", "what"))
    class Failed(Exception):
        def __init__(self, index, what):
            super().__init__(index, what)
            self.index, self.what = index, what

    got = roundtrip(Failed(3, "boom"))
    assert type(got) is Failed and (got.index, got.what) == (3, "boom")

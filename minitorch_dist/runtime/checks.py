"""Argument checks of Group calls: each error says what was wrong, on which rank, and what to do."""

from __future__ import annotations

import os
import sys

import torch

from .transports.wire import MAX_TAG


def where(group) -> str:
    """'rank 1' or 'rank 1 (world rank 3) of group[1, 3]'."""
    text = f"rank {group.rank}"
    if group.name != "world":
        text += f" (world rank {group.world_rank}) of {group.name}"
    return text


def check_rank(group, peer, op: str, what: str, allow_self: bool = False) -> int:
    """`peer` must be a rank of `group` (and, for messages, not this rank)."""
    if isinstance(peer, bool) or not isinstance(peer, int) or not 0 <= peer < group.size:
        raise ValueError(f"{op} on {where(group)}: {what}={peer!r} is not a rank of this group "
                         f"(0..{group.size - 1})")
    if peer == group.rank and not allow_self:
        raise ValueError(f"{op} on {where(group)}: {what}={peer} is this rank itself; "
                         f"a rank cannot message itself: copy the tensor instead")
    return peer


def check_tensor(group, tensor, op: str, name: str = "tensor") -> None:
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{op} on {where(group)}: {name} must be a torch.Tensor, got {type(tensor).__name__}")


def check_tag(group, tag, op: str) -> int:
    if isinstance(tag, bool) or not isinstance(tag, int) or not 0 <= tag <= MAX_TAG:
        raise ValueError(f"{op} on {where(group)}: tag={tag!r} must be an int in 0..{MAX_TAG}")
    return tag


_RUNTIME = os.path.dirname(os.path.abspath(__file__)) + os.sep
_PACKAGE_PARENT = os.path.dirname(os.path.dirname(_RUNTIME.rstrip(os.sep))) + os.sep


def caller_line(frame=None) -> str:
    """"at minitorch_dist/collectives/ring.py:75 (all_gather_)": the first frame outside the runtime
    (and torch) that led to a blocking operation, for the deadlock report's line of this rank.
    The walk starts at `frame` (default: the caller's)."""
    frame = sys._getframe(1) if frame is None else frame
    while frame is not None:
        path = frame.f_code.co_filename
        if not path.startswith(_RUNTIME) and f"{os.sep}torch{os.sep}" not in path:
            short = path[len(_PACKAGE_PARENT):] if path.startswith(_PACKAGE_PARENT) else os.path.basename(path)
            return f"at {short}:{frame.f_lineno} ({frame.f_code.co_name})"
        frame = frame.f_back
    return ""

"""Homework 5 test harness, rank side: count the bytes autograd saves for backward (saved-tensor hooks).

    meter = SavedBytes()
    with meter:                     # every tensor autograd saves in this thread is counted while alive
        ...forward and backward...
    meter.peak, meter.live          # the most bytes alive at once, and those alive now

A saved tensor is alive from its forward (pack) until autograd frees it (after its backward, or
when its graph is dropped). Tensors saved twice count twice (they are what a stage holds for backward).
A saved tensor changed in place fails backward as it would unmeasured (minitorch_dist.memory.SavedTensor).
"""

from __future__ import annotations

import weakref

import torch

from minitorch_dist.memory import SavedTensor


class SavedBytes:
    """Live and peak bytes of the tensors autograd has saved (while the context is entered)."""

    def __init__(self):
        self.live = 0
        self.peak = 0
        self._hooks = None

    def reset_peak(self) -> None:
        self.peak = self.live

    def _free(self, nbytes: int) -> None:
        self.live -= nbytes

    def _pack(self, tensor: torch.Tensor):
        box = SavedTensor(tensor)
        nbytes = tensor.numel() * tensor.element_size()
        self.live += nbytes
        self.peak = max(self.peak, self.live)
        weakref.finalize(box, self._free, nbytes)
        return box

    def __enter__(self) -> "SavedBytes":
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, SavedTensor.unpack)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._hooks.__exit__(*exc)

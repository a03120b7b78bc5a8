"""MemoryTracker: live and peak bytes per rank on CPU, where torch.cuda.max_memory_allocated is missing.

    tracker = MemoryTracker(model, optimizer)        # after wrapping the model (FSDP, ZeRO, ...)
    with tracker.saved_activations():                # counts what autograd saves for backward
        loss = model(x).sum(); tracker.sample("forward")
        loss.backward()
    optimizer.step(); tracker.sample("step")
    tracker.report()   # {"live": {...}, "peak": {...}, "peak_total": int, "cuda": {...} or None}

Four categories, counted by storage (a view and its base count once, a tied weight once):
  params       every tensor a module of `model` holds: its parameters, buffers and plain tensor
               attributes (FSDP's gathered views), plus the optimizer's parameters (flat shards)
  grads        the .grad of all of those
  optimizer    the tensors in optimizer.state (and in the state of a wrapped optimizer `.optim`)
  activations  the tensors autograd saved for backward inside saved_activations(), by storage,
               from the moment they are saved until autograd lets them go; storages already
               counted as params are not counted again
A storage counts its current size (untyped_storage().nbytes()): one resized to 0 counts 0; a
DTensor (torch FSDP2) counts its local shard.
Samples are taken by sample(), and automatically before and after the forward of every module
of `model` (so the peak sees a unit while it is gathered); a saved tensor updates the activations.
The attribute names holding tensors are read when the tracker is built: build it after wrapping.
On CUDA the allocator's own figures come beside them (torch.cuda.memory_allocated, max_...).
"""

from __future__ import annotations

import contextlib
import weakref

import torch
from torch import nn

CATEGORIES = ("params", "grads", "optimizer", "activations")


def _local(t: torch.Tensor) -> torch.Tensor:
    """A DTensor (torch's FSDP2 parameters and their state) counts as its local shard."""
    to_local = getattr(t, "to_local", None)
    return to_local() if callable(to_local) else t


def _storage_key(t: torch.Tensor) -> tuple:
    t = _local(t)
    s = t.untyped_storage()
    return (t.device.type, s.data_ptr(), id(s)) if s.data_ptr() == 0 else (t.device.type, s.data_ptr())


def storage_bytes(tensors) -> int:
    """Bytes of the distinct storages behind `tensors` (None entries and repeats ignored)."""
    seen, total = set(), 0
    for t in tensors:
        if t is None:
            continue
        key = _storage_key(t)
        if key not in seen:
            seen.add(key)
            total += _local(t).untyped_storage().nbytes()
    return total


def module_tensors(model: nn.Module) -> list[torch.Tensor]:
    """Every tensor the modules of `model` hold: parameters, buffers, plain tensor attributes."""
    return [t for module, names in tensor_slots(model) for t in _read(module, names)]


def tensor_slots(model: nn.Module) -> list[tuple[nn.Module, list[str]]]:
    """(module, names of its tensor attributes: parameters, buffers, plain tensors) of every module."""
    slots = []
    for module in model.modules():
        names = [n for n, t in module._parameters.items() if t is not None]
        names += [n for n, t in module._buffers.items() if t is not None]
        names += [n for n, v in vars(module).items() if isinstance(v, torch.Tensor)]
        slots.append((module, names))
    return slots


def _read(module: nn.Module, names: list[str]) -> list[torch.Tensor]:
    return [t for t in (getattr(module, n, None) for n in names) if isinstance(t, torch.Tensor)]


def optimizer_params(optimizer) -> list[torch.Tensor]:
    """The tensors `optimizer` (and a wrapped `.optim`) updates."""
    found = []
    for opt in _optimizers(optimizer):
        found += [q for g in opt.param_groups for q in g["params"]]
    return found


def optimizer_state(optimizer) -> list[torch.Tensor]:
    """The tensors in the state of `optimizer` (and of a wrapped `.optim`)."""
    found = []
    for opt in _optimizers(optimizer):
        for per_param in opt.state.values():
            found += [v for v in per_param.values() if isinstance(v, torch.Tensor)]
    return found


def _optimizers(optimizer) -> list:
    out = []
    while optimizer is not None and optimizer not in out:
        if hasattr(optimizer, "param_groups") and hasattr(optimizer, "state"):
            out.append(optimizer)
        optimizer = getattr(optimizer, "optim", None)
    return out


class MemoryTracker:
    """Live and peak bytes of one rank's parameters, gradients, optimizer state and saved activations."""

    def __init__(self, model: nn.Module, optimizer=None, hooks: bool = True):
        self.model, self.optimizer = model, optimizer
        self.live = dict.fromkeys(CATEGORIES, 0)
        self.peak = dict.fromkeys(CATEGORIES, 0)
        self.peak_total = 0
        self.peak_where = ""
        self._saved: dict[tuple, list] = {}      # storage key -> [bytes, holders alive]
        self._param_keys: set = set()
        self._handles = []
        self._slots = tensor_slots(model)      # the attribute names are read once; their tensors at each sample
        if hooks:
            for module in model.modules():
                self._handles.append(module.register_forward_pre_hook(lambda m, a: self._auto("forward")))
                self._handles.append(module.register_forward_hook(lambda m, a, o: self._auto("forward")))

    def close(self) -> None:
        """Remove the tracker's module hooks."""
        for h in self._handles:
            h.remove()
        self._handles = []

    def _auto(self, where: str) -> None:
        self.sample(where)

    def _measure(self) -> dict:
        params = [t for module, names in self._slots for t in _read(module, names)]
        params += optimizer_params(self.optimizer)
        self._param_keys = {_storage_key(t) for t in params}
        return {"params": storage_bytes(params),
                "grads": storage_bytes(t.grad for t in params if t.is_leaf),
                "optimizer": storage_bytes(optimizer_state(self.optimizer)),
                "activations": sum(b for b, _ in self._saved.values())}

    def sample(self, where: str = "") -> dict:
        """Measure now; update the peaks; return the live bytes per category."""
        self.live = self._measure()
        for k, v in self.live.items():
            self.peak[k] = max(self.peak[k], v)
        total = sum(self.live.values())
        if total > self.peak_total:
            self.peak_total, self.peak_where = total, where
        return dict(self.live)

    def _saved_grew(self) -> None:
        """A tensor was saved: only the activations changed since the last sample (cheap update)."""
        self.live["activations"] = sum(b for b, _ in self._saved.values())
        self.peak["activations"] = max(self.peak["activations"], self.live["activations"])
        total = sum(self.live.values())
        if total > self.peak_total:
            self.peak_total, self.peak_where = total, "save"

    def reset_peaks(self) -> None:
        """Start the peaks again from the live bytes now."""
        self.peak = dict.fromkeys(CATEGORIES, 0)
        self.peak_total = 0
        self.sample("reset")

    @contextlib.contextmanager
    def saved_activations(self):
        """Count the tensors autograd saves for backward while inside (saved_tensors_hooks)."""
        def pack(t):
            key = _storage_key(t)
            holder = SavedTensor(t)
            if key not in self._param_keys:
                entry = self._saved.setdefault(key, [t.untyped_storage().nbytes(), 0])
                entry[1] += 1
                weakref.finalize(holder, self._release, key)
                self._saved_grew()
            return holder

        with torch.autograd.graph.saved_tensors_hooks(pack, SavedTensor.unpack):
            yield self

    def _release(self, key) -> None:
        entry = self._saved.get(key)
        if entry is not None:
            entry[1] -= 1
            if entry[1] <= 0:
                del self._saved[key]

    def report(self) -> dict:
        """Plain data: live and peak bytes per category, the total peak, where it was, CUDA figures."""
        self.sample("report")
        cuda = None
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            cuda = {"allocated": torch.cuda.memory_allocated(), "max_allocated": torch.cuda.max_memory_allocated()}
        return {"live": dict(self.live), "peak": dict(self.peak), "peak_total": self.peak_total,
                "peak_where": self.peak_where, "cuda": cuda}


class SavedTensor:
    """What a saved-tensor pack hook returns: the tensor and its version when autograd saved it.

    Torch checks a saved tensor's version counter at backward ("modified by an inplace operation")
    only when no saved-tensor hooks are active; with hooks, that check is the hooks' job. unpack()
    makes it, with torch's own message, so code measured under a tracker fails where it would fail
    unmeasured. Shared by MemoryTracker and homework 5's SavedBytes.
    """

    __slots__ = ("tensor", "version", "__weakref__")

    def __init__(self, tensor: torch.Tensor):
        self.tensor = tensor
        self.version = tensor._version

    @staticmethod
    def unpack(box: "SavedTensor") -> torch.Tensor:
        t = box.tensor
        if t._version != box.version:
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified by an inplace "
                f"operation: [{t.type()} {list(t.shape)}] is at version {t._version}; expected version "
                f"{box.version} instead (seen by the memory tracker's saved-tensor hooks, which take over "
                "torch's own check). Hint: work on a copy (.clone()) instead of changing a saved tensor in place.")
        return t

"""A CPU-only check that homework code allocates on group.device: a stray CPU allocation fails
here as it would on a GPU, without a GPU.

    launch(guarded, 2, args=(rank_fn, *args))     # rank_fn(group, *args) runs under DeviceGuard

On a CPU run group.device is the CPU, so a tensor made without `device=` lands on the right device
by luck. Under the guard, group.device is torch.device("cpu", 0): still the CPU to torch, but told
apart from "cpu". A tensor factory (torch.zeros, arange, randn, tensor, empty_like(device=...), an
nn.Module's parameters...) called from homework code (minitorch_dist outside its runtime, solutions
laid over it, assignments) without device=, or with a device that is not group.device, makes a
*stray* tensor; so do the tensors the launcher hands the rank (they arrive on the CPU). What is
computed from stray tensors only is stray; `.to(group.device)` gives a clean tensor (a module's
`.to(group.device)` cleans its parameters), and `t.device` of a clean tensor is group.device, so
`device=x.device` follows x. An operation that mixes a stray tensor with a clean one (on a GPU: a
CPU tensor with a CUDA one), or a stray tensor given to a Group's send/recv/collective, raises
StrayAllocation naming the operation and the line that allocated. As on a GPU, a stray 0-dim tensor
(a CPU scalar) may mix, a stray index tensor may index, and copy_ may copy across.

Allocations inside torch (an optimizer's step counter) are not the homework's and are not watched.
What it cannot see: a `.cpu()` (on the CPU the same tensor comes back).
"""

from __future__ import annotations

import dataclasses
import os
import sys
import sysconfig
import weakref

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

FACTORIES = {torch.zeros, torch.ones, torch.empty, torch.full, torch.arange, torch.linspace, torch.logspace,
             torch.eye, torch.rand, torch.randn, torch.randint, torch.randperm, torch.tensor, torch.as_tensor,
             torch.from_numpy, torch.empty_strided, torch.scalar_tensor, torch.normal, torch.tril_indices,
             torch.triu_indices}
MOVES = {torch.Tensor.to, torch.Tensor.cuda}
UNCHECKED = {torch.Tensor.copy_, torch.Tensor.cpu, torch._has_compatible_shallow_copy_type}   # legal across devices
GROUP_DEVICE = torch.device("cpu", 0)      # group.device under the guard: the CPU, told apart from "cpu"
_DEVICE, _DATA = torch._C.TensorBase.__dict__["device"], torch._C.TensorBase.__dict__["data"]
COMM = ("isend", "irecv", "send", "recv", "sendrecv", "all_reduce", "broadcast", "all_gather", "reduce_scatter")

_TORCH = os.path.dirname(torch.__file__) + os.sep
_STDLIB = sysconfig.get_paths()["stdlib"] + os.sep
_HOMEWORK = (f"{os.sep}minitorch_dist{os.sep}", f"{os.sep}assignments{os.sep}")
_NOT_HOMEWORK = (f"{os.sep}minitorch_dist{os.sep}runtime{os.sep}", os.path.abspath(__file__))
_MODULES = _TORCH + "nn" + os.sep + "modules" + os.sep


class StrayAllocation(RuntimeError):
    """A tensor allocated without device= met a tensor on group.device (a GPU run would fail here)."""


LOG = os.environ.get("DEVICE_GUARD_LOG")     # a file: problems are appended there, not raised (an audit)


def report(message: str) -> None:
    if LOG is None:
        raise StrayAllocation(message)
    with open(LOG, "a") as f:
        f.write(message + "\n")


_tags: dict[int, tuple] = {}        # id(tensor) -> (weakref, where it was allocated)


def tag_of(t) -> str | None:
    entry = _tags.get(id(t))
    return entry[1] if entry is not None and entry[0]() is t else None


def tag(t, where: str) -> None:
    if isinstance(t, torch.Tensor):
        key = id(t)
        _tags[key] = (weakref.ref(t, lambda _r, k=key: _tags.pop(k, None)), where)


def untag(t) -> None:
    if isinstance(t, torch.Tensor) and tag_of(t) is not None:
        del _tags[id(t)]


def homework_caller() -> str | None:
    """"path:line" of the homework line behind this allocation, or None for other code.

    A factory called by homework code directly counts, and one inside an nn.Module built by
    homework code (its parameters); one inside the rest of torch (an optimizer's step counter,
    autograd) does not."""
    frame, via_torch, via_module = sys._getframe(2), False, False
    while frame is not None:
        path = frame.f_code.co_filename
        if path.startswith(_TORCH):
            via_torch, via_module = True, via_module or path.startswith(_MODULES)
        elif not path.startswith(_STDLIB) and path != os.path.abspath(__file__):
            if any(h in path for h in _HOMEWORK) and not any(n in path for n in _NOT_HOMEWORK):
                if not via_torch or via_module:
                    at = max(path.rfind(h) for h in _HOMEWORK) + 1       # minitorch_dist/... or assignments/...
                    return f"{path[at:]}:{frame.f_lineno}"
            return None
        frame = frame.f_back
    return None


def _name(func) -> str:
    return getattr(func, "__qualname__", None) or getattr(func, "__name__", repr(func))


def _tensors(args, kwargs) -> list:
    return [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]


def _is_group_device(device) -> bool:
    try:
        return torch.device(device) == GROUP_DEVICE
    except (TypeError, RuntimeError):
        return False


def _target(args, kwargs):
    """Where .to(*args, **kwargs) moves a tensor: "group", "other" (a device that is not group.device,
    or a stray tensor's), or None (a dtype only)."""
    other = kwargs.get("other", args[0] if args and isinstance(args[0], torch.Tensor) else None)
    if other is not None:
        return "other" if tag_of(other) is not None else "group"
    device = kwargs.get("device")
    if device is None:
        try:
            device = torch._C._nn._parse_to(*args)[0]
        except (TypeError, RuntimeError):
            return None
    if device is None:
        return None
    return "group" if _is_group_device(device) else "other"


def _parameter_keeps_tag(new):
    def parameter(cls, data=None, requires_grad=True):     # a module's parameter keeps its data's tag
        p = new(cls, data, requires_grad)
        if data is not None and tag_of(data) is not None:
            tag(p, tag_of(data))
        return p
    return staticmethod(parameter)


class DeviceGuard(TorchFunctionMode):
    """Tags stray allocations and fails an operation that mixes them with clean tensors (module doc).
    While it is on, the Group's communication and nn.Parameter are patched to keep watching."""

    def __enter__(self):
        from minitorch_dist.runtime.group import Group
        self._saved = [(Group, name, Group.__dict__.get(name, None), getattr(Group, name)) for name in COMM]
        self._saved.append((torch.nn.Parameter, "__new__", torch.nn.Parameter.__dict__["__new__"], None))
        self._saved.append((Group, "device", Group.__dict__["device"], None))
        for cls, name, _, method in self._saved[:-2]:
            setattr(cls, name, _checked(name, method))
        torch.nn.Parameter.__new__ = _parameter_keeps_tag(torch.nn.Parameter.__new__)
        Group.device = property(lambda group: GROUP_DEVICE)
        return super().__enter__()

    def __exit__(self, *exc):
        for cls, name, own, _ in self._saved:
            if own is None:
                delattr(cls, name)
            else:
                setattr(cls, name, own)
        return super().__exit__(*exc)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if getattr(func, "__self__", None) is _DEVICE and getattr(func, "__name__", "") == "__get__":
            return GROUP_DEVICE if tag_of(args[0]) is None else func(*args, **kwargs)     # t.device
        if func in MOVES:
            out = func(*args, **kwargs)
            target = "group" if func is torch.Tensor.cuda else _target(args[1:], kwargs)
            if target == "group":
                if out is args[0] and tag_of(out) is not None:
                    out = out.view_as(out)        # as on a GPU: a new tensor; the CPU one (cached?) stays stray
                untag(out)
            elif tag_of(args[0]) is not None:
                tag(out, tag_of(args[0]))
            return out
        device = kwargs.get("device")
        if func in FACTORIES or device is not None:
            out = func(*args, **kwargs)
            if device is not None and _is_group_device(device):
                return out
            if device is None and func is torch.as_tensor and args and isinstance(args[0], torch.Tensor):
                return out                                # as_tensor(t): t itself
            if device is not None or func in FACTORIES:
                where = homework_caller()
                if where is not None:
                    name = getattr(func, "__name__", "a factory")
                    how = "no device=" if device is None else f"device={str(device)!r}, not group.device"
                    for t in tree_flatten(out)[0]:
                        tag(t, f"torch.{name} at {where} ({how})")
            return out
        if getattr(func, "__self__", None) is _DATA and getattr(func, "__name__", "") == "__set__":
            (untag if tag_of(args[1]) is None else lambda t: tag(t, tag_of(args[1])))(args[0])   # t.data = moved
            return func(*args, **kwargs)
        if func in UNCHECKED or getattr(func, "__name__", "") == "__set__":
            return func(*args, **kwargs)
        if func is torch.Tensor.__getitem__:
            looked_at = [args[0]]                         # a CPU index may index a GPU tensor
        elif func is torch.Tensor.__setitem__:
            looked_at = [args[0], args[2]] if len(args) > 2 else [args[0]]
        else:
            looked_at = _tensors(args, kwargs)
        looked_at = [t for t in looked_at if isinstance(t, torch.Tensor)]
        stray = [t for t in looked_at if tag_of(t) is not None]
        big = [t for t in stray if t.dim() > 0]
        if big and len(stray) < len(looked_at):
            report(f"{_name(func)} mixes a tensor made by {tag_of(big[0])} with tensors on group.device; on a "
                   f"GPU this fails. Allocate on group.device (device=group.device, or .to(group.device)).")
        out = func(*args, **kwargs)
        if stray and len(stray) == len(looked_at):
            for t in tree_flatten(out)[0]:          # made from stray tensors only: stray too
                if isinstance(t, torch.Tensor) and tag_of(t) is None:
                    tag(t, tag_of(stray[0]))
        return out


def _checked(name: str, method):
    def comm(self, *args, **kwargs):
        for t in _tensors(args, kwargs):
            if tag_of(t) is not None:
                report(f"group.{name} was given a tensor made by {tag_of(t)}; on a GPU run (backend nccl) "
                       f"this fails. Allocate on group.device.")
        return method(self, *args, **kwargs)
    comm.__name__ = name
    return comm


def _tag_inputs(obj, depth: int = 0) -> None:
    """Tag the tensors in what the launcher handed the rank (they arrive on the CPU)."""
    if depth > 3:
        return
    if isinstance(obj, torch.Tensor):
        tag(obj, "the launcher (a rank's argument arrives on the CPU; move it with .to(group.device))")
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            _tag_inputs(x, depth + 1)
    elif isinstance(obj, dict):
        for x in obj.values():
            _tag_inputs(x, depth + 1)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            _tag_inputs(getattr(obj, f.name), depth + 1)


def guarded(group, rank_fn, *args):
    """Rank code: rank_fn(group, *args) under DeviceGuard; the tensors in args count as stray."""
    try:
        _tag_inputs(args)
        with DeviceGuard():
            return rank_fn(group, *args)
    finally:
        _tags.clear()

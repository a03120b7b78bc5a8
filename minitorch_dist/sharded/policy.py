"""The unit wrapping policy, provided: which parameters go into which FSDP unit.

    units = transformer_units(model)       # [Unit("blocks.0", ...), ..., Unit("outer", ...)]

One unit per transformer block (each module of `model.blocks`), and an outer unit with every
other parameter: embeddings, the final norm and the LM head. A tied weight (the LM head's weight
IS the token embedding's) is one Parameter: it sits once, in the outer unit, and both modules
that use it are listed in its `uses`. Frozen parameters (requires_grad False) are listed apart:
FSDP keeps them, and buffers, unsharded on every rank.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import nn


@dataclass
class Slot:
    """One trainable parameter of a unit: its first name, the tensor, every (module, attribute) using it."""

    name: str
    param: nn.Parameter
    uses: list = field(default_factory=list)


@dataclass
class Unit:
    """An FSDP unit: its name, the module whose forward brackets it, its trainable parameters."""

    name: str
    module: nn.Module
    slots: list = field(default_factory=list)
    frozen: list = field(default_factory=list)


def transformer_units(model: nn.Module) -> list[Unit]:
    """Units of a model with a `blocks` ModuleList: one per block, in order, then the outer unit
    (module = the model itself) with the remaining parameters."""
    blocks = getattr(model, "blocks", None)
    if not isinstance(blocks, nn.ModuleList):
        raise ValueError(f"transformer_units: {type(model).__name__} has no `blocks` ModuleList; "
                         f"pass units=[...] built with make_unit() for other models")
    units = [make_unit(f"blocks.{i}", block) for i, block in enumerate(blocks)]
    taken = {id(s.param) for u in units for s in u.slots} | {id(q) for u in units for q in u.frozen}
    units.append(make_unit("outer", model, skip=taken))
    return units


def make_unit(name: str, module: nn.Module, skip: set | None = None) -> Unit:
    """A unit of every parameter under `module` (not in `skip`, a set of ids), tied ones once."""
    skip = skip or set()
    unit, by_id = Unit(name, module), {}
    for mod_name, mod in module.named_modules():
        for attr, prm in mod._parameters.items():
            if prm is None or id(prm) in skip:
                continue
            if not prm.requires_grad:
                if all(q is not prm for q in unit.frozen):
                    unit.frozen.append(prm)
                continue
            if id(prm) not in by_id:
                by_id[id(prm)] = Slot(f"{mod_name}.{attr}" if mod_name else attr, prm)
                unit.slots.append(by_id[id(prm)])
            by_id[id(prm)].uses.append((mod, attr))
    return unit


def left_out(model: nn.Module, units: list[Unit], replicate=()) -> list[tuple[str, nn.Parameter]]:
    """The trainable parameters of `model` in no unit, (name, parameter) in model order. Each must be
    named in `replicate` (its own name, or a module's name above it): FSDP keeps those whole on every
    rank and averages their gradients. One that is not named is an error: it would be neither sharded
    nor averaged, and the ranks' copies would drift apart without a word."""
    taken = {id(s.param) for u in units for s in u.slots} | {id(q) for u in units for q in u.frozen}
    out, unnamed = [], []
    for name, prm in model.named_parameters():
        if not prm.requires_grad or id(prm) in taken:
            continue
        named = any(name == r or name.startswith(r + ".") for r in replicate if r)
        (out if named else unnamed).append((name, prm))
    if unnamed:
        names = ", ".join(n for n, _ in unnamed)
        raise ValueError(f"FSDP: trainable parameters in no unit: {names}. Each rank would keep and step its own "
                         f"copy, so the ranks' models would drift apart. Put them in a unit (units=[...]), or "
                         f"name them or their module in replicate=[...] to keep them whole on every rank with "
                         f"their gradients averaged.")
    return out

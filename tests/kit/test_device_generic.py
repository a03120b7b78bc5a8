"""Homeworks 2-6 allocate on group.device: their references, provided code and rank code run on a GPU.

Without a GPU (CI, laptops) the device guard (device_guard.py) stands in: each homework's reference
runs representative cases on 2 gloo ranks with every rank under the guard, and must run clean; the
same with a stray allocation planted in a copy of each homework must fail, naming the planted line.
The guard's own rules are checked here in-process. With GPUs, the tests marked gpu (pytest -m gpu)
run the references on backend nccl (or gloo with device cuda on one GPU) and compare what the ranks
computed with a CPU run.
"""

from __future__ import annotations

import json
import os
import sys

import pytest
import torch

from tests.kit.conftest import run_in
from tests.kit.device_guard import GROUP_DEVICE, DeviceGuard, StrayAllocation, tag_of
from tests.kit.device_probe import MARK
from tools.overlay import ROOT

HOMEWORKS = ["hw2", "hw3", "hw4", "hw5", "hw6"]
# homework -> (file in the reference copy, its device-generic text, the same with a stray allocation,
# the kind of case that runs it)
PLANTED = {
    "hw2": ("minitorch_dist/data_parallel/param_server.py", "dtype=self.params[0].dtype, device=g.device)",
            "dtype=self.params[0].dtype)", "ps"),
    "hw3": ("minitorch_dist/compression/sparsify.py", "torch.zeros(numel, dtype=dtype, device=all_values.device)",
            "torch.zeros(numel, dtype=dtype)", "topk_all_reduce"),
    "hw4": ("assignments/hw4/tests/hw4_ranks.py", "build_tp(kind, model.to(group.device), group, own",
            "build_tp(kind, model, group, own", "column"),        # the harness forgets to move the model
    "hw5": ("minitorch_dist/pipeline/boundary.py", "activation = stage.spec.input_buffer(stage.group.device)",
            "activation = stage.spec.input_buffer()", "boundary"),
    "hw6": ("minitorch_dist/sharded/flat_unit.py", "dtype=self.compute_dtype, device=flat.device, requires_grad",
            "dtype=self.compute_dtype, requires_grad", "fsdp"),
}


def probe(ov, *args: str) -> dict:
    code, out = run_in(ov, sys.executable, "-m", "tests.kit.device_probe", *args, timeout=300)
    lines = [line for line in out.splitlines() if line.startswith(MARK)]
    assert code == 0 and len(lines) == 1, out[-3000:]
    return json.loads(lines[0][len(MARK):])


# -- the guard's rules, in this process ------------------------------------------------------------
def homework_code(source: str) -> dict:
    """Functions compiled as if they were homework code (minitorch_dist/...): the guard watches them."""
    names = {"torch": torch, "GROUP_DEVICE": GROUP_DEVICE}
    exec(compile(source, os.path.join(ROOT, "minitorch_dist", "gossip", "planted.py"), "exec"), names)
    return names


PLANTED_SOURCE = '''
def zeros_without_device(x):
    return x + torch.zeros(x.shape)

def model_not_moved(x):
    return torch.nn.Linear(3, 2).double()(x)

def randn_not_moved(x):
    return x * torch.randn(3, generator=torch.Generator().manual_seed(0), dtype=x.dtype)

def host_buffer(x):
    return torch.empty_like(x, device="cpu").add_(x)

def as_a_gpu_allows(x, cached):
    y = torch.zeros(3, dtype=x.dtype, device=GROUP_DEVICE) + torch.ones_like(x)
    y = y + torch.arange(3, device=x.device) + cached.to(GROUP_DEVICE)
    model = torch.nn.Linear(3, 2).double().to(GROUP_DEVICE)
    model(y).sum().backward()
    z = y * torch.tensor(2.0, dtype=x.dtype)                   # a CPU scalar
    z = z[torch.tensor([0, 2])]                                # a CPU index
    return z.new_zeros(2).copy_(torch.ones(2))                 # copy_ from the CPU
'''


@pytest.mark.parametrize("name,made_by", [("zeros_without_device", "torch.zeros"), ("model_not_moved", "torch.empty"),
                                          ("randn_not_moved", "torch.randn"), ("host_buffer", "torch.empty_like")])
def test_the_guard_fails_a_stray_allocation_that_meets_group_device(name, made_by):
    fn = homework_code(PLANTED_SOURCE)[name]
    x = torch.ones(3, dtype=torch.float64, device=GROUP_DEVICE)
    with pytest.raises(StrayAllocation, match=rf"{made_by} at minitorch_dist/gossip/planted\.py:\d+"):
        with DeviceGuard():
            fn(x)


def test_the_guard_passes_what_a_gpu_accepts_and_a_moved_copy_leaves_the_cached_tensor_stray():
    names = homework_code(PLANTED_SOURCE + "\ndef cache():\n    return torch.ones(3, dtype=torch.float64)\n")
    x = torch.ones(3, dtype=torch.float64, device=GROUP_DEVICE)
    with DeviceGuard():
        cached = names["cache"]()
        assert names["as_a_gpu_allows"](x, cached).shape == (2,)
        assert tag_of(cached) is not None and tag_of(cached.to(GROUP_DEVICE)) is None
    fn = names["zeros_without_device"]
    fn(x)                                                      # outside the guard nothing is checked


# -- the references under the guard, and planted stray allocations --------------------------------------
@pytest.mark.slow
def test_every_reference_allocates_on_group_device(reference):
    assert probe(reference, *HOMEWORKS) == {hw: None for hw in HOMEWORKS}


@pytest.mark.slow
def test_a_planted_stray_allocation_fails_in_every_homework(reference):
    saved = {}
    try:
        for hw, (rel, good, bad, _) in PLANTED.items():
            path = os.path.join(reference.root, rel)
            with open(path) as f:
                saved[path] = text = f.read()
            assert text.count(good) == 1, f"{rel}: the text to plant the bug in moved; update PLANTED"
            with open(path, "w") as f:
                f.write(text.replace(good, bad))
        found = probe(reference, "--kinds", ",".join(kind for *_, kind in PLANTED.values()), *PLANTED)
    finally:
        for path, text in saved.items():
            with open(path, "w") as f:
                f.write(text)
    for hw, (rel, *_) in PLANTED.items():
        assert found[hw] is not None and "StrayAllocation" in found[hw], f"{hw}: the guard missed {rel}: {found[hw]}"
    named = {"hw2": "data_parallel/param_server.py", "hw3": "compression/sparsify.py", "hw4": "models/char_transformer.py",
             "hw5": "pipeline/spec.py", "hw6": "sharded/flat_unit.py"}     # the line that allocated
    for hw, where in named.items():
        assert f"minitorch_dist/{where}:" in found[hw], found[hw]


# -- on GPUs (pytest -m gpu) --------------------------------------------------------------------------
FLOAT32 = {"rtol": 1e-3, "atol": 1e-4}
BF16 = {"rtol": 2e-2, "atol": 4e-3}      # mixed-precision cases compute in bfloat16 (unit roundoff 2**-8):
                                         # the GPU's bf16 matmuls round differently from the CPU's


def _close(a, b, where: str, tol=FLOAT32) -> list[str]:
    """Where the GPU run's results (a) differ from the CPU run's (b): tensors to `tol`, the rest equal
    (floats are times and losses: not compared)."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        a, b = a.cpu(), b.cpu()                 # a rank's result may come back on its GPU
        if a.shape != b.shape or a.dtype != b.dtype:
            return [f"{where}: {a.dtype}{tuple(a.shape)} vs {b.dtype}{tuple(b.shape)}"]
        ok = torch.allclose(a.double(), b.double(), **tol) if a.is_floating_point() else torch.equal(a, b)
        return [] if ok else [f"{where}: differs by {(a.double() - b.double()).abs().max().item():.3g}"]
    if isinstance(a, dict) and isinstance(b, dict):
        return [m for k in a for m in _close(a[k], b.get(k), f"{where}.{k}", tol)]
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b):
        return [m for i, (x, y) in enumerate(zip(a, b)) for m in _close(x, y, f"{where}[{i}]", tol)]
    return []


def _differences(gpu: dict, cpu: dict, hw: str) -> list[str]:
    """Case by case on every rank (a probe's save: the case kinds, and each rank's results in that order)."""
    assert gpu["kinds"] == cpu["kinds"] and len(gpu["ranks"]) == len(cpu["ranks"]), (gpu["kinds"], cpu["kinds"])
    return [m for r, (on_gpu, on_cpu) in enumerate(zip(gpu["ranks"], cpu["ranks"]))
            for i, kind in enumerate(gpu["kinds"])
            for m in _close(on_gpu[i], on_cpu[i], f"{hw} rank {r} case {kind}", BF16 if "mixed" in kind else FLOAT32)]


@pytest.mark.gpu
@pytest.mark.parametrize("hw", HOMEWORKS)
def test_the_reference_runs_on_gpus_as_on_the_cpu(reference, hw, tmp_path):
    backend = "nccl" if torch.cuda.device_count() >= 2 else "gloo"       # nccl: one GPU per rank
    on_cpu = probe(reference, "--no-guard", "--device", "cpu", "--save", str(tmp_path / "cpu.pt"), hw)
    on_gpu = probe(reference, "--no-guard", "--backend", backend, "--device", "cuda", "--save",
                   str(tmp_path / "gpu.pt"), hw)
    assert on_cpu == {hw: None} and on_gpu == {hw: None}, (on_cpu, on_gpu)
    cpu, gpu = (torch.load(tmp_path / f"{d}.pt", weights_only=False)[hw] for d in ("cpu", "gpu"))
    differ = _differences(gpu, cpu, hw)
    assert not differ, "\n".join(differ[:20])

"""Which device a grading runs on (--device auto|cpu|cuda), and the GPU tests a CPU grading does not run.

    device = resolve_device("auto")          # "cuda" where torch sees a GPU, else "cpu"
    describe_device(device)                  # "cpu", "cuda (NVIDIA H100 80GB HBM3, 1 GPU)"
    to_run = set_aside_gpu_tests(tests, device)

Every test job gets MINITORCH_DIST_DEVICE=<device> (autograder.jobs), so launch() in the test and
its rank processes default to that device. A test marked `gpu` on a cpu grading is not run: it
stays in results.json as an entry of its own worth 0 of 0 points, named "not run: needs a GPU
(this grading ran on cpu)", neither passed nor failed, and adds nothing to the total's maximum.
A cuda grading gives each test CUDA_TIME_FACTOR times its wall limit (scale_limits).
"""

from __future__ import annotations

import ast
import importlib.util
import os
import sys

from autograder.results import GradedTest

CHOICES = ("auto", "cpu", "cuda")
CUDA_TIME_FACTOR = 2    # every rank starts a CUDA context and stages its messages through the host: on an
                        # H100, 2 ranks started in 4.0 s (0.1 s on the cpu), 8 in 7.4 s (0.4), and a 1 KB
                        # message took 380 us one way (72 us)


def resolve_device(choice: str = "auto") -> str:
    """"cpu" or "cuda" for --device `choice`; ValueError (before any grading) for cuda without a GPU."""
    if choice not in CHOICES:
        raise ValueError(f"--device {choice!r}: use one of {', '.join(CHOICES)}")
    if choice == "cpu" or (choice == "auto" and cpu_build_of_torch()):
        return "cpu"
    from minitorch_dist.runtime.devices import no_gpu_reason
    reason = no_gpu_reason()
    if choice == "auto":
        return "cpu" if reason is not None else "cuda"
    if reason is not None:
        raise ValueError(f"--device cuda, but {reason}. Grade on the CPU with --device cpu (tests marked gpu "
                         f"are then reported as not run), or on a machine with a GPU.")
    return "cuda"


def cpu_build_of_torch() -> bool:
    """Whether the installed torch was built without CUDA and ROCm, read from its version.py when torch
    is not imported yet: the grader's own process never needs torch, whose import costs it 1-2 s."""
    torch = sys.modules.get("torch")
    if torch is not None:
        return torch.version.cuda is None and torch.version.hip is None
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return False                               # let the full check say what is wrong
    try:
        tree = ast.parse(open(os.path.join(spec.submodule_search_locations[0], "version.py")).read())
    except (OSError, SyntaxError, ValueError):
        return False
    built = {}
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Constant):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Name):
                    built[target.id] = node.value.value
    return "cuda" in built and built["cuda"] is None and built.get("hip") is None


def describe_device(device: str) -> str:
    """What results.json and the table say the grading ran on: "cpu" or "cuda (<GPU name>, <n> GPU(s))"."""
    if device != "cuda":
        return device
    import torch
    count = torch.cuda.device_count()
    return f"cuda ({torch.cuda.get_device_name(0)}, {count} GPU{'s' if count != 1 else ''})"


def not_run_label(device: str) -> str:
    return f"not run: needs a GPU (this grading ran on {device})"


def set_aside_gpu_tests(tests: list[GradedTest], device: str) -> list[GradedTest]:
    """The tests to run on `device`; on a cpu grading, each gpu-marked test is marked not run instead
    (GradedTest.not_run: 0 of 0 points, its own labelled entry; see the module doc)."""
    if device == "cuda":
        return list(tests)
    to_run = []
    for t in tests:
        if t.needs_gpu:
            t.not_run = not_run_label(device)
            t.outcomes = {c: {"outcome": "not run", "message": t.not_run} for c in t.cases}
        else:
            to_run.append(t)
    return to_run


def scale_limits(tests: list[GradedTest], device: str) -> None:
    """Once per grading session, on the tests as collected: a cuda grading's wall limits are
    CUDA_TIME_FACTOR times the cpu ones (the time_limit markers and --limit are set for the cpu)."""
    if device == "cuda":
        for t in tests:
            t.limit *= CUDA_TIME_FACTOR

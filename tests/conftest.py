import os
import shutil
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def find_mpirun() -> str | None:
    """mpirun (or mpiexec) next to this Python (pip's mpich puts it there), else on PATH; None if none."""
    for name in ("mpirun", "mpiexec"):
        path = os.path.join(os.path.dirname(sys.executable), name)
        if os.path.exists(path):
            return path
    return shutil.which("mpirun") or shutil.which("mpiexec")


def live_children() -> list:
    """Child processes of this test process that are still running (zombies excluded)."""
    import psutil
    kids = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() != psutil.STATUS_ZOMBIE:
                kids.append(child)
        except psutil.NoSuchProcess:
            pass
    return kids


@pytest.fixture
def no_leftover_processes():
    """Start from no rank processes and assert none is left at the end."""
    from minitorch_dist import shutdown
    shutdown()
    yield
    import time
    deadline = time.monotonic() + 5
    while live_children() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert live_children() == [], f"processes left behind: {live_children()}"


QUICK_EXCLUDES = ("slow", "notebook", "gpu")


def pytest_collection_modifyitems(config, items):
    """The quick tier: every test not marked slow, notebook or gpu is also marked quick
    (`pytest -m quick`, the edit loop: every fast unit and a small real-process test of each
    subsystem, under 2 minutes on 2 cores, 78 s with -n 2). Tests marked gpu skip, with the reason, where torch
    has no CUDA GPU (CI, laptops)."""
    for item in items:
        if not any(item.get_closest_marker(name) for name in QUICK_EXCLUDES):
            item.add_marker(pytest.mark.quick)
    from minitorch_dist.runtime.devices import no_gpu_reason
    reason = no_gpu_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"gpu test: {reason}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)

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
    """Child processes of this test process that are still running (zombies excluded), but the
    gradings' zygote mothers (autograder.zygote_mother: one per test process, kept between gradings)."""
    import psutil
    mothers = sys.modules.get("autograder.zygote_mother")
    keep = mothers.pids() if mothers is not None else set()
    kids = []
    for child in psutil.Process().children(recursive=True):
        if child.pid in keep:
            continue
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
# The modules that take longest, longest first (seconds of the two workers' time in a clean-clone CI,
# 2026-11-27). pyproject.toml's addopts hand whole modules to the -n 2 workers (--dist loadscope: a
# module's shared fixtures, gradings and notebooks run once), one at a time as a worker frees up, in
# collection order (--no-loadscope-reorder); this order puts the longest first, so that neither worker
# is left with a long module while the other has nothing to do.
LONGEST_FIRST = (
    "tests/kit/test_autograder.py",             # 543 s: every homework's reference and stubs graded
    "tests/kit/test_mutants.py",                # 216 s
    "tests/kit/test_notebooks.py",              # 194 s
    "tests/kit/test_hostile_forging.py",        # 136 s
    "tests/kit/test_gradescope_homeworks.py",   # 95 s
    "tests/kit/test_hostile_traffic.py",        # 83 s
    "tests/kit/test_hostile_sandbox.py",        # 80 s
    "tests/kit/test_nbgrader_course.py",        # 68 s
    "tests/kit/test_hostile.py",                # 58 s
    "tests/kit/test_hostile_inputs_hw36.py",    # 57 s
    "tests/kit/test_hostile_inputs.py",         # 55 s
    "tests/runtime/test_mpi.py",                # 48 s
    "tests/runtime/test_launchers.py",          # 46 s
)

# Modules that share a session fixture too costly to build twice: one work unit, so one worker
# (test_release's release uses the lectures test_notebooks executes, about 60 s).
SAME_WORKER = {"tests/kit/test_release.py": "tests/kit/test_notebooks.py"}


@pytest.hookimpl(optionalhook=True)       # xdist's hook: gradings run these files' pytest without xdist
def pytest_xdist_make_scheduler(config, log):
    """With --dist loadscope (pyproject's addopts): a module is a work unit, SAME_WORKER's modules
    one unit with their partner's."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModuleUnits(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return SAME_WORKER.get(_module(nodeid), _module(nodeid))
    return ModuleUnits(config, log)


def _module(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(config, items):
    """The longest modules first (LONGEST_FIRST; the others after them, in their order), each module's
    tests together. The quick tier: every test not marked slow, notebook or gpu is also marked quick
    (`pytest -m quick`, the edit loop: every fast unit and a small real-process test of each
    subsystem, under 2 minutes on 2 cores, 94-107 s with -n 2). Tests marked gpu skip, with the reason, where torch
    has no CUDA GPU (CI, laptops)."""
    first = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: first.get(_module(item.nodeid), len(first)))
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


SLOW_SECONDS = 60.0


class SlowTestWarning(UserWarning):
    """A test took over SLOW_SECONDS (setup, call and teardown) and its docstring does not say why."""


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Adds up each test's setup, call and teardown time; past SLOW_SECONDS, a test whose docstring does
    not say why ("60 s" in it) gets a SlowTestWarning in the warnings summary (not a failure: these
    machines are shared, and a loaded one makes any test slow)."""
    outcome = yield
    item.stash[_SPENT] = item.stash.get(_SPENT, 0.0) + call.duration
    spent = item.stash[_SPENT]
    if call.when == "teardown" and spent > SLOW_SECONDS and outcome.get_result().passed:
        doc = getattr(getattr(item, "function", None), "__doc__", None) or ""
        if "60 s" not in doc:
            item.warn(SlowTestWarning(f"{item.nodeid} took {spent:.0f} s (setup, call and teardown), over "
                                      f"{SLOW_SECONDS:.0f} s: say why in its docstring (\"over 60 s: ...\")"))


_SPENT = pytest.StashKey[float]()

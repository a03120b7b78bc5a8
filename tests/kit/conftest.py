"""Fixtures the kit tests share: kit copies with the solutions or the stubs, and the lectures,
run once per test session.

Executing the six lectures, two at a time, costs about a minute of 2 cores. test_notebooks checks
what they print and draw; test_release ships the same executed notebooks instead of running
them again (tools.release.release(executed=...); run alone, the release runs them itself).
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pytest

from tests.conftest import live_children
from tools.overlay import ROOT, overlay


def notebook_env(base: dict) -> dict:
    """`base` with this interpreter's bin folder first on PATH (nbgrader runs `alembic` from it)."""
    env = dict(base)
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    env["MINITORCH_DIST_DEADLINE"] = "30"          # a broken run fails in seconds, not minutes
    return env


@pytest.fixture(scope="module", autouse=True)
def _shared_grading_sessions():
    """Close the grading sessions a module's tests shared (tests/kit/submissions.shared_session) after
    the module: the next module's checks of leftover child processes see none of their zygotes."""
    from tests.kit.submissions import close_sessions
    yield
    close_sessions()


@pytest.fixture(scope="module")
def reference():
    """A kit copy with every reference file laid over the stubs (deleted after the module)."""
    with overlay("solutions") as ov:
        assert not ov.missing, f"solutions/ lacks {ov.missing}"
        yield ov


@pytest.fixture(scope="module")
def stubs(tmp_path_factory):
    """A kit copy with nothing laid over it: the student's starting point (the generated stubs)."""
    with overlay(str(tmp_path_factory.mktemp("no-submission"))) as ov:
        yield ov


@pytest.fixture(scope="session")
def collected():
    """collected(hw) -> ([GradedTest], [problems]): the homework's tests as a grading collects them
    (autograder.collect.collect_here: the plugin in a plain pytest --collect-only, nothing run), once per
    homework for the whole test session (about 3 s each on 2 cores)."""
    from autograder.collect import collect_here
    cache: dict[str, tuple] = {}

    def get(hw: str) -> tuple:
        if hw not in cache:
            cache[hw] = collect_here(hw)
        return cache[hw]
    return get


def run_in(ov, *cmd: str, timeout: float = 180) -> tuple[int, str]:
    """Run a command in the kit copy `ov` (the repo's Python); return (exit code, stdout + stderr)."""
    proc = subprocess.run([*cmd], cwd=ov.root, env=ov.env(), capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout + proc.stderr


@dataclass
class ExecutedLectures:
    notebooks: dict = field(default_factory=dict)   # path relative to the kit -> executed notebook
    errors: dict = field(default_factory=dict)      # path -> what its execution raised
    leftover: list = field(default_factory=list)    # processes still alive after the runs


def lecture_paths() -> list[str]:
    """Every lecture notebook, relative to the kit (as tools.release finds them)."""
    return sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "lectures", "**", "*.ipynb"),
                                                              recursive=True))


# Notebooks executed at once: a kernel and the ranks it starts keep about one of the 2 cores busy, so
# two at a time take about 40% less wall time than one after the other.
CONCURRENT_NOTEBOOKS = 2


@pytest.fixture(scope="session")
def executed_lectures() -> ExecutedLectures:
    """Each lecture executed once under a real Jupyter kernel with the solutions laid over the kit,
    CONCURRENT_NOTEBOOKS at a time."""
    pytest.importorskip("nbclient")
    from minitorch_dist import shutdown
    from tools.release import execute_notebook

    shutdown()
    done = ExecutedLectures()
    with overlay("solutions") as ov:
        assert not ov.missing, f"solutions/ lacks {ov.missing}"
        with ThreadPoolExecutor(max_workers=CONCURRENT_NOTEBOOKS) as pool:
            runs = {rel: pool.submit(execute_notebook, os.path.join(ov.root, rel), notebook_env(ov.env()), 180)
                    for rel in lecture_paths()}
            for rel, run in runs.items():
                try:
                    done.notebooks[rel] = run.result()
                except Exception as exc:  # noqa: BLE001 - reported by the test of that lecture
                    done.errors[rel] = exc
    deadline = time.monotonic() + 5
    while live_children() and time.monotonic() < deadline:
        time.sleep(0.05)
    done.leftover = [str(p) for p in live_children()]
    return done

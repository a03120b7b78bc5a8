"""The quick tier (`pytest -m quick`, README): every test not marked slow, notebook or gpu, and among
them at least one real-process test of each subsystem, so the edit loop still runs ranks."""

import subprocess
import sys

import pytest

from tests.conftest import ROOT

# one small real-process test per subsystem that the quick tier must keep
REPRESENTATIVES = [
    "tests/runtime/test_gloo.py::",                                   # gloo ranks
    "tests/runtime/test_mpi.py::test_rank_that_exits_ends_the_job",   # ranks under mpirun
    "tests/runtime/test_sim.py::",                                    # the simulator
    "tests/runtime/test_launchers.py::test_torchrun",                 # torchrun
    "tests/runtime/test_launchers.py::test_srun_environment",         # SLURM's variables
    "tests/runtime/test_host.py::",                                   # the rank host
    "tests/kit/test_autograder.py::test_stubs_score_zero_with_not_implemented_feedback",   # a sandboxed grading
    "tests/kit/test_stubs_overlay.py::test_overlay_of_solutions_runs_the_real_functions_while_the_tree_keeps_stubs",
    "tests/kit/test_hw1_scripts.py::",                                # a homework script
    "tests/kit/test_submit.py::",                                     # the student's hand-in zip
]


def collect(*marker: str) -> list[str]:
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *marker],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode in (0, 5), proc.stdout[-2000:] + proc.stderr[-2000:]      # 5: none collected
    return [line for line in proc.stdout.splitlines() if "::" in line]


@pytest.mark.slow
def test_the_quick_tier_keeps_a_real_process_test_of_each_subsystem_and_no_slow_test():
    quick = collect("-m", "quick")
    assert len(quick) > 500
    slow = ("tests/kit/test_autograder.py::test_real_suites_", "tests/kit/test_notebooks.py::",
            "tests/kit/test_autograder.py::test_real_suites_solutions_full_marks_on_cuda")      # slow, notebook, gpu
    assert not [node for node in quick if node.startswith(slow)], "a slow, notebook or gpu test is in the quick tier"
    missing = [rep for rep in REPRESENTATIVES if not any(node.startswith(rep) for node in quick)]
    assert not missing, f"the quick tier lost these subsystems' tests: {missing}"


class _Call:
    def __init__(self, when: str, duration: float):
        self.when, self.duration = when, duration


class _Outcome:
    def get_result(self):
        return type("Report", (), {"passed": True})()


def _phases(doc: str | None, durations=(20.0, 30.0, 15.0)) -> list:
    """The warnings tests/conftest.py's report hook gives a test with this docstring and these setup,
    call and teardown times."""
    from tests import conftest

    def function():
        pass
    function.__doc__ = doc
    warned = []
    item = type("Item", (), {"nodeid": "tests/x.py::test_x", "function": function, "stash": pytest.Stash(),
                             "warn": lambda self, w: warned.append(w)})()
    for when, seconds in zip(("setup", "call", "teardown"), durations):
        hook = conftest.pytest_runtest_makereport(item, _Call(when, seconds))
        next(hook)
        with pytest.raises(StopIteration):
            hook.send(_Outcome())
    return warned


def test_a_test_over_60_s_must_say_why_in_its_docstring():
    warned = _phases("Checks a thing.")
    assert len(warned) == 1 and "tests/x.py::test_x took 65 s" in str(warned[0]), warned
    assert _phases("Over 60 s: it grades every homework.") == []
    assert _phases(None, (1.0, 2.0, 3.0)) == []          # a quick test: nothing to say

"""Sim and mpiexec cases count only beside the same task's passing cases on gloo (autograder/bindings.py).

The unit tests build GradedTests by hand; the grading test hands in hw1's reference naive all-reduce
made to fail everywhere but on sim (what skipping the messages and reading the other threads' values
would look like to the grader): before the binding it took the whole sim test.
"""

import os

import pytest

from autograder import bindings
from autograder.results import GradedTest
from tests.kit.submissions import by_name, insert_after_marker, make_submission, shared_session


def graded(function, cases, tasks, passed, bound_to=()):
    test = GradedTest(function=f"autograder/hwX/test_x.py::{function}", name=function, points=6.0, limit=60.0,
                      visibility="after_published", bound_to=tuple(bound_to))
    for case, task, ok in zip(cases, tasks, passed):
        nodeid = f"{test.function}[{case}]"
        test.cases.append(nodeid)
        test.case_tasks[nodeid] = task
        test.outcomes[nodeid] = {"outcome": "passed" if ok else "failed", "message": ""}
    return test


def outcomes(test):
    return [test.outcomes[c]["outcome"] for c in test.cases]


def test_a_sim_case_counts_only_where_its_tasks_real_process_cases_all_pass():
    real = graded("test_real", ["a1", "a2", "b1"], ["task9_1", "task9_1", "task9_2"], [True, True, False])
    sim = graded("test_on_sim", ["a", "b"], ["task9_1", "task9_2"], [True, True], bound_to=["test_real"])
    bindings.apply([real, sim])
    assert outcomes(sim) == ["passed", "failed"]
    message = sim.outcomes[sim.cases[1]]["message"]
    assert "1 case(s) of test_real did not pass" in message and "sim" in message
    assert outcomes(real) == ["passed", "passed", "failed"]            # the real-process test is left alone


def test_a_sim_case_whose_real_process_test_did_not_run_fails_and_selection_brings_it():
    real = graded("test_real", ["a1"], ["task9_1"], [True])
    sim = graded("test_on_sim", ["a"], ["task9_1"], [True], bound_to=["test_real"])
    bindings.apply([sim])
    assert outcomes(sim) == ["failed"] and "none of test_real ran" in sim.outcomes[sim.cases[0]]["message"]
    chosen = bindings.with_bound([sim], [real, sim])
    assert [t.function for t in chosen] == [sim.function, real.function] and chosen[1] is not real   # a copy
    assert bindings.with_bound([sim, real], [real, sim]) == [sim, real]


def test_a_case_without_a_task_rests_on_every_case_of_the_bound_tests():
    real = graded("test_real", ["a1", "b1"], ["task9_1", "task9_2"], [True, False])
    sim = graded("test_on_sim", ["x"], [None], [True], bound_to=["test_real"])
    bindings.apply([real, sim])
    assert outcomes(sim) == ["failed"]


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox's user layer needs root (CI runs as root)")
def test_an_all_reduce_right_only_on_sim_scores_nothing_there(tmp_path):
    """hw1's hidden test_naive_all_reduce_on_sim (8 cases), selected alone: the grading brings in
    test_naive_all_reduce (gloo, 8 cases), which the code fails, so the sim cases earn nothing."""
    only_on_sim = 'if group.backend != "sim":\n    raise RuntimeError("wrong on purpose")'
    sub = make_submission(tmp_path / "sim_only", {"all_reduce.py": insert_after_marker("1.4", only_on_sim)})
    results = shared_session("hw1", suites=None, jobs=2).grade(str(sub), only=r"test_naive_all_reduce_on_sim$",
                                                               show=False)
    tests = by_name(results)
    assert tests["test_naive_all_reduce"]["score"] == 0, tests["test_naive_all_reduce"]["output"][-2000:]
    sim = tests["test_naive_all_reduce_on_sim"]
    assert sim["score"] == 0 and "counts only when the same task passes on gloo" in sim["output"]
    assert "8 case(s) of test_naive_all_reduce did not pass" in sim["output"], sim["output"][-2000:]

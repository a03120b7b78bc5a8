"""The autograder's --device: the device a grading runs on, said in results.json and the total,
and the tests marked gpu reported as not run (0 of 0 points) on a cpu grading.

Graded against tests/kit/fixtures/suite/suite_gpu.py: one 2-point test that checks its ranks run on
the grading's device, and one 3-point test marked gpu.
"""

import json
import re
import subprocess
import sys

import pytest

from autograder import batch
from autograder.devices import CUDA_TIME_FACTOR, scale_limits, set_aside_gpu_tests
from autograder.results import GradedTest, results_json
from autograder.rubric import rubric_tests, task_totals
from autograder.session import GradingSession
from minitorch_dist.runtime.devices import no_gpu_reason
from tools.overlay import ROOT

GPU_SUITE = "tests/kit/fixtures/suite/suite_gpu.py"
NOT_RUN = "not run: needs a GPU (this grading ran on cpu)"
needs_no_gpu = pytest.mark.skipif(no_gpu_reason() is None, reason="checks a grading on a machine without a GPU")


def _grade(tmp_path, *flags):
    out = tmp_path / "results.json"
    proc = subprocess.run([sys.executable, "-m", "autograder.grade", "hw1", "solutions", "--out", str(out),
                           "--tests", GPU_SUITE, "--jobs", "2", *flags], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    return proc, (json.loads(out.read_text()) if out.exists() else None)


@needs_no_gpu
@pytest.mark.slow
def test_a_gpu_test_on_a_cpu_grading_is_not_run_and_weighs_nothing(tmp_path):
    proc, results = _grade(tmp_path)                       # --device auto: cpu here
    assert proc.returncode == 0, proc.stderr
    assert results["extra_data"]["device"] == "cpu"
    tests = {t["name"].split(": ", 1)[-1]: t for t in results["tests"][1:] if t["name"].startswith("HW1")}
    normal = tests["test_ranks_on_the_grading_device"]
    assert normal["status"] == "passed" and normal["score"] == normal["max_score"] == 2, normal
    gpu = tests[f"test_on_the_gpu [{NOT_RUN}]"]
    assert gpu["score"] == 0 and gpu["max_score"] == 0 and gpu.get("status") not in ("failed", "passed"), gpu
    assert "Not run: needs a GPU (this grading ran on cpu)" in gpu["output"] and "3 point(s)" in gpu["output"]
    assert results["score"] == 2 and sum(t["max_score"] for t in results["tests"]) == 2
    assert re.search(r"^TOTAL hw1 solutions: 2\.00 / 2 \(on cpu\)$", proc.stdout, re.M), proc.stdout
    assert re.search(r"TOTAL 2\.00 / 2 .*1 not run.*on cpu\)", proc.stdout), proc.stdout
    assert NOT_RUN in proc.stdout and "test_on_the_gpu" not in proc.stderr     # never started: no progress line


@needs_no_gpu
def test_device_cuda_without_a_gpu_is_a_clear_error_before_grading(tmp_path):
    proc, results = _grade(tmp_path, "--device", "cuda")
    assert proc.returncode == 2 and results is None, proc.stdout + proc.stderr
    assert "--device cuda, but" in proc.stderr and "--device cpu" in proc.stderr, proc.stderr
    assert no_gpu_reason() in proc.stderr and "Traceback" not in proc.stderr
    with pytest.raises(ValueError, match="--device cuda"):
        GradingSession("hw1", device="cuda")
    assert batch.main(["hw1", str(tmp_path), "--out", str(tmp_path / "out"), "--device", "cuda"]) == 2


def _test(name, points, gpu=False):
    return GradedTest(function=f"t.py::{name}", name=f"HW1 1.2 broadcast: {name}", points=points, limit=10,
                      visibility="after_published", cases=[f"t.py::{name}"],
                      case_tasks={f"t.py::{name}": "task1_2"}, needs_gpu=gpu)


def test_a_cuda_grading_gives_each_test_more_time():
    tests = [_test("test_cpu", 3), _test("test_gpu", 6, gpu=True)]
    scale_limits(tests, "cpu")
    assert [t.limit for t in tests] == [10, 10]
    scale_limits(tests, "cuda")
    assert CUDA_TIME_FACTOR > 1 and [t.limit for t in tests] == [10 * CUDA_TIME_FACTOR] * 2


def test_not_run_tests_count_in_no_total_task_or_rubric_entry():
    tests = [_test("test_cpu", 3), _test("test_gpu", 6, gpu=True)]
    assert set_aside_gpu_tests(tests, "cuda") == tests and not tests[1].not_run
    assert set_aside_gpu_tests(tests, "cpu") == [tests[0]] and tests[1].not_run == NOT_RUN
    tests[0].outcomes = {tests[0].cases[0]: {"outcome": "passed", "message": ""}}
    graded = rubric_tests(tests, {"name": "hw1", "tasks": {"1.2": "broadcast"}}, {"all_cases": True})
    entry = graded[-1]
    assert entry.name.endswith("every case of the task passes") and entry.points == 1 and entry.score == 1
    assert task_totals(graded) == {"1.2": {"score": 4.0, "max": 4.0}}
    results = results_json(graded, {"name": "submission check", "score": 0, "max_score": 0}, 1.0, "t", "cpu")
    assert results["score"] == 4 and sum(t["max_score"] for t in results["tests"]) == 4
    assert "TOTAL 4.00 / 4   (3 tests, 1 not run, 1.0 s, on cpu)" in results["tests"][1]["output"]


@pytest.mark.gpu
def test_a_cuda_grading_runs_the_gpu_test_for_its_points(tmp_path):
    proc, results = _grade(tmp_path, "--device", "cuda")
    assert proc.returncode == 0, proc.stderr
    assert results["extra_data"]["device"].startswith("cuda (") and results["score"] == 5, proc.stdout
    assert all(t.get("status") == "passed" for t in results["tests"]), proc.stdout


def test_the_graders_own_process_reads_the_torch_build_without_importing_torch():
    """resolve_device("auto") and the traffic layer's check leave torch unimported where its build has
    no CUDA (1-2 s a grading saves), and the build read from version.py is the one torch reports."""
    code = ("import sys; from autograder.devices import cpu_build_of_torch, resolve_device; "
            "from autograder.session import traffic_layer; read = cpu_build_of_torch(); "
            "device = resolve_device('auto'); traffic_layer(); imported = 'torch' in sys.modules; import torch; "
            "print(read, torch.version.cuda is None and torch.version.hip is None, device, imported)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    read, actual, device, imported = out.stdout.split()
    assert read == actual, out.stdout
    if read == "True":
        assert device == "cpu" and imported == "False", out.stdout

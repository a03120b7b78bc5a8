"""world_group(): a long-lived Group for a program that is already distributed, tested with a
program written as torch's tutorials write one (scripts/tutorial_job.py: mp.spawn +
init_process_group), in fresh processes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from minitorch_dist import LaunchError, world_group
from minitorch_dist.runtime.env import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "tests", "runtime", "scripts", "tutorial_job.py")


def _run(case: str) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    env["PYTHONPATH"] = ROOT
    proc = subprocess.run([sys.executable, SCRIPT, str(free_port()), case], capture_output=True, text=True,
                          timeout=120, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [line for line in proc.stdout.splitlines() if line.startswith("rank ")]


def test_a_tutorial_program_gets_a_group_uses_it_closes_it_and_opens_another():
    lines = _run("ok")
    assert sorted(lines) == [f"rank {r} ok ok" for r in range(3)]


@pytest.mark.slow
def test_launch_refuses_inside_a_torch_distributed_job_before_world_group():
    assert sorted(_run("refuse")) == ["rank 0 refuse ok", "rank 1 refuse ok"]


@pytest.mark.slow
def test_a_deadlock_on_an_attached_group_reports_both_ranks_blocked():
    lines = _run("deadlock")
    assert len(lines) == 2 and all(" deadlock ok " in line for line in lines)
    for line in lines:
        assert line.count("recv(") >= 2 or ("rank 0" in line and "rank 1" in line), line


@pytest.mark.slow
def test_a_rank_cut_off_by_its_peers_deadline_reports_the_deadlock_not_a_broken_connection():
    lines = sorted(_run("deadlock_cut"))
    assert len(lines) == 2 and all(" deadlock ok " in line for line in lines), lines
    assert "did not complete within its 3 s deadline" in lines[0]
    assert "rank 1 was cut off: another rank on the cycle reached its deadline" in lines[1]
    assert all("wait-for cycle: 0 -> 1 -> 0" in line for line in lines)


@pytest.mark.slow
def test_a_closed_group_shows_as_finished_in_its_peers_report():
    lines = _run("closed")
    assert len(lines) == 1 and lines[0].startswith("rank 0 closed ok")
    assert "rank 1" in lines[0]


def test_world_group_outside_any_job_says_how_to_start_one(monkeypatch):
    for var in ("RANK", "WORLD_SIZE", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(LaunchError, match="init_process_group.*torchrun.*launch"):
        world_group()

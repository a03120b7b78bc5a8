"""autograder.isolate.wait_limited: the job's end, its time limit and an abandoned grader, each
reported as such (the zygote waits on every graded test with it)."""

from __future__ import annotations

import os
import subprocess
import sys

import psutil

from autograder import isolate


def spawn(code: str) -> int:
    return subprocess.Popen([sys.executable, "-c", code]).pid


def test_an_ending_child_is_reported_with_its_code_and_memory():
    usage: dict = {}
    status, code, wall = isolate.wait_limited(spawn("import sys, time; time.sleep(0.2); sys.exit(3)"), 60, usage=usage)
    assert (status, code) == ("exited", 3) and 0.2 <= wall < 60 and usage["maxrss_kib"] > 0


def test_a_child_past_its_limit_is_killed_and_reaped():
    pid = spawn("import time; time.sleep(60)")
    status, code, wall = isolate.wait_limited(pid, 0.5)
    assert status == "timeout" and code is None and 0.5 <= wall < 30
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_an_abandoned_wait_kills_the_child_at_once():
    pid = spawn("import time; time.sleep(60)")
    asked = []
    status, _, wall = isolate.wait_limited(pid, 60, abandoned=lambda: asked.append(1) or len(asked) > 2)
    assert status == "abandoned" and len(asked) == 3 and wall < 30
    assert not psutil.pid_exists(pid)


def test_without_pidfds_it_polls(monkeypatch):
    monkeypatch.delattr(os, "pidfd_open")
    status, code, _ = isolate.wait_limited(spawn("pass"), 60)
    assert (status, code) == ("exited", 0)

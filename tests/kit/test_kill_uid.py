"""autograder.uids.kill_uid: every process of a sandbox uid dies, whatever they do meanwhile.

A test's end waits on it, so it kills what it lists through pidfds first (no fork of the large
zygote) and falls back to kill(-1) as the uid for what it missed: children forked meanwhile, up to
a fork bomb held only by its process limit. Root only (a uid of its own); skipped with the reason
elsewhere.
"""

from __future__ import annotations

import os
import resource
import sys
import time

import pytest

from autograder.uids import free_uid, kill_uid, processes_of, release_uid

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the processes run as a sandbox uid")

QUIET = "import time\nwhile True:\n    time.sleep(1)\n"
BOMB = ("import os, time\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n"
        "        time.sleep(0.001)\n")


def _start_as(uid: int, code: str, nproc: int = 64) -> int:
    """A process of `uid` running `code` (at most `nproc` processes for the uid); its pid."""
    pid = os.fork()
    if pid == 0:
        try:
            resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
            os.setsid()
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            os.execv(sys.executable, [sys.executable, "-c", code])
        finally:
            os._exit(127)
    return pid


def _wait_for(uid: int, count: int, within: float = 10.0) -> int:
    end = time.monotonic() + within
    while len(processes_of(uid)) < count and time.monotonic() < end:
        time.sleep(0.01)
    return len(processes_of(uid))


@pytest.mark.parametrize("code, count", [(QUIET, 3), (BOMB, 20)], ids=["quiet", "fork-bomb"])
def test_every_process_of_the_uid_is_killed(code, count):
    uid = free_uid(set())
    try:
        for _ in range(3 if code is QUIET else 1):
            _start_as(uid, code)
        assert _wait_for(uid, count) >= count, "the processes did not start"
        found = kill_uid(uid, wait=10.0)
        assert found >= count and processes_of(uid) == [], (found, processes_of(uid))
        time.sleep(0.1)
        assert processes_of(uid) == [], "a process of the uid came back"
    finally:
        kill_uid(uid)
        release_uid(uid)
        while True:                                  # our direct children, reaped
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break

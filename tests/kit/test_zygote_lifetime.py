"""A grader that is killed takes its zygote and the test the zygote runs along, at once.

The zygote (autograder.zygote) watches its grader while a test runs and, once orphaned, kills the
test's process tree and ends; the test process dies with the zygote (PR_SET_PDEATHSIG), and between
jobs the zygote ends at the end of its input. Before, a killed grader's zygote ran its test to the
end (up to the test's limit) with nobody to read the result.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from tools.overlay import ROOT

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux process control")

GRADER = textwrap.dedent('''
    import json, os, sys, time
    sys.path.insert(0, {root!r})
    from autograder.runner import ZygoteRunner
    runner = ZygoteRunner({root!r}, dict(os.environ, PYTHONPATH={root!r}))
    print(runner.proc.pid, flush=True)
    runner.run(["-q", "-s", "-p", "no:cacheprovider", {test!r}], {{}}, {out!r}, limit=120)
''')


def test_a_killed_grader_leaves_no_zygote_and_no_test_process(tmp_path):
    test = tmp_path / "test_sleeps.py"
    test.write_text("import os, time\n\ndef test_sleeps():\n    print('TEST', os.getpid(), flush=True)\n"
                    "    time.sleep(100)\n")
    out = tmp_path / "out.txt"
    code = GRADER.format(root=ROOT, test=str(test), out=str(out))
    grader = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=str(tmp_path))
    try:
        zygote = int(grader.stdout.readline())
        deadline = time.monotonic() + 120                       # the zygote imports torch, then forks the test
        while "TEST" not in (out.read_text() if out.exists() else ""):
            assert time.monotonic() < deadline and grader.poll() is None, "the test did not start"
            time.sleep(0.1)
        tested = int(out.read_text().split("TEST", 1)[1].split()[0])
        assert psutil.pid_exists(zygote) and psutil.pid_exists(tested)
        grader.send_signal(signal.SIGKILL)
        grader.wait()
        deadline = time.monotonic() + 10
        alive = [p for p in (zygote, tested) if _running(p)]
        while alive and time.monotonic() < deadline:
            time.sleep(0.1)
            alive = [p for p in (zygote, tested) if _running(p)]
        assert alive == [], f"still running 10 s after the grader was killed: {alive} (zygote {zygote}, test {tested})"
    finally:
        if grader.poll() is None:
            grader.kill()
        for pid in (locals().get("zygote"), locals().get("tested")):
            if pid and _running(pid):
                os.kill(pid, signal.SIGKILL)


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def test_close_ends_the_zygote_while_a_fork_of_the_grader_holds_its_input(tmp_path):
    """A process the grader forked after starting its zygote (a warm launch pool does) holds the write end
    of the zygote's input, so the end of input never comes: close() says "quit" first. Before, each
    session's close waited 10 s a zygote (60 s of the suite's teardowns)."""
    from autograder.runner import ZygoteRunner
    runner = ZygoteRunner(ROOT, dict(os.environ, PYTHONPATH=ROOT))
    zygote = runner.proc.pid
    holder = os.fork()
    if holder == 0:                                      # holds every descriptor the grader had, as a pool does
        time.sleep(60)
        os._exit(0)
    try:
        t0 = time.monotonic()
        runner.close()
        took = time.monotonic() - t0
        assert not _running(zygote) and took < 5, f"close took {took:.1f} s"
    finally:
        os.kill(holder, signal.SIGKILL)
        os.waitpid(holder, 0)

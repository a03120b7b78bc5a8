"""A stopped grader leaves nothing: SIGTERM closes its session, and the folders of a killed one are
removed by the next session (autograder/leftovers.py)."""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import psutil
import pytest

from autograder import leftovers
from tools.overlay import ROOT

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux process control")


def _session_of(pid: int, timeout: float = 120) -> dict:
    """The owner record of the grading session that process `pid` runs (once it has made its folders)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for path in glob.glob(os.path.join(tempfile.gettempdir(), "autograder-run-*", leftovers.OWNER)):
            try:
                with open(path) as f:
                    owner = json.load(f)
            except (OSError, ValueError):
                continue
            if owner["pid"] == pid:
                return dict(owner, records=os.path.dirname(path))
        time.sleep(0.05)
    raise AssertionError(f"grader {pid} made no session folders in {timeout} s")


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _fake_session(root, name: str, owner: dict) -> list[str]:
    folders = [os.path.join(root, f"autograder-{kind}-{name}") for kind in ("kit", "student")]
    records = os.path.join(root, f"autograder-run-{name}")
    for path in folders + [records]:
        os.makedirs(path)
        open(os.path.join(path, "f"), "w").close()
    with open(os.path.join(records, leftovers.OWNER), "w") as f:
        json.dump(dict(owner, folders=folders), f)
    return folders + [records]


def test_only_the_folders_of_a_dead_grader_are_swept(tmp_path):
    """A dead owner's three folders go; a live owner's, another pid namespace's, a record that does not
    parse and a folder that is not ours (a link) stay."""
    root = str(tmp_path)
    me = os.getpid()
    here = os.readlink("/proc/self/ns/pid")
    dead = _fake_session(root, "dead", {"pid": _dead_pid(), "start": "1", "pidns": here})
    live = _fake_session(root, "live", {"pid": me, "start": leftovers._start_time(me), "pidns": here})
    other_ns = _fake_session(root, "otherns", {"pid": _dead_pid(), "start": "1", "pidns": "pid:[1]"})
    broken = os.path.join(root, "autograder-run-broken")
    os.makedirs(broken)
    with open(os.path.join(broken, leftovers.OWNER), "w") as f:
        f.write("{not json")
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    link = os.path.join(root, "autograder-kit-link")
    os.symlink(outside, link)
    _fake_session(root, "linked", {"pid": _dead_pid(), "start": "1", "pidns": here})
    with open(os.path.join(root, "autograder-run-linked", leftovers.OWNER)) as f:
        owner = json.load(f)
    with open(os.path.join(root, "autograder-run-linked", leftovers.OWNER), "w") as f:
        json.dump(dict(owner, folders=[link]), f)

    removed = leftovers.sweep_dead(root)
    assert sorted(removed) == sorted(os.path.realpath(p) for p in dead + [os.path.join(root, "autograder-run-linked")])
    assert not any(os.path.exists(p) for p in dead)
    assert all(os.path.isdir(p) for p in live + other_ns + [broken]) and outside.is_dir() and os.path.islink(link)


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_a_stopped_grader_leaves_no_folder_and_no_process(how, tmp_path):
    """SIGTERM: the grader closes its session as on Ctrl-C (folders removed, zygote and tests gone, exit
    status of an interrupt). SIGKILL: its zygote dies with it, and the next session removes the folders."""
    grader = subprocess.Popen([sys.executable, "-m", "autograder.grade", "hw1", "solutions", "--only",
                               "test_fit_alpha_beta_exact_data", "--out", str(tmp_path / "r.json"), "--quiet"],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        owner = _session_of(grader.pid)
        kids = [p.pid for p in psutil.Process(grader.pid).children(recursive=True)]
        grader.send_signal(getattr(signal, how))
        out, _ = grader.communicate(timeout=60)
    finally:
        if grader.poll() is None:
            grader.kill()
    folders = owner["folders"] + [owner["records"]]
    if how == "SIGTERM":
        assert grader.returncode != 0 and "KeyboardInterrupt" in out, out[-2000:]
        assert not any(os.path.exists(p) for p in folders), [p for p in folders if os.path.exists(p)]
    else:
        assert all(os.path.exists(p) for p in folders)
        removed = leftovers.sweep_dead()
        assert set(map(os.path.realpath, folders)) <= set(removed), (folders, removed)
    end = time.monotonic() + 10
    while [k for k in kids if _running(k)] and time.monotonic() < end:
        time.sleep(0.05)
    assert not [k for k in kids if _running(k)], "the grader's zygote or tests outlived it"
    assert not os.path.exists(tmp_path / "r.json")


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def test_sigterm_interrupts_inside_the_block_and_the_handlers_are_put_back():
    """A main() called in-process (the kit's tests do) leaves this process's SIGTERM and SIGHUP as they were,
    also after the signal came (inside, the handler ignores a second one while the session closes)."""
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGHUP)}
    with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
        with leftovers.end_on_sigterm():
            assert signal.getsignal(signal.SIGTERM) is not before[signal.SIGTERM]
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)                               # the handler raises here, at once
    assert {sig: signal.getsignal(sig) for sig in before} == before

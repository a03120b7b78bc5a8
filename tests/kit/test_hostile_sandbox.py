"""Hostile submissions against the grader's own machinery: what the sandbox reports, sends and leaves.

Each class of attack that got through once (issue: "grading whose every number comes from outside
the student's reach"), written as a student would, graded on the fixture suite:

- the rank host made to report other processes' pids (a proxy where the test process finds it):
  the grader must never signal a pid it was told, only what it created;
- replies of hundreds of MiB: refused past a bound that the feedback names, the test process
  stays within its memory budget (measured by the kernel, outside the ranks);
- SysV IPC objects and /dev/shm files: nothing outlives the grading;
- the rank host's output file replaced by a link, a FIFO or /dev/zero: the grader reads only the
  file it created, so no secret reaches the feedback and nothing wedges;
- the parent-death signal survives the uid change;
- dozens of busy processes: a correct neighbour graded at the same time keeps full marks.

Each grading asserts its score, that results.json is written, and that nothing is left.
"""

import ctypes
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from autograder.uids import ipc_objects_of, release_uid, remove_ipc_of
from tests.kit.attacks import attack
from tests.kit.submissions import SUITE, by_name, insert_after_marker, make_submission, shared_session
from tests.kit.test_hostile import (NAMESPACES, all_outputs, correct_neighbour, hostile, run, sandbox_files,
                                    sandboxed_processes, uids_of)
from tools.overlay import ROOT

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox's user layer needs root (CI runs as root)")]
HIDDEN_TEXT = "A tiny graded suite for the autograder's own tests"       # the fixture suite's docstring


def check_nothing_left(results) -> None:
    uids = uids_of(results)
    assert sandboxed_processes(uids) == [], "sandboxed processes outlived the grading"
    assert sandbox_files(uids) == [], "sandboxed processes left files behind"
    assert all(ipc_objects_of(uid) == [] for uid in uids), [ipc_objects_of(uid) for uid in uids]


@pytest.mark.parametrize("namespaces", NAMESPACES)
def test_a_lying_rank_host_gets_no_process_killed_and_a_neighbour_keeps_its_marks(tmp_path, namespaces):
    """A proxy in place of the rank host would report the grader's pids (the zygote, the grading,
    a concurrent grading's tests): the socket is out of the sandbox's reach, and the test process
    never signals a reported pid anyway. The neighbour keeps 4/4, results.json is written."""
    sub = hostile(tmp_path, naive=attack("PROXY", ROOT), ring=attack("PROXY", ROOT), broadcast=attack("PROXY", ROOT))
    out = tmp_path / "results.json"
    with correct_neighbour(tmp_path, namespaces) as graded:
        results = run(sub, out=str(out), namespaces=namespaces)
        graded.append(results)
    assert json.loads(out.read_text())["score"] == 0 == results["score"]
    text = all_outputs(results)
    assert "ATTACK-DONE: PROXY" in text and "ATTACK-PROXIED" not in text, text[-3000:]
    check_nothing_left(results)


def test_the_grader_never_signals_a_pid_the_rank_host_reports(tmp_path):
    """The rank host, made to misbehave, reports a process of the grader's as a rank: the launch
    fails, and the process it named is still alive (no sandbox needed: this is the launcher's rule)."""
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    host_code = f"""
import sys
sys.path.insert(0, {ROOT!r})
from minitorch_dist.runtime.launching import host
_notify = host._Link.notify
def lying(self, msg):
    if msg[0] == "pids":
        msg = ("pids", [{victim.pid}] * len(msg[1]))
    _notify(self, msg)
host._Link.notify = lying
host.serve(sys.argv[1])
"""
    sock = str(tmp_path / "host.sock")
    host = subprocess.Popen([sys.executable, "-c", host_code, sock], cwd=ROOT, start_new_session=True)
    probe = f"""
import sys
from minitorch_dist import launch
def fn(group):
    if group.rank == 1:
        raise ValueError("rank 1 fails")
    return group.rank
try:
    launch(fn, 2, timeout=30)
except Exception as exc:
    print("RAISED", type(exc).__name__)
"""
    try:
        end = time.monotonic() + 30
        while not os.path.exists(sock) and time.monotonic() < end:
            time.sleep(0.05)
        done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120,
                              env=dict(os.environ, MINITORCH_DIST_RANK_HOST=sock))
        assert "RAISED RankError" in done.stdout, done.stdout + done.stderr
        assert victim.poll() is None, "the launcher killed a process the rank host reported"
    finally:
        for proc in (victim, host):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_huge_replies_are_refused_with_the_bound_and_the_test_process_stays_small(tmp_path):
    """The naive all-reduce grows x to 68 MiB on every rank (homework 1's real tests send x back):
    each reply is refused unread, the feedback names the bound, and the test process's peak memory
    (the kernel's count, taken outside the ranks) stays within the stated budget. Only the real
    test's p = 8 case runs: the most replies at once (every world size took over 30 s, to show the same)."""
    grow = "x.resize_(17 << 20).fill_(1.0)\nreturn x"                     # 68 MiB of float32: over the bound
    sub = make_submission(tmp_path / "huge", {"all_reduce.py": insert_after_marker("1.4", grow)})
    session = shared_session("hw1", suites=None)
    tests = session.select(": test_naive_all_reduce$")
    assert len(tests) == 1 and tests[0].cases[-1].endswith("[8]"), [t.cases for t in tests]
    tests[0].cases = tests[0].cases[-1:]
    results = session.grade(sub, out=str(tmp_path / "results.json"), tests=tests, show=False)
    test = by_name(results)["test_naive_all_reduce"]
    assert test["score"] == 0 and "MINITORCH_DIST_MAX_REPLY" in test["output"], test["output"][-1500:]
    memory = results["extra_data"]["test_process_memory_mib"]
    assert memory["peak"] < memory["budget"] == 512, memory
    assert json.loads((tmp_path / "results.json").read_text())["score"] == results["score"]
    check_nothing_left(results)


@pytest.mark.parametrize("namespaces", NAMESPACES)
def test_ipc_objects_and_links_in_place_of_the_host_output_leave_and_reveal_nothing(tmp_path, namespaces):
    """The naive all-reduce leaves SysV objects and a /dev/shm file; the ring replaces the rank host's
    output file by a link to a hidden test, a FIFO, /dev/zero: nothing outlives the grading, no
    secret reaches the feedback, nothing wedges (one grading for both, to keep CI short)."""
    sub = hostile(tmp_path, naive=attack("IPC", ROOT), ring=attack("HOSTOUT", ROOT))
    t0 = time.monotonic()
    results = run(sub, only="1.4|1.7", namespaces=namespaces)
    text = all_outputs(results) + json.dumps(results)
    assert results["score"] == 0 and "ATTACK-DONE: IPC" in text and "ATTACK-DONE: HOSTOUT" in text, text[-2000:]
    refused = re.search(r"ATTACK-IPC-MADE: shm -1\b", text)         # the isolation layer's seccomp filter
    assert "ATTACK-IPC-MADE: shm" in text, text[-2000:]
    assert bool(refused) == results["extra_data"]["sandbox"]["isolation"].startswith("active"), text[-2000:]
    assert results["extra_data"]["sandbox"]["ipc"].startswith("active" if namespaces else "unavailable")
    assert HIDDEN_TEXT not in text, "a hidden test file reached the feedback"
    assert "Internal grader error" not in text and time.monotonic() - t0 < 60, text[-2000:]
    assert "hostile host output" in by_name(results)["test_ring_sum"]["output"]     # its own output, still shown
    check_nothing_left(results)


def test_the_rank_host_dies_with_its_parent_after_the_uid_change(tmp_path):
    """PR_SET_PDEATHSIG is set after setresuid (which clears it): kill the parent, the host dies."""
    from autograder.sandbox import PR_GET_PDEATHSIG, Sandbox
    root = tempfile.mkdtemp(prefix="sandbox-pdeath-")          # a folder the uid can reach (not tmp_path)
    os.chmod(root, 0o755)
    box = Sandbox.create(ROOT, root, root, gid=None, taken=set())
    scratch = box.job_scratch("t")
    read, write = os.pipe()
    parent = os.fork()
    if parent == 0:                              # the stand-in zygote: forks the host, then waits
        host = os.fork()
        if host == 0:
            code = 3
            try:
                box.enter(scratch)
                sig = ctypes.c_int(0)
                ctypes.CDLL(None).prctl(PR_GET_PDEATHSIG, ctypes.byref(sig))
                os.write(write, f"{os.getpid()} {os.getuid()} {sig.value}\n".encode())
                time.sleep(60)
            finally:
                os._exit(code)
        time.sleep(60)
        os._exit(0)
    os.close(write)
    try:
        assert select.select([read], [], [], 30)[0], "the host did not enter the sandbox"
        host_pid, uid, sig = map(int, os.read(read, 100).split())
        assert uid == box.uid and sig == signal.SIGKILL, (uid, sig)
        os.kill(parent, signal.SIGKILL)
        os.waitpid(parent, 0)
        end = time.monotonic() + 5
        while os.path.exists(f"/proc/{host_pid}") and time.monotonic() < end:
            with open(f"/proc/{host_pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
            time.sleep(0.05)
        with open(f"/proc/{host_pid}/stat") if os.path.exists(f"/proc/{host_pid}") else open(os.devnull) as f:
            state = f.read().rsplit(")", 1)[1].split()[0] if f.name != os.devnull else "gone"
        assert state in ("Z", "gone"), f"the host outlived its parent (state {state})"
    finally:
        try:
            os.kill(parent, signal.SIGKILL)
            os.waitpid(parent, 0)
        except (OSError, ChildProcessError):
            pass
        box.kill_all()
        release_uid(box.uid)
        shutil.rmtree(root, ignore_errors=True)


def test_sysv_ipc_objects_of_a_uid_are_removed():
    """Without an IPC namespace (Docker): the uid's objects are found and removed after each test."""
    from autograder.uids import free_uid
    uid = free_uid(set())
    try:
        pid = os.fork()
        if pid == 0:
            code = 3
            try:
                os.setresuid(uid, uid, uid)
                libc = ctypes.CDLL(None)
                code = 0 if min(libc.shmget(0, 4096, 0o1600), libc.msgget(0, 0o1600), libc.semget(0, 2, 0o1600)) >= 0 else 4
            finally:
                os._exit(code)
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
        assert sorted(kind for kind, _ in ipc_objects_of(uid)) == ["msg", "sem", "shm"]
        assert len(remove_ipc_of(uid)) == 3 and ipc_objects_of(uid) == []
    finally:
        remove_ipc_of(uid)
        release_uid(uid)


def busy_processes_up(count: int, within: float = 120.0) -> None:
    """Wait until `count` processes of sandbox uids are running (their state R in /proc)."""
    from autograder.uids import UID_BASE, UID_SPAN
    end = time.monotonic() + within
    while time.monotonic() < end:
        running = 0
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                st = os.stat(f"/proc/{pid}")
                with open(f"/proc/{pid}/stat", "rb") as f:
                    state = f.read().rsplit(b")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            running += UID_BASE <= st.st_uid < UID_BASE + UID_SPAN and state == b"R"
        if running >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"{count} busy sandbox processes did not start within {within} s")


def test_busy_processes_leave_a_neighbour_its_share(tmp_path):
    """24 busy processes in one grading (for as long as its test lives): a correct submission graded
    beside it keeps full marks; each grading runs in its own CPU share (printed: the neighbour's
    time with and without the noise)."""
    cmd = [sys.executable, "-m", "autograder.grade", "hw1", "solutions", "--tests", SUITE[0][0], "--quiet"]
    t0 = time.monotonic()
    subprocess.run(cmd + ["--out", str(tmp_path / "alone.json")], cwd=ROOT, capture_output=True, timeout=600)
    alone = time.monotonic() - t0
    sub = hostile(tmp_path, naive=attack("BUSY", ROOT, ending="return x"))
    noisy = subprocess.Popen([sys.executable, "-m", "autograder.grade", "hw1", sub, "--tests", SUITE[0][0], "--quiet",
                              "--only", "1.4", "--out", str(tmp_path / "noisy.json")], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    busy_processes_up(24)
    t0 = time.monotonic()
    victim = subprocess.run(cmd + ["--out", str(tmp_path / "victim.json")], cwd=ROOT, capture_output=True, text=True,
                            timeout=600)
    beside = time.monotonic() - t0
    noisy.communicate(timeout=600)
    print(f"neighbour's grading: {alone:.1f} s alone, {beside:.1f} s beside 24 busy processes")
    assert "TOTAL hw1 solutions: 4.00 / 4" in victim.stdout, victim.stdout + victim.stderr
    results = json.loads((tmp_path / "noisy.json").read_text())
    assert results["score"] == 0 and "ATTACK-DONE: BUSY" in all_outputs(results)
    assert results["extra_data"]["sandbox"]["fair share"].startswith("active"), results["extra_data"]["sandbox"]
    check_nothing_left(results)

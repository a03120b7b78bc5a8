"""Hostile submissions: the autograder's score stays what the wrong code deserves, whatever it tries.

Each submission gives wrong answers (worth 0 points) after running an attack from attacks.py in
its ranks: forging records, patching checkers and comparison functions, editing the tests and the
kit, reading hidden tests and solutions, escaping the end-of-test kill to rewrite results.json,
sabotaging a concurrent grading, reaching the network, and exhausting memory, processes and disk.
Every test checks: the score, what the attack printed it achieved (ATTACK-<KIND> lines, and
ATTACK-DONE to prove it ran), that the kit is unchanged, and that no sandboxed process is left.
The attacks that namespaces could help against run twice: with a network namespace, and without
(as in a Docker container that refuses them), where every other layer must keep the score sound.
"""

import contextlib
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile

import psutil
import pytest

from autograder.uids import SHARED_FOLDERS, UID_BASE, UID_SPAN, free_uid, owner_uid, release_uid
from tests.kit.attacks import attack
from tests.kit.submissions import SUITE, by_name, insert_after_marker, make_submission, run
from tools.overlay import ROOT

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox's user layer needs root (CI runs as root)")]
NAMESPACES = [pytest.param(True, id="namespaces"), pytest.param(False, id="no-namespaces")]
SUCCESS = re.compile(r"ATTACK-(FORGED|SECRET|WROTE|READ|CONNECTED): .*")
WATCHED = ("autograder", "solutions", "assignments", "minitorch_dist", "tests", "tools")
SLEEPER = "hostile-escaped-sleeper"      # a line of the ESCAPE attack's sleeper (attacks.py)


def kit_digest() -> str:
    """A hash of every file of the kit the attacks aim at (what the grader must never let change)."""
    h = hashlib.sha256()
    for top in WATCHED:
        for folder, dirs, names in os.walk(os.path.join(ROOT, top)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(names):
                path = os.path.join(folder, name)
                h.update(path.encode())
                with open(path, "rb") as f:
                    h.update(f.read())
    return h.hexdigest()


def uids_of(*results) -> set[int]:
    """The sandbox uids the gradings used (other gradings may run on this machine at the same time)."""
    uids = {uid for r in results for uid in r["extra_data"]["sandbox_uids"]}
    assert uids and all(UID_BASE <= uid < UID_BASE + UID_SPAN for uid in uids), uids
    return uids


def sandboxed_processes(uids: set[int]) -> list[int]:
    """Live processes owned by one of `uids` (none may outlive a grading)."""
    found = []
    for d in os.listdir("/proc"):
        uid = owner_uid(int(d)) if d.isdigit() else None
        if uid in uids:
            try:
                with open(f"/proc/{d}/stat", "rb") as f:
                    if f.read().rsplit(b")", 1)[1].split()[0] != b"Z":
                        found.append(int(d))
            except OSError:
                pass
    return found


@contextlib.contextmanager
def correct_neighbour(tmp_path, namespaces: bool = True):
    """A correct submission (the reference, on the fixture suite) graded in a process of its own while
    the body grades a hostile one: it must keep 4 of 4, use no sandbox uid of the results the body
    appends to the yielded list, and leave no process behind."""
    cmd = [sys.executable, "-m", "autograder.grade", "hw1", "solutions", "--out", str(tmp_path / "neighbour.json"),
           "--tests", SUITE[0][0], "--quiet"] + ([] if namespaces else ["--no-namespaces"])
    neighbour = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    graded: list[dict] = []
    try:
        yield graded
        said, _ = neighbour.communicate(timeout=600)
    finally:
        if neighbour.poll() is None:
            neighbour.kill()
            neighbour.wait()
    assert "TOTAL hw1 solutions: 4.00 / 4" in said, said
    mine = json.loads((tmp_path / "neighbour.json").read_text())
    for results in graded:
        assert not uids_of(results) & uids_of(mine), "two gradings shared a sandbox uid"
    assert sandboxed_processes(uids_of(mine)) == [], "the neighbour's sandboxed processes outlived its grading"


def sandbox_files(uids: set[int]) -> list[str]:
    """Files one of `uids` left in the folders anyone may write (none may outlive a grading)."""
    found = []
    for top in SHARED_FOLDERS:
        for entry in os.scandir(top) if os.path.isdir(top) else []:
            try:
                if entry.stat(follow_symlinks=False).st_uid in uids:
                    found.append(entry.path)
            except OSError:
                pass
    return found


def test_a_sandbox_uid_is_held_by_one_grading_at_a_time():
    """Two gradings on one machine never share a uid, even while one has no process running."""
    uid = free_uid(set())
    probe = [sys.executable, "-c", f"from autograder.uids import lock_uid; print(lock_uid({uid}))"]
    try:
        assert subprocess.run(probe, cwd=ROOT, capture_output=True, text=True).stdout.strip() == "False"
    finally:
        release_uid(uid)
    assert subprocess.run(probe, cwd=ROOT, capture_output=True, text=True).stdout.strip() == "True"


def test_sandboxed_code_can_ask_for_its_user_name():
    """getpass.getuser() works in the sandbox although its uid has no passwd entry (torch's optimizers
    ask for it on CUDA: without USER, every training test of a cuda grading failed)."""
    import tempfile
    from autograder.sandbox import Sandbox
    root = tempfile.mkdtemp(prefix="sandbox-user-")
    os.chmod(root, 0o755)
    box = Sandbox.create(ROOT, root, root, gid=None, taken=set())
    try:
        scratch = box.job_scratch("t")
        pid = os.fork()
        if pid == 0:                                   # the child becomes the uid, as a test job does
            code = 3
            try:
                import getpass
                box.enter(scratch)
                code = 0 if os.getuid() == box.uid and getpass.getuser() == f"student{box.uid}" else 4
            finally:
                os._exit(code)
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    finally:
        release_uid(box.uid)
        shutil.rmtree(root, ignore_errors=True)


def hostile(tmp_path, **attacks_by_function) -> str:
    """A submission whose naive (1.4), ring (1.7) and broadcast (1.2) run the given attacks, then
    return x unchanged (wrong on every rank but by chance)."""
    regions = {"naive": ("all_reduce.py", "1.4"), "ring": ("all_reduce.py", "1.7"), "broadcast": ("tree.py", "1.2")}
    mutate: dict = {}
    for function, code in attacks_by_function.items():
        file, task = regions[function]
        step = insert_after_marker(task, code)
        before = mutate.get(file)
        mutate[file] = (lambda s, b=before, m=step: m(b(s) if b else s))
    return make_submission(tmp_path / "hostile", mutate)


def all_outputs(results) -> str:
    return "\n".join(t["output"] for t in results["tests"])


def check_sound(results, done: list[str], digest_before: str) -> None:
    """Nothing scored, every attack ran and achieved nothing, the kit is intact, nobody is left."""
    text = all_outputs(results)
    assert results["score"] == 0, [(t["name"], t["score"]) for t in results["tests"]]
    for name in done:
        assert f"ATTACK-DONE: {name}" in text, f"the {name} attack did not run or its output was lost:\n{text[-3000:]}"
    assert not SUCCESS.findall(text), SUCCESS.findall(text)[:10]
    assert kit_digest() == digest_before, "the kit was changed during the grading"
    assert sandboxed_processes(uids_of(results)) == [], "sandboxed processes outlived the grading"
    assert sandbox_files(uids_of(results)) == [], "sandboxed processes left files behind"
    layers = results["extra_data"]["sandbox"]
    assert layers["user"].startswith("active") and layers["processes"].startswith("active"), layers


@pytest.mark.parametrize("namespaces", NAMESPACES)
def test_forging_patching_editing_and_reading_score_nothing(tmp_path, namespaces):
    digest = kit_digest()
    sub = hostile(tmp_path, naive=attack("FORGE", ROOT), ring=attack("EDIT", ROOT), broadcast=attack("READ", ROOT))
    out = tmp_path / "results.json"
    results = run(sub, out=str(out), namespaces=namespaces)
    check_sound(results, ["FORGE", "EDIT", "READ"], digest)
    assert json.loads(out.read_text())["score"] == 0
    assert results["extra_data"]["sandbox"]["network"].startswith("active" if namespaces else "unavailable")
    scan = results["extra_data"]["static_scan"]                             # for instructors only
    assert "sys.modules" in scan and "torch.equal" in scan and "/proc" in scan, scan
    for name in ("test_naive_sum", "test_ring_sum", "test_broadcast"):      # hidden: not in the top-level table
        assert name not in results["output"]
        assert by_name(results)[name]["visibility"] == "after_published"


@pytest.mark.parametrize("namespaces", NAMESPACES)
def test_an_escaped_process_cannot_rewrite_results_later(tmp_path, namespaces):
    digest = kit_digest()
    out = tmp_path / "results.json"
    results = run(hostile(tmp_path, naive=attack("ESCAPE", ROOT)), only="1.4", out=str(out), namespaces=namespaces)
    assert "ATTACK-SPAWNED" in all_outputs(results)
    if results["extra_data"]["sandbox"]["isolation"].startswith("active"):      # a rank writes only its own folder
        assert "ATTACK-LITTERED" not in all_outputs(results)
    else:                                        # litter in /tmp, removed after the test (sandbox_files below)
        assert "ATTACK-LITTERED: /tmp" in all_outputs(results)
    # The sleeper would wake 4 s after its start to rewrite every results file and kill every process:
    # only a process that outlived the grading could, and none did (by its uid in check_sound, by its
    # own line in any process's command line here), so nothing waits for it to wake.
    check_sound(results, ["ESCAPE"], digest)
    alive = [p.pid for p in psutil.process_iter(["cmdline"]) if any(SLEEPER in a for a in p.info["cmdline"] or ())]
    assert not alive, f"the escaped sleeper outlived the grading: pids {alive}"
    assert json.loads(out.read_text())["score"] == 0


@pytest.mark.parametrize("namespaces", NAMESPACES)
def test_the_network_beyond_the_sandbox_is_out_of_reach(tmp_path, namespaces):
    digest = kit_digest()
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(0)
        port = server.getsockname()[1]
        results = run(hostile(tmp_path, naive=attack("NETWORK", ROOT, port)), only="1.4", namespaces=namespaces)
        try:
            server.accept()
            reached = True
        except BlockingIOError:
            reached = False
    text = all_outputs(results)
    if namespaces:
        check_sound(results, ["NETWORK"], digest)
        assert not reached
    else:          # without a namespace the grader's own loopback is reachable: said, and the score holds
        assert results["score"] == 0 and "ATTACK-DONE: NETWORK" in text
        assert results["extra_data"]["sandbox"]["network"].startswith("unavailable")
        assert sandboxed_processes(uids_of(results)) == []


def test_memory_processes_and_disk_hit_limits_with_a_clear_message(tmp_path):
    digest = kit_digest()
    sub = hostile(tmp_path, naive=attack("MEMORY", ROOT), ring=attack("PROCESSES", ROOT), broadcast=attack("DISK", ROOT))
    # 512 processes, not 2048: each fork copies a torch process's page tables (2048 of them took 28 s of
    # system time alone here, and more than the case's limit in a loaded CI run)
    results = run(sub, limit=60, limits={"RLIMIT_NPROC": 512})
    tests = by_name(results)
    assert results["score"] == 0
    for name in ("test_naive_sum", "test_ring_sum", "test_broadcast"):
        assert "limit of the grading sandbox" in tests[name]["output"], tests[name]["output"][-2000:]
    assert "memory: 6 GiB per process" in tests["test_naive_sum"]["output"]
    assert "file size: 256 MiB" in tests["test_broadcast"]["output"]
    assert kit_digest() == digest and sandboxed_processes(uids_of(results)) == []


def test_cpu_time_and_open_files_hit_limits_with_a_clear_message(tmp_path):
    """A spinning rank dies of SIGXCPU at the CPU limit (3 s here, 600 s by default), well before
    the wall clock; a rank that opens files without end gets EMFILE; both say which limit."""
    sub = hostile(tmp_path, naive=attack("SPIN", ROOT), broadcast=attack("FILES", ROOT))
    results = run(sub, only="1.4|1.2", limits={"RLIMIT_CPU": 3}, limit=60)
    tests = by_name(results)
    assert results["score"] == 0
    assert "SIGXCPU" in tests["test_naive_sum"]["output"] and "CPU time: 3 s per process" in tests["test_naive_sum"]["output"]
    assert "Timed out" not in tests["test_naive_sum"]["output"]
    assert "open files: 4096 per process" in tests["test_broadcast"]["output"], tests["test_broadcast"]["output"][-1500:]
    assert sandboxed_processes(uids_of(results)) == []


def test_an_output_flood_is_cut_and_said(tmp_path):
    """64 MiB printed on each of 3 ranks: the test process prints 8 MiB of it, says so, and the
    feedback holds the tail of that."""
    results = run(hostile(tmp_path, naive=attack("OUTPUT", ROOT)), only="1.4")
    naive = by_name(results)["test_naive_sum"]
    assert results["score"] == 0 and "output of the ranks cut at 8 MiB" in naive["output"], naive["output"][-500:]
    assert len(naive["output"]) < 20_000
    assert sandboxed_processes(uids_of(results)) == []


def test_a_concurrent_grading_cannot_be_sabotaged(tmp_path):
    """A correct submission graded beside a hostile one (on the same machine, at the same time)
    keeps full marks; the hostile one tries to edit every kit copy and to reach every open port, in
    every case, for up to 10 s each, until the neighbour's grading is over (a file it can see says so)."""
    signal_dir = tempfile.mkdtemp(prefix="neighbour-")
    os.chmod(signal_dir, 0o755)
    done = os.path.join(signal_dir, "done")
    sabotage = attack("SABOTAGE", ROOT, stop=done)
    sub = hostile(tmp_path, naive=sabotage, ring=sabotage, broadcast=sabotage)
    cmd = [sys.executable, "-m", "autograder.grade", "hw1"]
    tail = ["--tests", SUITE[0][0], "--quiet"]
    victim = subprocess.Popen(cmd + ["solutions", "--out", str(tmp_path / "victim.json")] + tail, cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    attacker = subprocess.Popen(cmd + [sub, "--out", str(tmp_path / "attacker.json")] + tail, cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        victim_out, _ = victim.communicate(timeout=600)
        open(done, "w").close()
        attacker_out, _ = attacker.communicate(timeout=600)
    finally:
        shutil.rmtree(signal_dir, ignore_errors=True)
    assert "TOTAL hw1 solutions: 4.00 / 4" in victim_out, victim_out
    results = json.loads((tmp_path / "attacker.json").read_text())
    victim_results = json.loads((tmp_path / "victim.json").read_text())
    assert results["score"] == 0
    assert "ATTACK-DONE: SABOTAGE" in all_outputs(results), all_outputs(results)[-2000:]
    assert not SUCCESS.findall(all_outputs(results))
    assert sandboxed_processes(uids_of(results, victim_results)) == []
    assert not uids_of(results) & uids_of(victim_results), "two gradings shared a sandbox uid"


def test_the_attacks_reach_their_targets_without_the_sandbox(tmp_path):
    """The control: with the sandbox off (the rank host runs as the grader's user) the same
    attacks do read the solutions and find writable kit files, so the checks above can fail."""
    sub = hostile(tmp_path, naive=attack("FORGE", ROOT), ring=attack("EDIT", ROOT), broadcast=attack("READ", ROOT))
    results = run(sub, sandbox=False)
    text = all_outputs(results)
    if os.path.exists("/etc/shadow"):                  # some CI containers have none
        assert "ATTACK-READ: /etc/shadow" in text, text[-3000:]
    assert {"READ", "WROTE", "FORGED"} <= set(SUCCESS.findall(text)), text[-3000:]
    assert results["score"] == 0 and results["extra_data"]["sandbox"]["user"].startswith("unavailable")

"""A real SLURM on the emulated cluster (Debian's slurm-wlm and munge): munged and slurmctld on
node0, a slurmd per node with the node's hostname as NodeName; the shipped job scripts run as
written: examples/cluster/slurm_job.sh (srun with the kit's gloo launch, then srun --mpi=pmi2 with
the kit's mpi backend, across 2 nodes) and examples/cluster/batch_array.sh (autograder.batch as a
job array, one task a node, merged into one gradebook); `down` leaves nothing. One cluster serves
the module (starting SLURM takes about 3 s). Skips with the reason without root, namespaces, or
slurm-wlm and munge (`bash scripts/setup.sh --cluster` installs them)."""

import csv
import glob
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from minitorch_dist.cluster import __main__ as cli
from minitorch_dist.cluster import slurm
from minitorch_dist.cluster import state as state_mod
from minitorch_dist.cluster.nodes import leftovers, teardown
from minitorch_dist.runtime.env import detect_external, slurm_hostnames
from tests.cluster.conftest import cluster_reason, host_links

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# where a system-wide SLURM or munge would write: an emulated cluster must write none of it
SYSTEM_PATHS = ("/etc/slurm", "/etc/munge", "/var/spool/slurmd", "/var/spool/slurmctld", "/var/lib/slurm",
                "/var/log/slurm", "/run/munge", "/var/lib/munge", "/var/log/munge", "/run/slurm")


def _system_files() -> set:
    return {os.path.join(d, f) for p in SYSTEM_PATHS for d, _, fs in os.walk(p) for f in fs} | \
           {p for p in SYSTEM_PATHS if os.path.exists(p)}


def _command_lines() -> dict:
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                found[int(pid)] = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            pass
    return found


def _daemons_of(st) -> list:
    """Running SLURM or munge processes whose command line names this cluster's folder."""
    return [f"{pid} {cmd}" for pid, cmd in _command_lines().items()
            if slurm.folder(st) in cmd and any(d in cmd for d in slurm.DAEMONS)]


# --- no machine needed ---------------------------------------------------------------------------

def test_the_configuration_names_every_node_and_lives_in_the_cluster_folder():
    st = state_mod.plan("mtdconf", 3, None, None, 2)
    text = slurm.slurm_conf(st)
    assert "SlurmctldHost=node0(10.231.0.1)" in text
    for i in range(3):
        assert f"NodeName=node{i} NodeAddr=10.231.0.{i + 1} NodeHostname=node{i} CPUs=2 " in text
    paths = [w.rsplit("=", 1)[1] for w in text.split() if "=/" in w]
    assert paths and all(p.startswith(slurm.folder(st)) for p in paths), paths
    assert "MpiDefault=none" in text and "auth/munge" in text


def test_without_slurm_installed_the_error_says_how_to_install_it(monkeypatch, capsys):
    with monkeypatch.context() as m:
        m.setattr(shutil, "which", lambda name: None)
        m.setattr(os.path, "exists", lambda path: False)
        reason = slurm.unavailable_reason()
    assert "slurmctld" in reason and "setup.sh --cluster" in reason and "apt-get install slurm-wlm munge" in reason
    # `up --slurm` says so before it makes anything (on a machine able to host the nodes)
    monkeypatch.setattr(cli.preflight, "require", lambda bits=None: None)
    monkeypatch.setattr(slurm, "unavailable_reason", lambda: reason)
    name = f"mtdnoslurm{os.getpid() % 100000}"
    assert cli.main(["--name", name, "up", "--nodes", "2", "--slurm"]) == 2
    assert "setup.sh --cluster" in capsys.readouterr().err
    assert state_mod.load(name) is None and not os.path.exists(state_mod.folder(name))


def test_host_lists_expand_as_scontrol_does():
    assert slurm_hostnames("node[0-1]") == ["node0", "node1"]
    assert slurm_hostnames("node[01-03,7],gpu5") == ["node01", "node02", "node03", "node7", "gpu5"]
    assert slurm_hostnames("n[08-10]") == ["n08", "n09", "n10"]
    assert slurm_hostnames("r[1-2]n[3-4]") == ["r1n3", "r1n4", "r2n3", "r2n4"]
    assert slurm_hostnames("node1") == ["node1"] and slurm_hostnames("") == []


SRUN_STEP = {"SLURM_STEP_ID": "0", "SLURM_PROCID": "1", "SLURM_STEP_NUM_TASKS": "2", "SLURM_JOB_ID": "7",
             "SLURM_JOB_NODELIST": "node[0-1]"}


def test_srun_takes_rank_0s_host_from_master_addr_else_the_steps_first_node(monkeypatch):
    for var in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_RANK",
                "PMIX_RANK", "MPI_LOCALRANKID", "SLURM_NNODES", "SLURM_JOB_NUM_NODES"):
        monkeypatch.delenv(var, raising=False)
    for var, value in SRUN_STEP.items():
        monkeypatch.setenv(var, value)
    monkeypatch.setenv("SLURM_STEP_NODELIST", "node[0-1]")
    monkeypatch.setenv("SLURM_STEP_NUM_NODES", "2")
    job = detect_external()
    assert (job.launcher, job.rank, job.world_size, job.master_addr) == ("srun", 1, 2, "node0")
    monkeypatch.setenv("MASTER_ADDR", "10.231.0.1")                       # the README's recipe, as an address
    assert detect_external().master_addr == "10.231.0.1"
    # a step on node1 alone, in a job that begins at node0: rank 0 runs on node1
    monkeypatch.setenv("SLURM_STEP_NODELIST", "node1")
    monkeypatch.setenv("SLURM_STEP_NUM_NODES", "1")
    monkeypatch.delenv("MASTER_ADDR")
    assert detect_external().master_addr == "127.0.0.1"
    monkeypatch.setenv("MASTER_ADDR", "node0")                            # the job's first node: not in this step
    with pytest.raises(RuntimeError, match="not of this job step.*SLURM_STEP_NODELIST"):
        detect_external()


# --- on the machine (root, namespaces, slurm-wlm, munge) -----------------------------------------

@pytest.fixture(scope="module")
def slurm_cluster():
    reason = cluster_reason() or slurm.unavailable_reason()
    if reason is not None:
        pytest.skip(f"SLURM on the emulated cluster unavailable here: {reason}")
    system_before, links_before = _system_files(), host_links()
    name = f"mtds{os.getpid() % 100000}"
    st = state_mod.plan(name, 2, None, None, 1)
    try:
        t0 = time.monotonic()
        assert cli.main(["--name", name, "up", "--nodes", "2", "--slurm"]) == 0      # as a user types it
        st = state_mod.load(name)
        print(f"up --slurm in {time.monotonic() - t0:.1f} s")
        assert st.slurm and os.path.exists(slurm.conf_path(st))
        yield st
    finally:
        teardown(name)
    assert leftovers(name) == [] and _daemons_of(st) == []
    assert _system_files() == system_before and host_links() == links_before


def _tx_bytes(st, node) -> int:
    out = subprocess.run(["ip", "-n", st.node(node).netns, "-j", "-s", "link", "show", "eth0"],
                         capture_output=True, text=True).stdout
    return json.loads(out)[0]["stats64"]["tx"]["bytes"]


def _wait_job(st, job: str, timeout: float = 120) -> str:
    """The job's final state (polls scontrol every 0.3 s: sbatch --wait polls every 2-10 s)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = slurm.client(st, ["scontrol", "show", "job", "-o", job]).stdout
        fields = dict(w.split("=", 1) for w in out.split() if "=" in w)
        if fields.get("JobState") not in (None, "PENDING", "RUNNING", "CONFIGURING", "COMPLETING"):
            return fields["JobState"]
        time.sleep(0.3)
    slurm.client(st, ["scancel", job])
    raise AssertionError(f"job {job} still {fields.get('JobState')} after {timeout} s")


@pytest.mark.slow
def test_the_nodes_register_under_their_hostnames_and_srun_reaches_both(slurm_cluster):
    st = slurm_cluster
    assert slurm.node_states(st) == {"node0": "idle", "node1": "idle"}
    done = slurm.client(st, ["srun", "--nodes=2", "--ntasks-per-node=1", "hostname"])
    assert done.returncode == 0 and sorted(done.stdout.split()) == ["node0", "node1"], done.stderr
    assert len(_daemons_of(st)) == 4          # munged, slurmctld, 2 slurmd (and slurmctld's slurmscriptd)


@pytest.mark.slow
def test_sbatch_across_two_nodes_srun_gloo_and_pmi2_mpi(slurm_cluster, tmp_path):
    st = slurm_cluster
    sent = _tx_bytes(st, "node1")
    t0 = time.monotonic()
    done = slurm.client(st, ["sbatch", "--parsable", f"--output={tmp_path}/job-%j.out", "examples/cluster/slurm_job.sh"],
                        cwd=ROOT, env={"PYTHON": sys.executable})
    assert done.returncode == 0, done.stderr
    job = done.stdout.strip()
    state = _wait_job(st, job)
    text = open(f"{tmp_path}/job-{job}.out").read()
    print(f"job {job}: {state} in {time.monotonic() - t0:.1f} s")
    assert state == "COMPLETED", text[-3000:]
    results = [json.loads(l.split("CLUSTER-RESULT ", 1)[1]) for l in text.splitlines() if "CLUSTER-RESULT " in l]
    assert [r["backend"] for r in results] == ["gloo", "mpi"], text[-3000:]
    assert "MASTER_ADDR=node0" in text                   # from the job's node list (scontrol show hostnames)
    # names resolve from the node's hosts file only: no DNS lookup fails as 'temporary' (torch warned)
    assert "hostname of the client socket cannot be retrieved" not in text
    for r in results:
        assert r["world_size"] == 2 and r["hosts"] == ["node0", "node1"]
        assert [v["hostname"] for v in r["ranks"]] == ["node0", "node1"]
        assert [v["address"] for v in r["ranks"]] == ["10.231.0.1", "10.231.0.2"]
        assert all(v["sum"] == 1.0 and v["all_equal"] and v["torch_sum"] == 1.0 for v in r["ranks"])
    # each step's all-reduce (256 KB a rank) crossed node1's link, the mpi one too (UCX held to TCP)
    assert _tx_bytes(st, "node1") - sent > 2 * 200_000


def _submissions(folder, students) -> str:
    from tools.overlay import homework_manifest
    for student in students:
        os.makedirs(os.path.join(folder, student))
        for rel in homework_manifest("hw3")["editable"]:
            shutil.copy(os.path.join(ROOT, "solutions", rel), os.path.join(folder, student))
    return str(folder)


@pytest.mark.slow
def test_autograder_batch_as_a_job_array_over_the_nodes_merged_into_one_gradebook(slurm_cluster, tmp_path):
    st = slurm_cluster
    export, out = _submissions(tmp_path / "export", ["alice", "bob"]), str(tmp_path / "grades")
    t0 = time.monotonic()
    done = slurm.client(st, ["bash", "examples/cluster/batch_array.sh", "hw3", export, out,
                             "--only", "bad_input_raises|bad_k_raises"], cwd=ROOT, timeout=240,
                        env={"PYTHON": sys.executable})
    text = done.stdout + done.stderr
    print(f"array and merge: {time.monotonic() - t0:.1f} s; " + " | ".join(l for l in text.splitlines() if "batch:" in l))
    assert done.returncode == 0, text[-3000:]
    # one array task a node, each grading its share (one student); the merge wrote the gradebook
    tasks = sorted(line.split("] ", 1)[1] for line in text.splitlines() if "] array task" in line)
    assert tasks == ["array task 0 of 2 on node0", "array task 1 of 2 on node1"], text[-3000:]
    shares = [line for line in text.splitlines() if "] [1/1] " in line]
    assert len(shares) == 2 and any("alice" in s for s in shares) and any("bob" in s for s in shares), text
    assert "merge on node" in text and f"gradebook: {out}/gradebook.csv" in text
    # the merge grades nothing again: every share is resumed (unless another session edited the kit
    # in between, which the resume key sees; then it regrades, correctly)
    assert "2 of 2 already graded" in text or "the kit changed" in text, text[-3000:]
    rows = {r["student"]: r for r in csv.DictReader(open(os.path.join(out, "gradebook.csv")))}
    assert set(rows) == {"alice", "bob"} and all(float(r["code"]) == float(r["code_max"]) > 0 for r in rows.values())
    hosts = {json.load(open(p))["extra_data"]["batch"]["student"] for p in glob.glob(f"{out}/*/results.json")}
    assert hosts == {"alice", "bob"}


@pytest.mark.slow
def test_down_ends_every_daemon_and_job_and_leaves_nothing_also_after_a_crash(slurm_cluster):
    st = slurm_cluster
    job = slurm.client(st, ["sbatch", "--parsable", "--output=/dev/null", "--nodes=2", "--wrap",
                            "srun sleep 317"]).stdout.strip()
    deadline = time.monotonic() + 60                          # slurmctld schedules it within seconds, unless loaded
    while "RUNNING" not in slurm.client(st, ["scontrol", "show", "job", "-o", job]).stdout:
        assert time.monotonic() < deadline, f"job {job} did not start"
        time.sleep(0.2)
    assert _daemons_of(st)
    os.remove(os.path.join(st.folder, "state.json"))          # a crash: no record, daemons and a job running
    t0 = time.monotonic()
    removed = teardown(st.name)
    print(f"down: {time.monotonic() - t0:.1f} s, {len(removed)} things")
    assert f"folder {st.folder}" in removed
    left = leftovers(st.name)
    assert left == [] and _daemons_of(st) == [], [(x, _command_lines().get(int(x.split()[1]))) for x in left
                                                   if x.startswith("process")]
    assert not [cmd for cmd in _command_lines().values() if "sleep 317" in cmd]

"""The emulated cluster (minitorch_dist.cluster): nodes with their own hostnames and addresses,
shaped links, nothing left after down, and the kit under the real launchers (torchrun, mpirun)
across node boundaries. Needs root on Linux (skips with the reason elsewhere)."""

import json
import os
import subprocess
import sys
import time

import pytest

from minitorch_dist.cluster import __main__ as cli
from minitorch_dist.cluster import launchers, measure, preflight, shaping
from minitorch_dist.cluster import state as state_mod
from minitorch_dist.cluster.nodes import bring_up, leftovers, node_argv, teardown

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "cluster", "hostnames.py")


def on(st, node, *argv, **kw):
    return subprocess.run(node_argv(st, node, list(argv)), capture_output=True, text=True, timeout=30, **kw)


# --- no machine needed ---------------------------------------------------------------------------

def test_rates_parse_as_tc_writes_them():
    assert shaping.parse_rate("1gbit") == 1e9
    assert shaping.parse_rate("100mbit") == 1e8
    assert shaping.parse_rate("2.5Gbit") == 2.5e9
    assert shaping.parse_rate(None) is None and shaping.parse_rate("unshaped") is None
    for bad in ("1gb", "fast", "1gbps", "10bit"):
        with pytest.raises(ValueError):
            shaping.parse_rate(bad)
    args = shaping.htb_args(1e9)
    assert args[:5] == ["htb", "rate", "1000000000bit", "ceil", "1000000000bit"]
    assert shaping.bucket_bytes(1e9) == 4096 and shaping.bucket_bytes(1e10) == 25000


def test_without_root_the_error_says_to_use_sim_with_the_same_alpha_and_beta(monkeypatch, capsys):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert "root" in preflight.unavailable_reason()
    assert cli.main(["up", "--nodes", "2", "--bandwidth", "1gbit"]) == 2
    err = capsys.readouterr().err
    assert "needs root" in err and 'backend="sim"' in err and "beta=8e-09" in err
    monkeypatch.setattr(sys, "platform", "darwin")
    assert "Linux" in preflight.unavailable_reason()
    with pytest.raises(preflight.ClusterUnavailable, match="beta=8e-08"):
        preflight.require(1e8)


def test_a_bad_plan_is_refused():
    with pytest.raises(ValueError):
        state_mod.plan("ok", 0, None, None, 1)
    with pytest.raises(ValueError):
        state_mod.plan("bad name!", 2, None, None, 1)


# --- on the machine (root, namespaces) -----------------------------------------------------------

def test_nodes_have_their_own_hostnames_addresses_and_names_of_each_other(make_cluster):
    st = make_cluster(3)
    for i, n in enumerate(st.nodes):
        assert on(st, n, "hostname").stdout.strip() == f"node{i}"
        addrs = on(st, n, "ip", "-o", "-4", "addr", "show", "dev", "eth0").stdout
        assert f"inet 10.231.0.{i + 1}/24" in addrs
        assert "UP" in on(st, n, "ip", "-o", "link", "show", "lo").stdout
    # names resolve on every node (its /etc/hosts), and node0 reaches node2 through the switch
    code = ("import socket; print(socket.gethostbyname('node2'), socket.gethostbyname(socket.gethostname()))")
    assert on(st, "node0", sys.executable, "-c", code).stdout.split() == ["10.231.0.3", "10.231.0.1"]
    assert measure.tcp_rtt(st, "node0", "node2", count=5)["median_s"] < 0.05
    # the switch's bridge holds one port per node, and no cluster link exists in the host's namespace
    ports = subprocess.run(["ip", "-n", st.switch, "-o", "link", "show", "master", "br0"],
                           capture_output=True, text=True).stdout
    assert sorted(line.split(":")[1].strip().split("@")[0] for line in ports.splitlines()) == ["veth0", "veth1", "veth2"]
    host = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert "veth" not in host and "br0" not in host


def test_the_cluster_cannot_reach_the_host_network(make_cluster):
    st = make_cluster(2)
    routes = on(st, "node0", "ip", "-4", "route").stdout
    assert routes.strip() == "10.231.0.0/24 dev eth0 proto kernel scope link src 10.231.0.1"
    code = "import socket; s=socket.socket(); s.settimeout(1); s.connect(('1.1.1.1', 53))"
    assert "unreachable" in on(st, "node0", sys.executable, "-c", code).stderr.lower()


def test_down_removes_everything_after_a_crash_and_is_idempotent(make_cluster):
    st = make_cluster(2)
    # a process left running in a node, and no record (as if `up`'s caller died and the file went)
    sleeper = subprocess.Popen(node_argv(st, "node1", ["sleep", "300"]))
    time.sleep(0.2)
    os.remove(os.path.join(st.folder, "state.json"))
    assert any(x.startswith("process") for x in leftovers(st.name))
    removed = teardown(st.name)
    assert sleeper.wait(timeout=5) != 0
    assert f"netns {st.name}-node1" in removed and f"netns {st.switch}" in removed
    assert leftovers(st.name) == []
    assert teardown(st.name) == []
    # a stale record and hosts file without namespaces do not stop the next `up` of that name
    os.makedirs(st.folder)
    with open(os.path.join(st.folder, "state.json"), "w") as f:
        f.write("{}")
    again = bring_up(state_mod.plan(st.name, 1, None, None, 1))
    assert on(again, "node0", "hostname").stdout.strip() == "node0"


def test_up_refuses_a_second_cluster_of_the_same_name_and_removes_a_half_built_one(make_cluster):
    st = make_cluster(1)
    with pytest.raises(RuntimeError, match="already exists"):
        bring_up(state_mod.plan(st.name, 2, None, None, 1))
    assert state_mod.load(st.name) is not None
    # a failing step of `up` (a rate tc refuses) removes what was made so far
    name = st.name + "bad"
    bad = state_mod.plan(name, 2, "1gbit", 1e9, 1)
    bad.bits_per_second = 1e18
    try:
        with pytest.raises(RuntimeError):
            bring_up(bad)
        assert leftovers(name) == []
    finally:
        teardown(name)


@pytest.mark.slow
def test_links_are_shaped_both_ways_the_ping_pong_recovers_the_bandwidth_and_incast_shares_it(make_cluster):
    st = make_cluster(3, bandwidth="100mbit")
    rows = shaping.configured(st)
    assert len(rows) == 6 and all("htb 1:1" in q and "rate 100Mbit ceil 100Mbit" in q for _, q in rows)
    # a round trip crosses both directions: were either unshaped, the fit would read about 2x
    r = measure.pingpong(st, "node0", "node1", sizes=[1 << 18, 1 << 19, 1 << 20])
    # TCP/IP headers take 66 of every 1514 bytes on the wire: goodput at most 95.6 Mbit/s
    assert 0.85e8 < r["bits_per_second"] < 1.05e8, r
    # two nodes stream to node1 at once: the switch's side of node1's link holds their sum to the
    # rate (unshaped there, it read 190 Mbit/s)
    both = measure.incast(st, ["node0", "node2"], "node1", 2_000_000)
    assert 0.8e8 < both["bits_per_second"] < 1.1e8, both


def tx_bytes(st, node) -> int:
    """Bytes node's eth0 has sent (its link to the switch)."""
    out = subprocess.run(["ip", "-n", st.node(node).netns, "-j", "-s", "link", "show", "eth0"],
                         capture_output=True, text=True).stdout
    return json.loads(out)[0]["stats64"]["tx"]["bytes"]


def _result(output: str) -> dict:
    lines = [l for l in output.splitlines() if "CLUSTER-RESULT " in l]
    assert len(lines) == 1, output[-3000:]
    return json.loads(lines[0].split("CLUSTER-RESULT ", 1)[1])


@pytest.mark.slow
def test_torchrun_across_two_nodes_gloo_allreduce(make_cluster, tmp_path):
    st = make_cluster(2)
    log = tmp_path / "out.txt"
    sent = tx_bytes(st, "node1")
    with open(log, "w") as out:
        codes = launchers.run_parallel(st, {n.hostname: launchers.torchrun_argv(st, i, [EXAMPLE])
                                            for i, n in enumerate(st.nodes)}, out=out, timeout=120)
    text = log.read_text()
    assert codes == {"node0": 0, "node1": 0}, text[-3000:]
    r = _result(text)
    assert r["backend"] == "gloo" and r["world_size"] == 2 and r["hosts"] == ["node0", "node1"]
    assert [v["address"] for v in r["ranks"]] == ["10.231.0.1", "10.231.0.2"]
    assert all(v["sum"] == 1.0 and v["all_equal"] for v in r["ranks"])
    assert all(v["torch_sum"] == 1.0 and v["torch_all_equal"] for v in r["ranks"])
    assert tx_bytes(st, "node1") - sent > 200_000       # its 256 KB of the all-reduce crossed the link
    logs = os.path.join(st.folder, "torchrun")           # torchrun's log folders: in the cluster's, not /tmp
    assert sorted(os.listdir(logs)) == ["node0", "node1"] and all(os.listdir(os.path.join(logs, n)) for n in
                                                                  ("node0", "node1")), os.listdir(logs)


@pytest.mark.slow
def test_mpirun_across_two_nodes_mpi_allreduce(make_cluster, tmp_path):
    st = make_cluster(2, ranks_per_node=2)
    log = tmp_path / "out.txt"
    sent = tx_bytes(st, "node1")
    with open(log, "w") as out:
        argv = launchers.mpirun_argv(st, [sys.executable, EXAMPLE])
        codes = launchers.run_parallel(st, {"node0": argv}, out=out, timeout=120)
    text = log.read_text()
    assert codes == {"node0": 0}, text[-3000:]
    r = _result(text)
    assert r["backend"] == "mpi" and r["world_size"] == 4 and r["hosts"] == ["node0", "node1"]
    assert [v["hostname"] for v in r["ranks"]] == ["node0", "node0", "node1", "node1"]
    assert all(v["sum"] == 6.0 and v["all_equal"] for v in r["ranks"])
    # torch's own gloo group as the homework benchmarks build it (torch_default_group): mpirun sets
    # no MASTER_ADDR, so node1's ranks must learn rank 0's host
    assert all(v["torch_sum"] == 6.0 and v["torch_all_equal"] for v in r["ranks"])
    # the all-reduce's 256 KB per rank crossed the link (UCX held to TCP: not the nodes' shared memory)
    assert tx_bytes(st, "node1") - sent > 200_000
    assert "UCX_TLS" in argv


@pytest.mark.slow
def test_the_command_line_up_status_exec_down(capsys):
    """up, status and exec all in this process (cli.main); exec of one node and down as the
    command a user types (each of those imports torch: about 1 s)."""
    from tests.cluster.conftest import cluster_reason
    if cluster_reason() is not None:
        pytest.skip(f"emulated cluster unavailable here: {cluster_reason()}")
    name = f"mtdcli{os.getpid() % 100000}"
    cmd = [sys.executable, "-m", "minitorch_dist.cluster", "--name", name]
    try:
        assert cli.main(["--name", name, "up", "--nodes", "2", "--bandwidth", "1gbit"]) == 0
        capsys.readouterr()
        assert cli.main(["--name", name, "status", "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["bits_per_second"] == 1e9 and len(report["shaping"]) == 4
        assert 0 < report["tcp_rtt"]["median_s"] < 0.05
        assert cli.main(["--name", name, "exec", "all", "sh", "-c", "echo $(hostname) $MTD_NODE_RANK"]) == 0
        assert sorted(capsys.readouterr().out.splitlines()) == ["[node0] node0 0", "[node1] node1 1"]
        one = subprocess.run(cmd + ["exec", "node1", "--", "sh", "-c", "hostname; exit 3"], capture_output=True,
                             text=True, cwd=ROOT, timeout=60)
        assert one.stdout.strip() == "node1" and one.returncode == 3
    finally:
        down = subprocess.run(cmd + ["down"], capture_output=True, text=True, cwd=ROOT, timeout=60)
        teardown(name)
    assert down.returncode == 0 and "removed" in down.stdout
    assert leftovers(name) == []

"""What students measure on the emulated cluster (examples/cluster/link_model.py, with the reference
laid over the kit): homework 1's ping-pong fit recovers the configured bandwidth within 10% and
reports the latency; naive, tree and ring all-reduce on 4 nodes are within 20% of the cost model
(measured alpha, configured beta). Needs root on Linux (skips with the reason elsewhere)."""

import json
import os
import subprocess
import sys

import pytest

from minitorch_dist.cluster import shaping

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples", "cluster"))
import link_model  # noqa: E402


def test_the_shaper_serves_small_packets_first_and_caps_send_buffers():
    small, bulk = shaping.leaf_args(1e8, True), shaping.leaf_args(1e8, False)
    assert small[small.index("rate") + 1] == "10000000bit" and bulk[bulk.index("rate") + 1] == "90000000bit"
    assert small[small.index("ceil") + 1] == bulk[bulk.index("ceil") + 1] == "100000000bit"
    assert small[-1] == "0" and bulk[-1] == "1"               # prio: small packets first
    assert shaping.send_buffer_bytes(1e8) == 256 << 10 and shaping.send_buffer_bytes(1e9) == 1_250_000


def test_the_ping_pong_sizes_are_latency_sizes_and_link_sized_messages():
    assert link_model.link_sizes(1e8) == [8, 64, 512, 327680, 655360, 1310720]   # 30 ms of 100mbit, rounded
    assert link_model.link_sizes(None)[3] == 4 << 20
    assert min(link_model.link_sizes(1e7)[3:]) == 1 << 18


def _run_link_model(st, *args) -> dict:
    if not os.path.isdir(os.path.join(ROOT, "solutions")):
        pytest.skip("needs solutions/ (the reference) to lay over the kit")
    cmd = [sys.executable, "-m", "tools.overlay", "solutions", "--", sys.executable, "-m", "minitorch_dist.cluster",
           "--name", st.name, "torchrun", "examples/cluster/link_model.py", *args]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=240)
    lines = [l for l in done.stdout.splitlines() if "CLUSTER-RESULT " in l]
    assert done.returncode == 0 and len(lines) == 1, (done.stdout + done.stderr)[-4000:]
    return json.loads(lines[0].split("CLUSTER-RESULT ", 1)[1])


@pytest.mark.slow
def test_ping_pong_fit_recovers_the_bandwidth_and_all_reduces_match_the_cost_model(make_cluster, foreground):
    st = make_cluster(4, bandwidth="100mbit")
    pp = _run_link_model(st, "--skip-allreduce", "--repeats", "3")["pingpong"]
    # homework 1's fit (the reference's fit_alpha_beta) on latency-sized and link-sized messages
    assert 0.9e8 < pp["bits_per_second"] < 1.1e8, pp
    assert 0 < pp["alpha_s"] < 0.01 and 0 < pp["latency_s"] < 0.01, pp
    # the all-reduces on slower links, where 2 busy cores keep up with 4 streams at once
    st.bandwidth, st.bits_per_second = "20mbit", 2e7
    st.save()
    shaping.shape(st)
    ar = _run_link_model(st, "--skip-pingpong", "--alpha", str(pp["alpha_s"]), "--allreduce-bytes", "655360",
                         "--repeats", "3")["allreduce"]
    assert ar["beta_s_per_byte"] == pytest.approx(4e-7)
    ratios = {name: row["ratio"] for name, row in ar["algorithms"].items()}
    assert set(ratios) == {"naive", "tree", "ring"}
    assert all(0.8 < r < 1.2 for r in ratios.values()), ar

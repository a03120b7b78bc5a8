"""Fixtures for the emulated cluster: skip (with the reason) where this machine cannot host it
(not root, not Linux, namespaces refused); every cluster a test brings up has a unique name and is
torn down at the end, and the fixture asserts nothing of it is left."""

import itertools
import os
import subprocess

import pytest

from minitorch_dist.cluster import leftovers, teardown, unavailable_reason
from minitorch_dist.cluster import state as state_mod
from minitorch_dist.cluster.nodes import bring_up
from minitorch_dist.cluster.shaping import parse_rate

_reason = []
_count = itertools.count()


def cluster_reason():
    if not _reason:
        _reason.append(unavailable_reason())
    return _reason[0]


def host_links() -> set:
    """Link names in the host's own network namespace."""
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line}


@pytest.fixture
def make_cluster():
    """make_cluster(nodes, bandwidth=None, ranks_per_node=1) -> ClusterState, up; torn down after
    the test, asserting no namespace, process, mount, hosts file or record is left, and that the
    host's own links are as they were."""
    reason = cluster_reason()
    if reason is not None:
        pytest.skip(f"emulated cluster unavailable here: {reason}")
    before = host_links()
    names = []

    def make(nodes, bandwidth=None, ranks_per_node=1):
        name = f"mtdt{os.getpid() % 100000}x{next(_count)}"
        names.append(name)
        st = state_mod.plan(name, nodes, bandwidth, parse_rate(bandwidth), ranks_per_node)
        return bring_up(st)

    try:
        yield make
    finally:
        for name in names:
            teardown(name)
    for name in names:
        assert leftovers(name) == [], f"cluster {name} left {leftovers(name)}"
    assert host_links() == before, f"host links changed: {host_links() ^ before}"


@pytest.fixture
def foreground():
    """For a test that compares what it measures with a model: its processes run at nice -10 (root)
    while it runs, so that the other pytest worker (pytest -n 2) or other load on the machine does
    not starve them. Children inherit it; a user who may not raise a priority runs at the usual one."""
    before = os.getpriority(os.PRIO_PROCESS, 0)
    try:
        os.setpriority(os.PRIO_PROCESS, 0, -10)
    except PermissionError:
        pass
    yield
    os.setpriority(os.PRIO_PROCESS, 0, before)

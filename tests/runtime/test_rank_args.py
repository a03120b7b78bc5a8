"""launch(..., rank_args=[...]): rank r gets exactly its own element, and on rank processes (gloo,
mpi, and a grading's sim engine) no other rank's element is anywhere in its Python objects. On the
thread sim (threads of one process) the others' elements are there: the control that shows the
search finds them when present."""

import gc
import secrets

import pytest
import torch

from minitorch_dist import LaunchError, launch, shutdown
from tests.runtime.test_host import host, start_host  # noqa: F401  (the fixture: a rank host, as under the autograder)


def foreign_markers(markers: list[str], mine: int) -> list[int]:
    """The ranks q != mine whose marker is held by some object of this process (an equal str, or
    bytes containing it), other than the `markers` list built here to search with."""
    wanted = {m: q for q, m in enumerate(markers) if q != mine}
    ours = {id(m) for m in markers} | {id(markers)}
    needles = {m.encode(): q for m, q in wanted.items()}
    ours |= {id(b) for b in needles}
    found = set()
    for obj in gc.get_objects():
        if id(obj) in ours:
            continue
        for item in gc.get_referents(obj):
            if id(item) in ours:
                continue
            if type(item) is str and item in wanted:
                found.add(wanted[item])
            elif type(item) in (bytes, bytearray) and len(item) >= 16:
                found.update(q for b, q in needles.items() if b in item)
    return sorted(found)


def report(group, token, marker, x):
    """Rank code: what this rank received, and which other ranks' markers it can find."""
    markers = [f"{token}-rank{q}" for q in range(group.size)]
    return {"marker": marker, "x": x.clone(), "foreign": foreign_markers(markers, group.rank)}


def nothing(group):
    return group.rank


def launch_with_markers(backend: str, p: int = 3):
    token = secrets.token_hex(12)
    own = [(f"{token}-rank{r}", torch.full((4,), 10.0 * r + 1)) for r in range(p)]
    return token, launch(report, p, args=(token,), rank_args=own, backend=backend)


@pytest.mark.parametrize("backend", ["gloo", pytest.param("mpi", marks=pytest.mark.mpi)])
@pytest.mark.slow
def test_each_rank_process_receives_only_its_own_element(backend):
    shutdown()
    launch(nothing, 3, backend=backend)        # warm ranks started before the elements exist
    token, res = launch_with_markers(backend)
    for r, got in enumerate(res):
        assert got["marker"] == f"{token}-rank{r}"
        assert torch.equal(got["x"], torch.full((4,), 10.0 * r + 1))
        assert got["foreign"] == [], f"rank {r} holds the elements of ranks {got['foreign']}"
    shutdown()


@pytest.mark.parametrize("backend", ["gloo", "sim"])
def test_through_a_rank_host_each_rank_gets_its_element(host, backend):  # noqa: F811
    """The autograder's path: the host forks the gloo ranks (it never saw the elements) or runs the
    whole sim run (here on threads), and the replies come back as plain data."""
    token, res = launch_with_markers(backend)
    assert [got["marker"] for got in res] == [f"{token}-rank{r}" for r in range(3)]
    assert [float(got["x"][0]) for got in res] == [1.0, 11.0, 21.0]
    assert res[1]["foreign"] == ([] if backend == "gloo" else [0, 2])


@pytest.fixture
def engine_host(tmp_path, monkeypatch):
    """A rank host whose sim runs go to the engine, a process per rank (sim/processes.py), as in a grading."""
    from minitorch_dist.runtime.launching import isolation
    monkeypatch.setenv(isolation.ENGINE_VAR, "1")
    yield from start_host(tmp_path, monkeypatch)


def test_through_a_grading_rank_host_each_sim_rank_process_holds_its_own_element_only(engine_host):
    """The engine's ranks are forked from a process that received every element: each empties the list
    that holds them before the code under test runs, keeping its own."""
    token, res = launch_with_markers("sim")
    assert [got["marker"] for got in res] == [f"{token}-rank{r}" for r in range(3)]
    assert [float(got["x"][0]) for got in res] == [1.0, 11.0, 21.0]
    assert [got["foreign"] for got in res] == [[], [], []]


def test_on_sim_every_rank_gets_its_element_but_the_process_holds_all_of_them():
    token, res = launch_with_markers("sim")
    assert [got["marker"] for got in res] == [f"{token}-rank{r}" for r in range(3)]
    assert [float(got["x"][0]) for got in res] == [1.0, 11.0, 21.0]
    assert res[0]["foreign"] == [1, 2], "sim threads share one process: the search must see the others"


@pytest.mark.parametrize("rank_args,message", [
    ([(1,), (2,)], "rank_args has 2 elements but the job has 3 ranks"),
    ([(1,), 2, (3,)], r"rank_args\[1\] is a int"),
    ("abc", "one tuple of arguments per rank"),
])
def test_rank_args_that_do_not_fit_are_refused_before_anything_runs(rank_args, message):
    with pytest.raises(LaunchError, match=message):
        launch(nothing, 3, rank_args=rank_args, backend="sim")

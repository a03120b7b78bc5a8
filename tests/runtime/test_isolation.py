"""Runs on warm ranks are isolated: a message one run leaves unreceived never reaches the next."""

import warnings

import pytest
import torch

from minitorch_dist import launch, shutdown

from .test_mpi import MPIRUN


def _stray_send(group):
    if group.rank == 0:
        group.send(torch.full((3,), 7.0), 1)        # nobody receives it


def _one_message(group):
    x = torch.zeros(3)
    if group.rank == 0:
        group.send(torch.full((3,), 1.0), 1)
    else:
        group.recv(x, 0)
    return x.tolist()


@pytest.mark.parametrize("backend", ["gloo", pytest.param("mpi", marks=[
    pytest.mark.mpi, pytest.mark.skipif(MPIRUN is None, reason="no mpirun")])])
@pytest.mark.slow
def test_a_stray_send_does_not_reach_the_next_run(backend, no_leftover_processes):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        launch(_stray_send, 2, backend=backend, collectives=False)
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert any("sent 1 messages but received 0" in m for m in messages), messages
    assert launch(_one_message, 2, backend=backend, collectives=False)[1] == [1.0, 1.0, 1.0]
    shutdown()


def test_a_clean_run_keeps_the_warm_ranks():
    first = launch(lambda g: __import__("os").getpid(), 2, collectives=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        second = launch(lambda g: __import__("os").getpid(), 2, collectives=False)
    assert list(first) == list(second)

"""Rank code of the ping-pong tests: the student's ping_pong on a fake group, whose clock charges
alpha + n*beta per message (the test chooses alpha and beta), run on a rank process (never in the
grading process)."""

from __future__ import annotations

import torch

from assignments.hw1.tests.hw1_ranks import plain

class FakeGroup:
    """A rank's view with a fake clock: each send or recv of n bytes takes alpha + n*beta.

    calls records (op, peer, dtype name, elements) per message, as plain data.
    """

    device = torch.device("cpu")      # as a Group's: where the rank computes

    def __init__(self, rank, size, alpha, beta):
        self.rank, self.size, self.alpha, self.beta = rank, size, alpha, beta
        self.calls = []
        self.clock = 0.0

    def now(self):
        return self.clock

    def send(self, tensor, dst, tag=0):
        self.calls.append(("send", plain(dst), str(tensor.dtype), int(tensor.numel())))
        self.clock += self.alpha + tensor.numel() * self.beta

    def recv(self, tensor, src, tag=0):
        self.calls.append(("recv", plain(src), str(tensor.dtype), int(tensor.numel())))
        self.clock += self.alpha + tensor.numel() * self.beta
        return tensor

    def isend(self, tensor, dst, tag=0):
        self.send(tensor, dst, tag)
        return _Done()

    def irecv(self, tensor, src, tag=0):
        self.recv(tensor, src, tag)
        return _Done()


class _Done:
    def wait(self):
        return None


def rank_fake_ping_pong(group, rank: int, size: int, clock: tuple, sizes, kwargs: dict) -> dict:
    """Rank code: ping_pong(FakeGroup(rank, size, *clock), sizes, **kwargs) -> {"times": its return
    value, "calls": the fake group's messages}, as plain data. `group` (the launch's own) is not used."""
    from minitorch_dist.collectives import ping_pong
    fake = FakeGroup(rank, size, *clock)
    times = ping_pong(fake, sizes, **kwargs)
    return {"times": plain(times), "calls": fake.calls}

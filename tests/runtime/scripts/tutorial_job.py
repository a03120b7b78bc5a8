"""A program written the way torch's distributed tutorials write one, that takes a Group from its job.

    python tests/runtime/scripts/tutorial_job.py PORT CASE

mp.spawn starts the ranks, each calls dist.init_process_group("gloo", ...) with MASTER_ADDR and
MASTER_PORT set by hand, then minitorch_dist.world_group(). Each rank prints one line per check,
"rank R CASE ok ...", or the error it met. Cases:
    ok        a ring of sendrecvs, a provided all_reduce, a sub-group, launch(fn) on the group,
              close and open again, torch's own all_reduce beside it
    refuse    launch(fn, 2) before world_group(): a LaunchError that names world_group()
    deadlock  both ranks recv from each other: the report shows both blocked, neither finished
    closed    rank 1 closes its group, rank 0 waits for it: the report shows rank 1 finished
"""

import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import minitorch_dist
from minitorch_dist import DeadlockError, LaunchError, launch, world_group


def say(line: str) -> None:
    os.write(1, (line + "\n").encode())        # one write: lines of different ranks never interleave


def ring_sum(group, x):
    """Every rank's x summed, by passing values around the ring (p - 1 sendrecvs)."""
    total, travelling = x.clone(), x.clone()
    right, left = (group.rank + 1) % group.size, (group.rank - 1) % group.size
    for _ in range(group.size - 1):
        incoming = torch.empty_like(travelling)
        group.sendrecv(travelling, right, incoming, left)
        total += incoming
        travelling = incoming
    return total


def report_rank(group):
    return group.rank * 10 + group.size


def run(rank, world_size, port, case):
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    try:
        if case == "ok":
            group = world_group()
            assert world_group() is group
            x = torch.arange(5, dtype=torch.float64) + rank
            expected = sum(torch.arange(5, dtype=torch.float64) + r for r in range(world_size))
            assert torch.equal(ring_sum(group, x), expected)
            y = x.clone()
            group.all_reduce(y)
            assert torch.equal(y, expected)
            if rank < 2:
                sub = group.subgroup([0, 1])
                z = torch.full((3,), float(rank + 1))
                sub.all_reduce(z)
                assert torch.equal(z, torch.full((3,), 3.0))
            result = launch(report_rank)
            assert list(result) == [r * 10 + world_size for r in range(world_size)], list(result)
            sent = group.counters.by_op["sendrecv"].messages_sent
            assert sent == world_size - 1, sent
            group.close()
            again = world_group()                   # a second generation of the same job
            assert again is not group
            w = torch.ones(2) * rank
            again.all_reduce(w)
            assert torch.equal(w, torch.ones(2) * sum(range(world_size)))
            t = torch.ones(1)
            dist.all_reduce(t)                      # torch's own process group is untouched
            assert t.item() == world_size
            again.close()
            say(f"rank {rank} ok ok")
        elif case == "refuse":
            try:
                launch(report_rank, world_size)
            except LaunchError as exc:
                assert "world_group()" in str(exc), exc
                say(f"rank {rank} refuse ok")
        elif case in ("deadlock", "deadlock_cut"):
            # deadlock_cut: rank 1's deadline is far off, so it learns of the deadlock when rank 0's
            # deadline expires and closes the connection, not from its own deadline
            group = world_group(deadline=60 if case == "deadlock_cut" and rank == 1 else 3)
            try:
                group.recv(torch.empty(4), (rank + 1) % world_size)
            except DeadlockError as exc:
                text = str(exc)
                assert "finished" not in text, text
                say(f"rank {rank} deadlock ok " + text.replace("\n", " | "))
            dist.barrier()      # both reports are read before either rank closes (it would show as finished)
            group.close()
        elif case == "closed":
            group = world_group(deadline=3)
            if rank == 1:
                group.close()                       # waits for rank 0's close (it is collective)
            else:
                try:
                    group.recv(torch.empty(4), 1)
                except DeadlockError as exc:
                    text = str(exc)
                    assert "closed its world_group()" in text, text
                    say(f"rank {rank} closed ok " + text.replace("\n", " | "))
                group.close()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    port, case = int(sys.argv[1]), sys.argv[2]
    world_size = 3 if case == "ok" else 2
    assert minitorch_dist.world_group is world_group
    mp.spawn(run, args=(world_size, port, case), nprocs=world_size)

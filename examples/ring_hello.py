"""First run: 4 ranks pass a tensor around a ring, then sum with all_reduce.

    python examples/ring_hello.py                       # 4 local gloo processes
    python examples/ring_hello.py --backend sim         # 4 simulated ranks (virtual clock)
    python -m minitorch_dist.run -n 4 examples/ring_hello.py
    mpirun -n 4 python examples/ring_hello.py           # MPI
Each rank prints what it received; the caller prints messages, bytes and time per rank.
"""

import argparse

import torch

from minitorch_dist import launch


def ring(group, n: int):
    """Each rank sends rank-filled data right, receives from the left, then all-reduces."""
    right, left = (group.rank + 1) % group.size, (group.rank - 1) % group.size
    x = torch.full((n,), float(group.rank))
    received = torch.empty(n)
    if group.size > 1:
        group.sendrecv(x, right, received, left)
        assert received[0].item() == left, f"rank {group.rank} got {received[0].item()}, expected {left}"
    total = group.all_reduce(x.clone())
    expected = group.size * (group.size - 1) / 2
    assert total[0].item() == expected
    print(f"rank {group.rank}/{group.size}: received {n} floats from rank {left}; "
          f"all_reduce sum = {total[0].item():g} (expected p(p-1)/2 = {expected:g})")
    return total[0].item()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", "--world-size", type=int, default=4)
    parser.add_argument("--backend", default=None, help="gloo (default), mpi or sim")
    parser.add_argument("--elements", type=int, default=1 << 16)
    opts = parser.parse_args()
    from minitorch_dist.runtime.env import detect_external
    world_size = None if detect_external() else opts.world_size
    result = launch(ring, world_size, args=(opts.elements,), backend=opts.backend)
    if result.counters and (detect_external() is None or detect_external().rank == 0):
        print(result.summary())

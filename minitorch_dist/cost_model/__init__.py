"""The cost model: what a collective, a tensor-parallel step or a ZeRO stage costs, in formulas.

One place for lectures, handouts, tests and the sim backend (which times its provided
collectives with it). Every name is reachable as minitorch_dist.cost_model.<name>:

    collectives.py       alpha-beta(-gamma) times of point-to-point and every all-reduce, broadcast,
                         reduce, all-gather, reduce-scatter and barrier algorithm the kit teaches;
                         traffic (messages and bytes); nccl-tests' algorithm and bus bandwidth
    tensor_parallel.py   Megatron tensor parallelism (homework 4): all-reduces, bytes, memory, time
    zero.py              ZeRO stages and FSDP (homework 6): memory per rank, bytes per step

    from minitorch_dist import cost_model
    cost_model.ring_all_reduce(p=8, n_bytes=4e6, alpha=1e-5, beta=1e-9)
"""

from .collectives import (ALL_REDUCE_ALGORITHMS, Traffic, algorithm_bandwidth, all_reduce_costs,
                          binomial_broadcast, binomial_reduce, bus_bandwidth, butterfly_all_reduce,
                          dissemination_barrier, naive_all_reduce, p2p, rabenseifner_all_reduce,
                          ring_all_gather, ring_all_reduce, ring_reduce_scatter, traffic, tree_all_reduce)
from .tensor_parallel import (TPAllReduce, TPStepTime, TPTraffic, tp_activation_bytes_per_rank,
                              tp_all_reduce_counts, tp_flops_per_step, tp_parameters_per_rank, tp_step_all_reduces,
                              tp_step_time, tp_step_traffic)
from .zero import STAGES as ZERO_STAGES, zero_memory_per_rank, zero_step_bytes

__all__ = [
    "ALL_REDUCE_ALGORITHMS", "Traffic", "algorithm_bandwidth", "all_reduce_costs", "binomial_broadcast", "binomial_reduce", "bus_bandwidth", "butterfly_all_reduce", "dissemination_barrier", "naive_all_reduce", "p2p", "rabenseifner_all_reduce", "ring_all_gather", "ring_all_reduce", "ring_reduce_scatter", "traffic", "tree_all_reduce",
    
    "TPAllReduce", "TPStepTime", "TPTraffic", "tp_activation_bytes_per_rank", "tp_all_reduce_counts",
    "tp_flops_per_step", "tp_parameters_per_rank", "tp_step_all_reduces", "tp_step_time", "tp_step_traffic",
    "ZERO_STAGES", "zero_memory_per_rank", "zero_step_bytes"]

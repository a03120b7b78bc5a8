"""Homework 2: data parallelism, from a parameter server to bucketed all-reduce.

    ParameterServer   2.1  everything through rank 0; only rank 0 steps
    AllReduceDDP      2.2  all-reduce every gradient after backward
    OverlapDDP        2.3  one async all-reduce per gradient, started from a hook
    BucketedDDP       2.4  one async all-reduce per bucket of gradients
"""

from .bucketed import BucketedDDP, plan_buckets
from .common import (DataParallel, broadcast_module, flat_grads, flat_parameters, recv_shaped, send_shaped,
                     trainable_parameters, write_flat_)
from .ddp import AllReduceDDP, OverlapDDP
from .param_server import ParameterServer

DATA_PARALLELS = {"allreduce": AllReduceDDP, "overlap": OverlapDDP, "bucketed": BucketedDDP}

__all__ = ["ParameterServer", "AllReduceDDP", "OverlapDDP", "BucketedDDP", "DataParallel", "DATA_PARALLELS",
           "plan_buckets", "broadcast_module", "flat_grads", "flat_parameters", "recv_shaped", "send_shaped",
           "trainable_parameters", "write_flat_"]

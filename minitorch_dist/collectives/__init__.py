"""Homework 1: collectives built from point-to-point messages (students fill these in).

    from minitorch_dist.collectives import ring_all_reduce
    launch(lambda group: ring_all_reduce(torch.ones(8), group), 4, collectives=False)

Tasks: 1.1 ping_pong / fit_alpha_beta (ping_pong.py); 1.2 broadcast / reduce (tree.py);
1.3 reduce_scatter_ / all_gather_ (ring.py); 1.4-1.7 naive, tree, butterfly and ring
all-reduce (all_reduce.py). The handout is assignments/hw1/README.md.
"""

from .all_reduce import butterfly_all_reduce, naive_all_reduce, ring_all_reduce, tree_all_reduce
from .common import OPS, chunk_bounds, combine_
from .ping_pong import fit_alpha_beta, ping_pong
from .ring import all_gather, all_gather_, reduce_scatter, reduce_scatter_
from .tree import broadcast, reduce

ALL_REDUCES = {
    "naive": naive_all_reduce,
    "tree": tree_all_reduce,
    "butterfly": butterfly_all_reduce,
    "ring": ring_all_reduce,
}

__all__ = ["ping_pong", "fit_alpha_beta", "broadcast", "reduce", "reduce_scatter_", "all_gather_",
           "reduce_scatter", "all_gather", "naive_all_reduce", "tree_all_reduce", "butterfly_all_reduce",
           "ring_all_reduce", "ALL_REDUCES", "OPS", "chunk_bounds", "combine_"]

"""Homework 2: decentralized training.

    ring_gossip_, DPSGD          2.5  gossip averaging on a ring; D-PSGD
    push_sum_step_, SGP          2.6  push-sum on a directed exponential graph; SGP
    moshpit_average_             2.7  (bonus) group all-reduce that regroups every round
"""

from .dpsgd import DPSGD, ring_gossip_
from .moshpit import grid_groups, moshpit_average_
from .sgp import SGP, exponential_peers, push_sum_step_

__all__ = ["ring_gossip_", "DPSGD", "push_sum_step_", "SGP", "exponential_peers", "grid_groups",
           "moshpit_average_"]

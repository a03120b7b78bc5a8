"""Data for homework 2, made or shipped locally (nothing downloads), deterministic from seeds.

    from minitorch_dist.data import make_classification, load_text, CharTokenizer, char_batches
    from minitorch_dist.data import shard_indices, global_batches, local_part

    x, y = make_classification(n=512)                      # (512, 16) float32, (512,) int64
    for step, batch in enumerate(global_batches(len(x), 32, seed=0, epoch=0)):
        mine = local_part(batch, group.rank, group.size)   # this rank's rows of the global batch
        loss = F.cross_entropy(model(x[mine]), y[mine])

Every process that calls these with the same arguments gets the same tensors, so ranks agree
on the global batch of each step without communicating.
"""

from .shard import global_batches, local_part, shard_indices
from .synthetic import make_classification
from .text import CharTokenizer, char_batches, load_text

__all__ = ["make_classification", "load_text", "CharTokenizer", "char_batches", "shard_indices",
           "global_batches", "local_part"]

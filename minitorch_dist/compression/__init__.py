"""Homework 3: gradient compression for data-parallel training.

    Uint8Quantizer, SignQuantizer,
    compressed_all_reduce, gather_and_sum    3.1  quantization; the all-reduce of payloads (all-gather)
    TopK, RandomK                            3.2  sparsification: k values (and indices)
    ErrorFeedback, ef_compressed_all_reduce  3.3  error feedback: the residual comes back next step
    orthogonalize_, powersgd_hook            3.4  PowerSGD (provided: PowerSGDState, low_rank.py)
    HookedDDP, compression_hook              3.5  bucketed DDP with a communication hook (provided:
                                                  GradBucket, Future, allreduce_hook, grad_bucket.py)
    LowRank, CompressedBoundary              3.6  (bonus) a compressed stage boundary (provided:
                                                  split_char_transformer, two_stage_step, Identity,
                                                  stage_split.py; compressed_layers, chosen blocks'
                                                  messages compressed in one process, layer_sites.py)
    Compressor, check_finite, ...                 provided: the interface and the checks (common.py)
"""

from .activations import CompressedBoundary, LowRank
from .common import Compressor, check_finite, check_op, check_positive, chunk_ids, num_chunks
from .ddp_hooks import CompressionState, HookedDDP, compression_hook
from .error_feedback import ErrorFeedback, ef_compressed_all_reduce
from .grad_bucket import Future, GradBucket, allreduce_hook
from .layer_sites import compressed_layers
from .low_rank import PowerSGDState
from .powersgd import orthogonalize_, powersgd_hook
from .quantize import SignQuantizer, Uint8Quantizer, compressed_all_reduce, gather_and_sum
from .sparsify import RandomK, TopK
from .stage_split import Identity, split_char_transformer, two_stage_step

__all__ = ["Uint8Quantizer", "SignQuantizer", "compressed_all_reduce", "gather_and_sum", "TopK", "RandomK",
           "ErrorFeedback", "ef_compressed_all_reduce", "orthogonalize_", "powersgd_hook", "PowerSGDState",
           "HookedDDP", "CompressionState", "compression_hook", "GradBucket", "Future", "allreduce_hook", "Compressor", "check_finite", "check_op", "check_positive",
           "chunk_ids", "num_chunks", "LowRank", "CompressedBoundary", "Identity", "split_char_transformer",
           "two_stage_step", "compressed_layers"]

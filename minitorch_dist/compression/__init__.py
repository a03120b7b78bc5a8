"""Homework 3: gradient compression for data-parallel training.

    Uint8Quantizer, SignQuantizer,
    compressed_all_reduce, gather_and_sum    3.1  quantization; the all-reduce of payloads (all-gather)
    TopK, RandomK                            3.2  sparsification: k values (and indices)
    ErrorFeedback, ef_compressed_all_reduce  3.3  error feedback: the residual comes back next step
    Compressor, check_finite, ...                 provided: the interface and the checks (common.py)
"""

from .common import Compressor, check_finite, check_op, check_positive, chunk_ids, num_chunks
from .error_feedback import ErrorFeedback, ef_compressed_all_reduce
from .quantize import SignQuantizer, Uint8Quantizer, compressed_all_reduce, gather_and_sum
from .sparsify import RandomK, TopK

__all__ = ["Uint8Quantizer", "SignQuantizer", "compressed_all_reduce", "gather_and_sum", "TopK", "RandomK",
           "ErrorFeedback", "ef_compressed_all_reduce", "Compressor", "check_finite", "check_op", "check_positive",
           "chunk_ids", "num_chunks"]

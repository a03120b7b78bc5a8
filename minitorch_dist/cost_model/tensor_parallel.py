"""Costs of Megatron tensor parallelism (homework 4): all-reduces, bytes, parameters, memory, step time.

Also reachable as minitorch_dist.cost_model.<name>. Notation: b batch, s sequence length, h hidden
size (d_model), a heads, V vocabulary, L transformer blocks, p tensor-parallel size, e bytes per
element (4 for float32). The model is minitorch_dist.tensor_parallel.ParallelCharTransformer
(pre-LayerNorm blocks, 4h MLP, tied embedding and LM head, vocab-parallel cross-entropy).

Where a training step communicates (Megatron-LM, Shoeybi et al. 2019, section 3):

    where                      forward                        backward
    token embedding            1 all-reduce (g), b s h        -
    each attention, each MLP   1 all-reduce (g), b s h        1 all-reduce (f), b s h
    LM head (tied weight)      -                              1 all-reduce (f), b s h
    cross-entropy              3 all-reduces (max, target     -
                               logit, sum of exp), b s each
    step                       2L + 1 of b s h, 3 of b s      2L + 1 of b s h

Each all-reduce of n bytes on a ring: every rank sends 2(p-1) messages and 2(p-1)/p * n bytes,
and takes cost_model.ring_all_reduce(p, n) = 2(p-1) alpha + 2(p-1)/p n beta. With p = 1 nothing
is communicated (the size-1 bypass).

Contents: tp_step_all_reduces (the schedule as data), tp_all_reduce_counts, tp_step_traffic,
tp_parameters_per_rank, tp_activation_bytes_per_rank, tp_flops_per_step, tp_step_time.
"""

from __future__ import annotations

from dataclasses import dataclass

from .collectives import ring_all_reduce, traffic

__all__ = ["TPAllReduce", "TPTraffic", "TPStepTime", "tp_step_all_reduces", "tp_all_reduce_counts",
           "tp_step_traffic", "tp_parameters_per_rank", "tp_activation_bytes_per_rank", "tp_flops_per_step",
           "tp_step_time"]


@dataclass(frozen=True)
class TPAllReduce:
    """One all-reduce of a tensor-parallel training step.

    phase: "forward" or "backward"; where: the layer that calls it ("embedding", "block 0 attention",
    "block 0 mlp", "lm head", "cross-entropy max" ...); elements, bytes: the tensor's size on one rank.
    """

    phase: str
    where: str
    elements: int
    bytes: int


def tp_step_all_reduces(batch: int, seq_len: int, d_model: int, n_layers: int,
                        element_bytes: int = 4) -> list[TPAllReduce]:
    """Every all-reduce of one training step (forward, then backward), in the order they run.

    Forward:  embedding g (b s h), then per block attention g, MLP g (b s h each), then the
              cross-entropy's max, target logit and sum of exp (b s each).
    Backward: LM head f (b s h), then per block from the last: MLP f, attention f (b s h each).
    Count: 2L + 4 forward, 2L + 1 backward (for any p > 1; p = 1 communicates nothing).
    """
    act = batch * seq_len * d_model                                  # (b, s, h) activations
    tok = batch * seq_len                                            # (b, s) per-token scalars
    fwd = [TPAllReduce("forward", "embedding", act, act * element_bytes)]
    for i in range(n_layers):
        fwd += [TPAllReduce("forward", f"block {i} attention", act, act * element_bytes),
                TPAllReduce("forward", f"block {i} mlp", act, act * element_bytes)]
    fwd += [TPAllReduce("forward", f"cross-entropy {what}", tok, tok * element_bytes)
            for what in ("max", "target logit", "sum of exp")]
    bwd = [TPAllReduce("backward", "lm head", act, act * element_bytes)]
    for i in reversed(range(n_layers)):
        bwd += [TPAllReduce("backward", f"block {i} mlp", act, act * element_bytes),
                TPAllReduce("backward", f"block {i} attention", act, act * element_bytes)]
    return fwd + bwd


def tp_all_reduce_counts(n_layers: int) -> tuple[int, int]:
    """(forward, backward) all-reduces of a step: (2L + 4, 2L + 1).

    Per block 2 forward (g after attention's and MLP's row-parallel layers) and 2 backward (f before
    their column-parallel layers); embedding 1 forward; LM head 1 backward; cross-entropy 3 forward.
    """
    return 2 * n_layers + 4, 2 * n_layers + 1


@dataclass(frozen=True)
class TPTraffic:
    """What one rank communicates in a training step, per pass.

    all_reduces, payload_bytes: calls and the summed size of their tensors (what the runtime's
        counters record for the provided collectives: calls and tensor_bytes);
    bytes_sent, messages_sent: on a ring, 2(p-1)/p of each payload and 2(p-1) messages per call.
    """

    forward_all_reduces: int
    backward_all_reduces: int
    forward_payload_bytes: int
    backward_payload_bytes: int
    bytes_sent: float
    messages_sent: int

    @property
    def all_reduces(self) -> int:
        return self.forward_all_reduces + self.backward_all_reduces

    @property
    def payload_bytes(self) -> int:
        return self.forward_payload_bytes + self.backward_payload_bytes


def tp_step_traffic(batch: int, seq_len: int, d_model: int, n_layers: int, p: int,
                    element_bytes: int = 4) -> TPTraffic:
    """One rank's traffic in a training step at tensor-parallel size p.

    Payload: forward (2L + 1) b s h e + 3 b s e, backward (2L + 1) b s h e.
    Ring:    bytes sent 2(p-1)/p * payload; messages 2(p-1) per all-reduce. p = 1: all zero.
    """
    if p <= 1:
        return TPTraffic(0, 0, 0, 0, 0.0, 0)
    ops = tp_step_all_reduces(batch, seq_len, d_model, n_layers, element_bytes)
    fwd = [op for op in ops if op.phase == "forward"]
    bwd = [op for op in ops if op.phase == "backward"]
    ring = [traffic("ring_all_reduce", p, op.bytes) for op in ops]
    return TPTraffic(len(fwd), len(bwd), sum(op.bytes for op in fwd), sum(op.bytes for op in bwd),
                     sum(t.bytes for t in ring), sum(t.messages for t in ring))


def tp_parameters_per_rank(vocab_size: int, d_model: int, n_layers: int, max_len: int, p: int) -> int:
    """Parameter elements one rank holds: the split weights / p plus the replicated ones.

    Split (sum over ranks = dense): token embedding = LM head (tied) V h; per block qkv 3h^2 + 3h,
        proj weight h^2, fc 4h^2 + 4h, fc_proj weight 4h^2: V h + L (12 h^2 + 7 h).
    Replicated (on every rank): position embedding max_len h; per block ln1, ln2 (4h) and the
        row-parallel biases of proj and fc_proj (2h), added after the reduction; ln_f 2h:
        max_len h + 6 L h + 2 h.
    Per rank: (V h + L (12 h^2 + 7 h)) / p + max_len h + 6 L h + 2 h. Raises ValueError if p does not
    divide V, h or 4h (the layers refuse such a split too).
    """
    h = d_model
    if vocab_size % p or h % p:
        raise ValueError(f"tp_parameters_per_rank: p={p} must divide the vocabulary ({vocab_size}) and "
                         f"d_model ({h}); pick a p that divides both")
    split = vocab_size * h + n_layers * (12 * h * h + 7 * h)
    replicated = max_len * h + 6 * n_layers * h + 2 * h
    return split // p + replicated


def tp_activation_bytes_per_rank(batch: int, seq_len: int, d_model: int, n_heads: int, n_layers: int,
                                 p: int, element_bytes: int = 4, sequence_parallel: bool = False) -> float:
    """Bytes of the activations the blocks keep for backward, on one rank (Korthikanti et al. 2022).

    Per block, in elements (no dropout; the paper's Table 2 counts the same tensors in 2 bytes):
        replicated: inputs of ln1, qkv, ln2, fc               4 b s h
        split by heads / columns: q, k, v, attention output     4 b s h / p
                                  fc output, GELU output       8 b s h / p
                                  attention probabilities      a b s^2 / p
    Total: L e (4 b s h + (12 b s h + a b s^2) / p); with sequence parallelism the replicated 4 b s h
    are split along s too: L e (16 b s h + a b s^2) / p. Embeddings and logits are not counted.
    """
    bsh = batch * seq_len * d_model
    split = 12 * bsh + n_heads * batch * seq_len * seq_len
    replicated = 4 * bsh / p if sequence_parallel else 4 * bsh
    return n_layers * element_bytes * (replicated + split / p)


def tp_flops_per_step(batch: int, seq_len: int, d_model: int, vocab_size: int, n_layers: int) -> float:
    """Floating-point operations of one dense training step (forward + backward = 3 x forward).

    Forward, 2 flops per multiply-add: per block the matmuls 24 b s h^2 (qkv 6, proj 2, fc 8,
    fc_proj 8) and attention 4 b s^2 h (q k^T and att v, the full s x s before the causal mask);
    LM head 2 b s V h. Forward = L (24 b s h^2 + 4 b s^2 h) + 2 b s V h; a step is 3 times that.
    Tensor parallelism splits every one of these matmuls: each rank does flops / p.
    """
    b, s, h = batch, seq_len, d_model
    forward = n_layers * (24 * b * s * h * h + 4 * b * s * s * h) + 2 * b * s * vocab_size * h
    return 3.0 * forward


@dataclass(frozen=True)
class TPStepTime:
    """Predicted seconds of one training step: compute + comm (all-reduces block, nothing overlaps)."""

    compute: float
    comm: float

    @property
    def total(self) -> float:
        return self.compute + self.comm


def tp_step_time(batch: int, seq_len: int, d_model: int, vocab_size: int, n_layers: int, p: int,
                 alpha: float, beta: float, flop_rate: float, element_bytes: int = 4) -> TPStepTime:
    """Predicted step time on an alpha-beta network with ring all-reduces.

    compute = tp_flops_per_step / p / flop_rate   (layer norms, softmax and the loss are left out)
    comm    = sum over tp_step_all_reduces of ring_all_reduce(p, n_bytes, alpha, beta)
            = (4L + 5) 2(p-1) alpha + 2(p-1)/p ((4L + 2) b s h + 3 b s) e beta;   0 for p = 1.
    The sim backend charges exactly this when each rank calls group.compute(compute) and runs the step.
    """
    if not flop_rate > 0:
        raise ValueError(f"tp_step_time: flop_rate must be > 0 flop/s, got {flop_rate}")
    compute = tp_flops_per_step(batch, seq_len, d_model, vocab_size, n_layers) / p / flop_rate
    comm = 0.0
    if p > 1:
        for op in tp_step_all_reduces(batch, seq_len, d_model, n_layers, element_bytes):
            comm += ring_all_reduce(p, op.bytes, alpha, beta)
    return TPStepTime(compute, comm)

"""A CharTransformer pipeline whose vocabulary layers are sharded over every rank (task 5.8's step).
Provided code: it runs the student's vocab.py functions around a GPipe pass of the body.

    parts = vocab_pipeline_parts(model, group, example_microbatch)    # this rank's shares
    loss = vocab_pipeline_step(parts, idx, target, optimizer, n_microbatches=m)

The body, [position embedding, block 0, ..., block L-1, final norm], is cut into p stages balanced
by parameter count (stage j on rank j); the token embedding and the LM head are not in it: rank r
holds their rows vocab_shard(V, group) (embedding_rows, head_rows). One step:
  1. embed_forward: the token embeddings of the whole batch on rank 0 (a leaf that requires grad);
  2. GPipe forward of the body over the m micro-batches (activations sent with forward_tag(i));
  3. head_forward_backward on the last stage's output for the whole batch: the loss on every rank
     and the hidden state's gradient on the last stage;
  4. GPipe backward of the body (gradients sent back with backward_tag(i));
  5. embed_backward with rank 0's gradient of the token embeddings; one optimizer step.
Per step, messages of rank j: the body's m per boundary and direction, one part of the embedding
to rank 0 (j > 0) and one part of the hidden state's gradient to rank p-1 (j < p-1).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from minitorch_dist.models import CharTransformer
from minitorch_dist.pipeline.partition import balance_by_params, split_layers
from minitorch_dist.pipeline.spec import StageSpec, pipeline_spec, split_microbatches
from minitorch_dist.pipeline.stage import backward_tag, forward_tag
from minitorch_dist.pipeline.vocab import embed_backward, embed_forward, head_forward_backward, vocab_shard

__all__ = ["PositionEmbedding", "VocabPipelineParts", "vocab_pipeline_parts", "vocab_pipeline_step"]


class PositionEmbedding(nn.Module):
    """The body's first layer: token embeddings (B, T, C) plus the position embeddings of 0 .. T-1."""

    def __init__(self, pos_emb: nn.Embedding):
        super().__init__()
        self.pos_emb = pos_emb

    def forward(self, x: Tensor) -> Tensor:
        return x + self.pos_emb(torch.arange(x.shape[1], device=x.device))


@dataclass
class VocabPipelineParts:
    """One rank's shares: its rows of both vocabulary layers, its body stage and that stage's spec."""

    group: object
    rows: slice
    embedding_rows: nn.Parameter            # (V_r, C): rows `rows` of tok_emb.weight
    head_rows: nn.Parameter                 # (V_r, C): rows `rows` of lm_head.weight
    body: nn.Module
    spec: StageSpec

    def parameters(self) -> list[nn.Parameter]:
        return [self.embedding_rows, self.head_rows, *self.body.parameters()]


def vocab_pipeline_parts(model: CharTransformer, group, example: Tensor) -> VocabPipelineParts:
    """This rank's shares of `model` (untied, on group.device); `example` is one micro-batch of token ids (b, T)."""
    if not isinstance(model, CharTransformer) or model.tie_weights:
        raise ValueError("vocab_pipeline_parts: expected an untied CharTransformer (tie_weights=False); the "
                         "embedding and the LM head are sharded separately")
    layers = [PositionEmbedding(model.pos_emb), *model.blocks, model.ln_f]
    stages = split_layers(layers, balance_by_params(layers, group.size))
    with torch.no_grad():
        tokens = model.tok_emb(example)
    rows = vocab_shard(model.vocab_size, group)
    return VocabPipelineParts(group, rows, nn.Parameter(model.tok_emb.weight.detach()[rows].clone()),
                              nn.Parameter(model.lm_head.weight.detach()[rows].clone()), stages[group.rank],
                              pipeline_spec(stages, tokens)[group.rank])


def vocab_pipeline_step(parts: VocabPipelineParts, idx: Tensor, target: Tensor, optimizer,
                        n_microbatches: int) -> Tensor:
    """One training step (see the module's text); returns the batch's mean loss on every rank."""
    group, spec, m = parts.group, parts.spec, n_microbatches
    j, last = group.rank, group.size - 1
    split_microbatches(target, m)           # a batch that m does not divide: the same clear error on every rank
    optimizer.zero_grad()
    tokens = embed_forward(parts.embedding_rows, parts.rows.start, idx, group, owner=0)
    inputs = split_microbatches(tokens.requires_grad_(), m) if j == 0 else [None] * m
    saved, outputs, handles = [], [], []
    for i in range(m):
        x = inputs[i] if j == 0 else group.recv(spec.input_buffer(group.device), j - 1, tag=forward_tag(i)).requires_grad_()
        y = parts.body(x)
        saved.append(x)
        outputs.append(y)
        if j < last:
            handles.append(group.isend(y.detach(), j + 1, tag=forward_tag(i)))
    hidden = torch.cat([y.detach() for y in outputs]) if j == last else None
    loss, grad_hidden = head_forward_backward(parts.head_rows, parts.rows.start, hidden, target, group, owner=last)
    grads = split_microbatches(grad_hidden, m) if j == last else [None] * m
    for i in range(m):
        g = grads[i] if j == last else group.recv(spec.output_buffer(group.device), j + 1, tag=backward_tag(i))
        torch.autograd.backward(outputs[i], g)
        if j > 0:
            handles.append(group.isend(saved[i].grad, j - 1, tag=backward_tag(i)))
    for h in handles:
        h.wait()
    embed_backward(parts.embedding_rows, parts.rows.start, idx, tokens.grad if j == 0 else None, group, owner=0)
    optimizer.step()
    return loss

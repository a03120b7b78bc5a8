"""Provided code of homework 3's bonus 3.6: compressed_layers (layer_sites.py), which compresses the
messages of chosen CharTransformer blocks in one process for the notebook's Part D sweep, and the
finding Part D.2 reproduces, at a tiny size: where the compressed message is decides whether the first
or the last block hurts most.

Compressors here are written in the test (the kit's own TopK and LowRank are student code): Halve, a
linear one whose effect is easy to write out by hand, and KeepLargest, top-k by magnitude.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from minitorch_dist.compression.common import Compressor
from minitorch_dist.compression.layer_sites import compressed_layers, round_trip
from minitorch_dist.compression.stage_split import Identity
from minitorch_dist.data import CharTokenizer, char_batches, load_text
from minitorch_dist.models import CharTransformer


class Halve(Compressor):
    """x -> x / 2 (a payload of one tensor)."""

    def compress(self, x):
        return (x / 2,)

    def decompress(self, payload, numel, dtype):
        return payload[0].to(dtype).reshape(numel)

    def payload_bytes(self, numel, dtype=torch.float32):
        return numel * 4

    def aggregate(self, payload, numel, dtype, group, op="avg"):
        raise NotImplementedError


class KeepLargest(Halve):
    """The `fraction` of elements of largest magnitude, zeros elsewhere."""

    def __init__(self, fraction):
        self.fraction = fraction

    def compress(self, x):
        keep = x.abs().topk(max(1, int(x.numel() * self.fraction))).indices
        return (torch.zeros_like(x).index_put_((keep,), x[keep]),)


def tiny_model(layers=3, seed=0):
    return CharTransformer(20, d_model=8, n_heads=2, n_layers=layers, max_len=6, seed=seed, tie_weights=False)


def by_hand(model, idx, blocks, site, backward):
    """The model's forward with the chosen messages halved, written out; straight-through gradient
    (value halved, gradient not) unless backward."""
    def squeeze(x):
        return x / 2 if backward else x - (x / 2).detach()

    h = model.tok_emb(idx) + model.pos_emb(torch.arange(idx.shape[1]))
    for i, b in enumerate(model.blocks):
        if site == "branch" and i in blocks:
            h = h + squeeze(b.attn(b.ln1(h)))
            h = h + squeeze(b.fc_proj(b.act(b.fc(b.ln2(h)))))
        else:
            h = b(h)
            if site == "block" and i in blocks:
                h = squeeze(h)
    return model.lm_head(model.ln_f(h))


def loss_and_grads(model, forward, idx, targets):
    model.zero_grad(set_to_none=True)
    loss = F.cross_entropy(forward().flatten(0, 1), targets.flatten())
    loss.backward()
    return loss.item(), [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("site", ["block", "branch"])
@pytest.mark.parametrize("backward", [False, True])
def test_compressed_messages_match_the_forward_written_out(site, backward):
    torch.manual_seed(0)
    model, idx, targets = tiny_model().double(), torch.randint(0, 20, (2, 6)), torch.randint(0, 20, (2, 6))
    expected = loss_and_grads(model, lambda: by_hand(model, idx, {0, 2}, site, backward), idx, targets)
    with compressed_layers(model, [2, 0], Halve, site=site, backward=backward):
        got = loss_and_grads(model, lambda: model(idx), idx, targets)
    assert got[0] == pytest.approx(expected[0], rel=1e-12, abs=0)
    for g, e in zip(got[1], expected[1]):
        torch.testing.assert_close(g, e, rtol=1e-10, atol=1e-12)
    # the hooks are gone on exit: the plain model again
    plain = loss_and_grads(model, lambda: by_hand(model, idx, set(), site, backward), idx, targets)
    after = loss_and_grads(model, lambda: model(idx), idx, targets)
    assert after[0] == plain[0] and all(torch.equal(a, p) for a, p in zip(after[1], plain[1]))


def test_identity_and_no_blocks_change_nothing():
    model, idx = tiny_model(), torch.randint(0, 20, (2, 6))
    plain = model(idx)
    with compressed_layers(model, range(3), Identity, site="block", backward=True):
        assert torch.equal(model(idx), plain)
    with compressed_layers(model, [], Halve):
        assert torch.equal(model(idx), plain)
    x = torch.randn(3, 4)
    assert torch.equal(round_trip(Halve(), x), x / 2)


def test_bad_arguments_are_named():
    model = tiny_model()
    with pytest.raises(ValueError, match="site must be one of"):
        with compressed_layers(model, [0], Halve, site="residual"):
            pass
    with pytest.raises(ValueError, match=r"blocks must be ints in 0..2 .* got \[3\]"):
        with compressed_layers(model, [0, 3], Halve):
            pass
    with pytest.raises(ValueError, match="make\\(\\) must return a Compressor"):
        with compressed_layers(model, [0], Halve()):            # an instance, not a function that makes one
            pass


def pretrained_tiny(seed, steps=150, layers=4):
    """A 4-block CharTransformer (C = 16) trained `steps` uncompressed Adam steps on the kit's text."""
    tokenizer = CharTokenizer(load_text())
    tokens = tokenizer.encode(load_text())
    model = CharTransformer(tokenizer.vocab_size, d_model=16, n_heads=2, n_layers=layers, max_len=16, seed=seed,
                            tie_weights=False)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for step in range(steps):
        x, y = char_batches(tokens, 8, 16, step, seed=seed)
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x).flatten(0, 1), y.flatten()).backward()
        opt.step()
    return model, char_batches(tokens, 64, 16, 10 ** 6, seed=seed)


@pytest.mark.parametrize("seed", [0, 1])
def test_where_compression_hurts_depends_on_the_site(seed):
    """Top-1/8 of one block's messages, no fine-tuning. At the branch site (attention and MLP outputs, what
    tensor parallelism all-reduces) the first block hurts more than the last, as the activation-compression
    study reports; at the block site (the residual stream, what a stage boundary sends) the last block
    hurts more, since its error reaches the head with no block after it. Margins measured: branch, first -
    last 0.076 to 0.20 on seeds 0-7 at 150 steps (0.044 to 0.15 on seeds 0-11 at 100 steps); block, last -
    first 0.036 to 0.22 on seeds 0-7 at 150 steps."""
    model, (x, y) = pretrained_tiny(seed)

    def loss(block, site):
        with torch.no_grad(), compressed_layers(model, [block], lambda: KeepLargest(1 / 8), site=site):
            return F.cross_entropy(model(x).flatten(0, 1), y.flatten()).item()
    first_branch, last_branch = loss(0, "branch"), loss(3, "branch")
    first_block, last_block = loss(0, "block"), loss(3, "block")
    assert first_branch - last_branch > 0.02, (first_branch, last_branch)
    assert last_block - first_block > 0.01, (first_block, last_block)

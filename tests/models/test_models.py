"""MLP and CharTransformer: seeded init (in one process and across gloo ranks), tied weights,
causal mask, length check, size and speed, and that both actually learn their data."""

import hashlib
import statistics
import time

import pytest
import torch
import torch.nn.functional as F

from minitorch_dist import launch
from minitorch_dist.data import CharTokenizer, char_batches, global_batches, load_text, make_classification
from minitorch_dist.models import MLP, CharTransformer


def checksum(model: torch.nn.Module) -> str:
    """sha256 over every parameter's name, shape and bytes (bitwise identity, not closeness)."""
    h = hashlib.sha256()
    for name, p in model.named_parameters():
        h.update(name.encode())
        h.update(str(tuple(p.shape)).encode())
        h.update(p.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def _models(seed=0):
    return MLP(seed=seed), CharTransformer(61, seed=seed)


# --------------------------------------------------------------------------- seeded init


@pytest.mark.parametrize("build", [lambda s: MLP(seed=s), lambda s: CharTransformer(61, seed=s)],
                         ids=["mlp", "transformer"])
def test_same_seed_same_bits_whatever_the_global_rng(build):
    torch.manual_seed(1)
    a = build(0)
    torch.manual_seed(2)
    torch.rand(100)
    state = torch.get_rng_state()
    b = build(0)
    assert torch.equal(torch.get_rng_state(), state), "construction must not advance the global RNG"
    assert checksum(a) == checksum(b)
    assert checksum(build(1)) != checksum(a)
    for (name, pa), pb in zip(a.named_parameters(), b.parameters()):
        assert torch.equal(pa, pb), name


def _checksums_on_rank(group):
    mlp, lm = _models(seed=3)
    idx = torch.arange(2 * 20).reshape(2, 20) % 61
    with torch.no_grad():
        logits = lm(idx)
    return group.rank, checksum(mlp), checksum(lm), logits


def test_same_seed_same_bits_in_every_process():
    mlp, lm = _models(seed=3)
    idx = torch.arange(2 * 20).reshape(2, 20) % 61
    with torch.no_grad():
        logits = lm(idx)
    results = launch(_checksums_on_rank, 2)
    assert [r[0] for r in results] == [0, 1]
    for _, mlp_sum, lm_sum, rank_logits in results:
        assert mlp_sum == checksum(mlp)
        assert lm_sum == checksum(lm)
        assert torch.equal(rank_logits, logits)                # both single-threaded (conftest)


def test_forward_backward_is_bitwise_repeatable():
    lm = CharTransformer(61)
    idx = torch.randint(0, 61, (4, 32), generator=torch.Generator().manual_seed(0))
    grads = []
    for _ in range(2):
        lm.zero_grad()
        logits = lm(idx)
        logits.square().mean().backward()
        grads.append([p.grad.clone() for p in lm.parameters()])
    assert all(torch.equal(g1, g2) for g1, g2 in zip(*grads))


# --------------------------------------------------------------------------- MLP


@pytest.mark.parametrize("depth", [0, 1, 2, 4])
def test_mlp_layers_shapes_and_errors(depth):
    m = MLP(d_in=5, d_hidden=7, d_out=3, depth=depth)
    linears = [layer for layer in m.net if isinstance(layer, torch.nn.Linear)]
    relus = [layer for layer in m.net if isinstance(layer, torch.nn.ReLU)]
    assert len(linears) == depth + 1 and len(relus) == depth
    expected = (5 * 7 + 7 + (depth - 1) * (7 * 7 + 7) + 7 * 3 + 3) if depth else 5 * 3 + 3
    assert sum(p.numel() for p in m.parameters()) == expected
    out = m(torch.randn(9, 5))
    assert out.shape == (9, 3) and out.dtype == torch.float32
    with pytest.raises(ValueError, match=r"\(B, 5\)"):
        m(torch.randn(9, 4))


def test_mlp_learns_make_classification():
    x, y = make_classification(n=512, d_in=16, n_classes=4, seed=0)
    model = MLP(d_in=16, d_hidden=32, d_out=4, depth=2, seed=0)
    with torch.no_grad():
        start = (model(x).argmax(1) == y).float().mean().item()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    steps = 0
    for epoch in range(40):                                     # 40 epochs x 8 batches = 320 steps
        for batch in global_batches(512, 64, seed=0, epoch=epoch):
            loss = F.cross_entropy(model(x[batch]), y[batch])
            opt.zero_grad()
            loss.backward()
            opt.step()
            steps += 1
    with torch.no_grad():
        accuracy = (model(x).argmax(1) == y).float().mean().item()
    assert steps == 320
    assert start < 0.5 and accuracy > 0.9, (start, accuracy)


# --------------------------------------------------------------------------- CharTransformer


def test_tied_weights_are_one_parameter():
    tied, untied = CharTransformer(60), CharTransformer(60, tie_weights=False)
    assert tied.lm_head.weight is tied.tok_emb.weight
    assert untied.lm_head.weight is not untied.tok_emb.weight
    n_tied = sum(p.numel() for p in tied.parameters())
    assert n_tied == 29440                                      # ~30k with the defaults
    assert sum(p.numel() for p in untied.parameters()) == n_tied + 60 * 32
    assert sum(1 for p in tied.parameters() if p is tied.tok_emb.weight) == 1
    assert list(tied.buffers()) == []


def test_tied_gradient_sums_both_uses():
    tied = CharTransformer(20, seed=5)
    untied = CharTransformer(20, seed=5, tie_weights=False)
    untied.load_state_dict({k: v for k, v in tied.state_dict().items()})   # lm_head.weight = tok_emb copy
    assert torch.equal(untied.lm_head.weight, untied.tok_emb.weight)
    idx = torch.randint(0, 20, (3, 10), generator=torch.Generator().manual_seed(1))
    for m in (tied, untied):
        F.cross_entropy(m(idx).reshape(-1, 20), idx.roll(-1, 1).reshape(-1)).backward()
    both = untied.tok_emb.weight.grad + untied.lm_head.weight.grad
    torch.testing.assert_close(tied.tok_emb.weight.grad, both)
    assert not torch.allclose(untied.lm_head.weight.grad, torch.zeros_like(both))


@pytest.mark.parametrize("t_changed", [0, 7, 31])
def test_causal_mask_future_tokens_do_not_leak(t_changed):
    lm = CharTransformer(61, seed=2)
    idx = torch.randint(0, 61, (3, 32), generator=torch.Generator().manual_seed(0))
    changed = idx.clone()
    changed[:, t_changed] = (changed[:, t_changed] + 1) % 61
    with torch.no_grad():
        a, b = lm(idx), lm(changed)
    assert a.shape == (3, 32, 61)
    assert torch.equal(a[:, :t_changed], b[:, :t_changed])
    assert not torch.allclose(a[:, t_changed], b[:, t_changed])


def test_sequence_longer_than_max_len_is_refused():
    lm = CharTransformer(61, max_len=16)
    assert lm(torch.zeros(2, 16, dtype=torch.long)).shape == (2, 16, 61)
    with pytest.raises(ValueError, match=r"T=17.*max_len=16"):
        lm(torch.zeros(2, 17, dtype=torch.long))
    with pytest.raises(ValueError, match=r"\(B, T\)"):
        lm(torch.zeros(17, dtype=torch.long))
    with pytest.raises(ValueError, match="n_heads"):
        CharTransformer(61, d_model=30, n_heads=4)


def test_forward_backward_takes_milliseconds():
    lm = CharTransformer(61)
    idx = torch.randint(0, 61, (8, 32), generator=torch.Generator().manual_seed(0))
    times = []
    for _ in range(12):
        start = time.perf_counter()
        lm(idx).sum().backward()
        times.append(time.perf_counter() - start)
    assert statistics.median(times[2:]) < 0.05, times           # a few ms when the machine is idle


def test_char_transformer_loss_drops_on_the_text():
    text = load_text()
    tok = CharTokenizer(text)
    tokens = tok.encode(text)
    lm = CharTransformer(tok.vocab_size, seed=0)
    opt = torch.optim.AdamW(lm.parameters(), lr=1e-2, weight_decay=0.0)
    losses = []
    for step in range(100):
        x, y = char_batches(tokens, batch_size=16, seq_len=32, step=step, seed=0)
        loss = F.cross_entropy(lm(x).reshape(-1, tok.vocab_size), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    initial, final = losses[0], statistics.mean(losses[-10:])
    assert abs(initial - torch.log(torch.tensor(float(tok.vocab_size))).item()) < 0.1   # starts near uniform
    assert final < initial - 0.7, (initial, final)

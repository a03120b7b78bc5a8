"""make_classification, the shipped text and its tokenizer, char_batches, and the sharding helpers
(shard_indices, global_batches, local_part): determinism, shapes, coverage and errors."""

import string

import pytest
import torch
import torch.nn.functional as F

from minitorch_dist.data import (CharTokenizer, char_batches, global_batches, load_text, local_part,
                                 make_classification, shard_indices)
from minitorch_dist.models import MLP


# --------------------------------------------------------------------------- make_classification


def test_classification_is_deterministic_and_balanced():
    torch.manual_seed(1)
    x, y = make_classification(n=300, d_in=8, n_classes=5, seed=4)
    torch.manual_seed(2)
    state = torch.get_rng_state()
    x2, y2 = make_classification(n=300, d_in=8, n_classes=5, seed=4)
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(x, x2) and torch.equal(y, y2)
    assert x.shape == (300, 8) and x.dtype == torch.float32
    assert y.shape == (300,) and y.dtype == torch.int64
    assert not torch.equal(make_classification(n=300, d_in=8, n_classes=5, seed=5)[0], x)
    for seed in range(4):
        counts = torch.bincount(make_classification(seed=seed)[1], minlength=4)
        assert counts.min() >= 512 // 8, counts                # no rare class (>= half the fair share)


def test_classification_prefix_does_not_depend_on_n():
    x_small, y_small = make_classification(n=50)
    x_big, y_big = make_classification(n=512)
    assert torch.equal(x_small, x_big[:50]) and torch.equal(y_small, y_big[:50])
    assert make_classification(n=0)[0].shape == (0, 16)
    with pytest.raises(ValueError, match="n=-1"):
        make_classification(n=-1)


# --------------------------------------------------------------------------- text and tokenizer


def test_text_is_small_plain_ascii():
    text = load_text()
    assert 10_000 <= len(text.encode()) <= 20_000
    allowed = set(string.ascii_letters + string.digits + string.punctuation + " \n")
    assert set(text) <= allowed, set(text) - allowed
    assert load_text() == text


def test_tokenizer_round_trip_and_errors():
    text = load_text()
    tok = CharTokenizer(text)
    assert tok.chars == sorted(set(text)) and tok.vocab_size == len(set(text))
    ids = tok.encode(text)
    assert ids.dtype == torch.int64 and ids.shape == (len(text),)
    assert int(ids.min()) >= 0 and int(ids.max()) < tok.vocab_size
    assert tok.decode(ids) == text
    assert tok.decode(tok.encode("ring")) == "ring" == tok.decode(tok.encode("ring").tolist())
    assert tok.encode("").shape == (0,)
    with pytest.raises(ValueError, match="'~'"):
        CharTokenizer("abc").encode("ab~")
    with pytest.raises(ValueError, match="token id 3"):
        CharTokenizer("abc").decode(torch.tensor([0, 3]))
    with pytest.raises(ValueError, match="non-empty"):
        CharTokenizer("")


def test_char_batches_are_shifted_windows_fixed_by_seed_and_step():
    text = load_text()
    tok = CharTokenizer(text)
    tokens = tok.encode(text)
    x, y = char_batches(tokens, batch_size=8, seq_len=32, step=3, seed=0)
    assert x.shape == y.shape == (8, 32) and x.dtype == y.dtype == torch.int64
    assert torch.equal(x[:, 1:], y[:, :-1])
    for row_x, row_y in zip(x, y):
        window = tok.decode(row_x) + tok.decode(row_y[-1:])
        assert window in text                                   # y is x shifted by one, inside the text
    again = char_batches(tokens, batch_size=8, seq_len=32, step=3, seed=0)
    assert torch.equal(again[0], x) and torch.equal(again[1], y)
    assert not torch.equal(char_batches(tokens, 8, 32, step=4, seed=0)[0], x)
    assert not torch.equal(char_batches(tokens, 8, 32, step=3, seed=1)[0], x)
    assert not torch.equal(char_batches(tokens, 8, 32, step=0, seed=3)[0], x)   # (0, 3) != (3, 0)


def test_char_batches_errors_and_edge():
    tokens = torch.arange(10)
    x, y = char_batches(tokens, batch_size=5, seq_len=9, step=0)  # one possible window
    assert torch.equal(x, torch.arange(9).expand(5, 9)) and torch.equal(y, x + 1)
    with pytest.raises(ValueError, match="seq_len <= 9"):
        char_batches(tokens, batch_size=2, seq_len=10, step=0)
    with pytest.raises(ValueError, match="1-D"):
        char_batches(tokens.reshape(2, 5), batch_size=2, seq_len=3, step=0)
    with pytest.raises(ValueError, match="batch_size"):
        char_batches(tokens, batch_size=0, seq_len=3, step=0)


# --------------------------------------------------------------------------- shards


@pytest.mark.parametrize("n,world_size", [(0, 1), (1, 1), (10, 3), (16, 4), (17, 5), (3, 6), (100, 7)])
@pytest.mark.parametrize("drop_last", [True, False])
@pytest.mark.parametrize("seed", [None, 0, 11])
def test_shards_are_disjoint_and_cover(n, world_size, drop_last, seed):
    shards = [shard_indices(n, r, world_size, seed=seed, epoch=2, drop_last=drop_last)
              for r in range(world_size)]
    assert all(s.dtype == torch.int64 for s in shards)
    joined = torch.cat(shards)
    assert len(set(joined.tolist())) == len(joined)             # disjoint
    sizes = [len(s) for s in shards]
    if drop_last:
        assert sizes == [n // world_size] * world_size
        assert n - len(joined) < world_size
    else:
        assert max(sizes) - min(sizes) <= 1
        assert sorted(joined.tolist()) == list(range(n))        # every index exactly once
    if seed is None:
        assert joined.tolist() == list(range(len(joined)))      # contiguous, in order
    again = [shard_indices(n, r, world_size, seed=seed, epoch=2, drop_last=drop_last) for r in range(world_size)]
    assert all(torch.equal(a, b) for a, b in zip(shards, again))


def test_shards_reshuffle_with_epoch_and_seed():
    base = shard_indices(100, 1, 4, seed=0, epoch=0)
    assert not torch.equal(base, shard_indices(100, 1, 4, seed=0, epoch=1))
    assert not torch.equal(base, shard_indices(100, 1, 4, seed=1, epoch=0))
    assert torch.equal(shard_indices(10, 1, 3), torch.tensor([3, 4, 5]))
    assert torch.equal(shard_indices(10, 1, 3, drop_last=False), torch.tensor([4, 5, 6]))


def test_shard_errors_say_which_argument():
    with pytest.raises(ValueError, match="world_size must be >= 1"):
        shard_indices(10, 0, 0)
    with pytest.raises(ValueError, match=r"rank 3 is outside \[0, 3\)"):
        shard_indices(10, 3, 3)
    with pytest.raises(ValueError, match=r"rank -1"):
        shard_indices(10, -1, 3)
    with pytest.raises(ValueError, match="n=-2"):
        shard_indices(-2, 0, 3)


# --------------------------------------------------------------------------- global batches and local parts


def test_global_batches_cut_one_permutation():
    batches = global_batches(103, 10, seed=3, epoch=1)
    assert len(batches) == 10 and all(b.shape == (10,) and b.dtype == torch.int64 for b in batches)
    joined = torch.cat(batches).tolist()
    assert len(set(joined)) == 100 and all(0 <= i < 103 for i in joined)
    assert all(torch.equal(a, b) for a, b in zip(batches, global_batches(103, 10, seed=3, epoch=1)))
    assert not torch.equal(batches[0], global_batches(103, 10, seed=3, epoch=2)[0])
    assert global_batches(5, 10) == []
    with pytest.raises(ValueError, match="batch_size"):
        global_batches(10, 0)
    with pytest.raises(ValueError, match="n=-1"):
        global_batches(-1, 2)


@pytest.mark.parametrize("world_size", [1, 2, 3, 4, 6])
def test_local_parts_concatenate_to_the_global_batch(world_size):
    for batch in global_batches(100, 12, seed=0, epoch=0):
        parts = [local_part(batch, r, world_size) for r in range(world_size)]
        assert all(len(p) == 12 // world_size for p in parts)
        assert torch.equal(torch.cat(parts), batch)
    tokens = torch.arange(200)
    x, _ = char_batches(tokens, batch_size=12, seq_len=5, step=0)
    assert torch.equal(torch.cat([local_part(x, r, world_size) for r in range(world_size)]), x)


def test_local_parts_give_the_global_batch_gradient():
    """The mean of the ranks' gradients on their parts is the gradient on the whole global batch."""
    x, y = make_classification(n=64)
    model = MLP(seed=0)
    batch = global_batches(64, 12, seed=0)[0]
    F.cross_entropy(model(x[batch]), y[batch]).backward()
    whole = [p.grad.clone() for p in model.parameters()]
    world_size = 3
    summed = [torch.zeros_like(g) for g in whole]
    for rank in range(world_size):
        model.zero_grad()
        mine = local_part(batch, rank, world_size)
        F.cross_entropy(model(x[mine]), y[mine]).backward()
        summed = [s + p.grad for s, p in zip(summed, model.parameters())]
    for s, g in zip(summed, whole):
        torch.testing.assert_close(s / world_size, g)


def test_local_part_errors_suggest_a_size():
    batch = torch.arange(10)
    with pytest.raises(ValueError, match=r"10 samples .* world_size=4 .* divisible by 4 \(e.g. 8 or 12\)"):
        local_part(batch, 0, 4)
    with pytest.raises(ValueError, match=r"e.g. 4\)"):
        local_part(torch.arange(3), 0, 4)
    with pytest.raises(ValueError, match=r"rank 4 is outside"):
        local_part(torch.arange(8), 4, 4)
    with pytest.raises(ValueError, match="world_size must be >= 1"):
        local_part(torch.arange(8), 0, 0)

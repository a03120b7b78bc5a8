"""A tiny text shipped with the kit, a character tokenizer and seeded language-model batches.

    text = load_text()                                   # ~13 KB of plain ASCII prose
    tok = CharTokenizer(text)                            # tok.vocab_size == 61
    tokens = tok.encode(text)                            # (len(text),) int64
    x, y = char_batches(tokens, batch_size=8, seq_len=32, step=0)   # y[:, t] == x[:, t+1]
"""

from __future__ import annotations

from importlib import resources

import torch
from torch import Tensor

from .seeding import generator

TEXT_FILE = "tiny_text.txt"


def load_text() -> str:
    """The text in minitorch_dist/data/tiny_text.txt (original prose on messages, rings and gradients)."""
    return resources.files(__package__).joinpath(TEXT_FILE).read_text(encoding="ascii")


class CharTokenizer:
    """Characters <-> token ids, over the sorted set of characters of a text.

    Attributes:
        chars: the vocabulary, sorted; token id i is chars[i].
        vocab_size: len(chars).
    """

    def __init__(self, text: str):
        if not text:
            raise ValueError("CharTokenizer needs a non-empty text to build its vocabulary")
        self.chars: list[str] = sorted(set(text))
        self.vocab_size: int = len(self.chars)
        self._index = {c: i for i, c in enumerate(self.chars)}

    def encode(self, s: str) -> Tensor:
        """str of length n -> LongTensor (n,) of token ids. Raises ValueError naming an unknown character."""
        ids = []
        for pos, c in enumerate(s):
            if c not in self._index:
                raise ValueError(f"character {c!r} (position {pos}) is not in the tokenizer's vocabulary of "
                                 f"{self.vocab_size} characters; build the CharTokenizer from a text that "
                                 f"contains it")
            ids.append(self._index[c])
        return torch.tensor(ids, dtype=torch.long)

    def decode(self, ids: Tensor | list[int]) -> str:
        """Token ids (any shape, read in row-major order; or a list of ints) -> str."""
        flat = ids.reshape(-1).tolist() if isinstance(ids, Tensor) else list(ids)
        for i in flat:
            if not 0 <= i < self.vocab_size:
                raise ValueError(f"token id {i} is outside [0, {self.vocab_size}) for this tokenizer")
        return "".join(self.chars[i] for i in flat)

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={self.vocab_size})"


def char_batches(tokens: Tensor, batch_size: int, seq_len: int, step: int, seed: int = 0) -> tuple[Tensor, Tensor]:
    """The language-model batch of training step `step`: random windows of `tokens` and their next tokens.

    Shapes: tokens (N,) int64, N >= seq_len + 1 -> x (batch_size, seq_len) int64,
            y (batch_size, seq_len) int64 with y[b, t] = tokens[start_b + t + 1] = x[b, t + 1].
    Steps:  1. a generator seeded from (seed, step); 2. batch_size window starts drawn
            uniformly from [0, N - seq_len - 1]; 3. x = the windows, y = the windows shifted by one.
    The same (tokens, batch_size, seq_len, step, seed) give the same global batch in every
    process; a data-parallel rank takes its rows with data.local_part(x, rank, world_size).
    """
    if tokens.dim() != 1:
        raise ValueError(f"char_batches expects a 1-D tensor of token ids; got shape {tuple(tokens.shape)}")
    if batch_size < 1 or seq_len < 1:
        raise ValueError(f"batch_size and seq_len must be >= 1; got batch_size={batch_size}, seq_len={seq_len}")
    n = tokens.shape[0]
    if n < seq_len + 1:
        raise ValueError(f"{n} tokens are too few for windows of seq_len={seq_len} plus one target; "
                         f"use seq_len <= {n - 1}")
    starts = torch.randint(0, n - seq_len, (batch_size,), generator=generator(seed, step))   # (B,)
    window = starts[:, None] + torch.arange(seq_len)                                         # (B, T)
    tokens = tokens.long()
    return tokens[window], tokens[window + 1]

"""CharTransformer: a tiny GPT-style character language model, bitwise deterministic on CPU.

Token + learned position embeddings, `n_layers` pre-LayerNorm blocks (causal multi-head
self-attention written out with matmuls and a mask; a 4x GELU MLP), a final LayerNorm and
an LM head. Attention avoids nn.MultiheadAttention and scaled_dot_product_attention, whose
kernels may pick different code paths; plain matmuls give the same bits on every CPU run.
Layout follows nanoGPT's model.py (Karpathy), scaled down to ~30k parameters.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention in which position t only sees positions <= t.

    Shapes: x (B, T, C) -> (B, T, C), C = d_model = n_heads * hs.
    Steps:  1. q, k, v = split(x @ W_qkv + b);  2. att = softmax(mask(q k^T / sqrt(hs)));
            3. y = att v, heads concatenated;   4. y @ W_proj + b.
    """

    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x: Tensor) -> Tensor:
        B, T, C = x.shape
        hs = C // self.n_heads
        q, k, v = self.qkv(x).split(C, dim=2)                          # 3 x (B, T, C)
        q = q.view(B, T, self.n_heads, hs).transpose(1, 2)             # (B, nh, T, hs)
        k = k.view(B, T, self.n_heads, hs).transpose(1, 2)             # (B, nh, T, hs)
        v = v.view(B, T, self.n_heads, hs).transpose(1, 2)             # (B, nh, T, hs)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))        # (B, nh, T, T)
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()   # (T, T), True = may look
        att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)  # (B, nh, T, T)
        y = att @ v                                                    # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)               # (B, T, C)
        return self.proj(y)                                            # (B, T, C)


class Block(nn.Module):
    """Pre-LayerNorm transformer block: x + attn(ln1(x)), then + mlp(ln2(x)). Shapes: (B, T, C) -> same."""

    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, n_heads)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc = nn.Linear(d_model, 4 * d_model)
        self.act = nn.GELU()
        self.fc_proj = nn.Linear(4 * d_model, d_model)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.ln1(x))                                 # (B, T, C)
        x = x + self.fc_proj(self.act(self.fc(self.ln2(x))))           # (B, T, 4C) inside
        return x


class CharTransformer(nn.Module):
    """Character-level causal language model.

    Shapes: forward(idx (B, T) int64, T <= max_len) -> logits (B, T, vocab_size);
            logits[:, t] depends on idx[:, :t+1] only.
    Parameters (defaults, vocab 60): tok_emb.weight (V, C), pos_emb.weight (max_len, C),
    per block ln1/ln2 (C,), attn.qkv (3C, C), attn.proj (C, C), fc (4C, C), fc_proj (C, 4C)
    with biases, ln_f (C,), lm_head.weight (V, C), no bias: 29,440 parameters, ~30k.
    With tie_weights the LM head weight IS the token embedding weight (one Parameter object,
    listed once by .parameters(); its gradient sums both uses). The model has no buffers.
    Init (nanoGPT): Linear and Embedding weights N(0, 0.02), the residual projections
    (attn.proj, fc_proj) N(0, 0.02/sqrt(2*n_layers)), biases 0, LayerNorm 1/0; drawn from
    torch.Generator().manual_seed(seed) in module order, so the same arguments give
    bitwise-identical models in every process; the global RNG is neither read nor advanced.

    Args:
        vocab_size: number of distinct tokens (CharTokenizer.vocab_size).
        d_model: embedding width C; divisible by n_heads.
        n_heads: attention heads.
        n_layers: transformer blocks.
        max_len: longest sequence (position embeddings).
        seed: seed of the initialisation.
        tie_weights: share the token embedding and LM head weight.
    """

    def __init__(self, vocab_size: int, d_model: int = 32, n_heads: int = 4, n_layers: int = 2,
                 max_len: int = 64, seed: int = 0, tie_weights: bool = True):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}; "
                             f"pick d_model a multiple of n_heads")
        if min(vocab_size, d_model, n_heads, max_len) < 1 or n_layers < 0:
            raise ValueError(f"CharTransformer needs vocab_size, d_model, n_heads, max_len >= 1 and "
                             f"n_layers >= 0; got {vocab_size}, {d_model}, {n_heads}, {max_len}, {n_layers}")
        self.vocab_size, self.d_model, self.n_heads = vocab_size, d_model, n_heads
        self.n_layers, self.max_len, self.tie_weights = n_layers, max_len, tie_weights
        with torch.random.fork_rng(devices=[]):   # the layers' own init draws from the global RNG
            self.tok_emb = nn.Embedding(vocab_size, d_model)
            self.pos_emb = nn.Embedding(max_len, d_model)
            self.blocks = nn.ModuleList([Block(d_model, n_heads) for _ in range(n_layers)])
            self.ln_f = nn.LayerNorm(d_model)
            self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        if tie_weights:
            self.lm_head.weight = self.tok_emb.weight                  # the same Parameter object
        self.reset_parameters(seed)

    @torch.no_grad()
    def reset_parameters(self, seed: int = 0) -> None:
        """Re-draw every parameter from a generator seeded with `seed` (in place)."""
        gen = torch.Generator().manual_seed(seed)
        residual_std = 0.02 / math.sqrt(2 * max(self.n_layers, 1))
        for name, module in self.named_modules():                      # a fixed order
            if isinstance(module, nn.LayerNorm):
                module.weight.fill_(1.0)
                module.bias.zero_()
            elif isinstance(module, nn.Embedding):
                module.weight.normal_(0.0, 0.02, generator=gen)
            elif isinstance(module, nn.Linear):
                if module is self.lm_head and self.tie_weights:
                    continue                                           # its weight is tok_emb's
                std = residual_std if name.endswith(("attn.proj", "fc_proj")) else 0.02
                module.weight.normal_(0.0, std, generator=gen)
                if module.bias is not None:
                    module.bias.zero_()

    def forward(self, idx: Tensor) -> Tensor:
        """idx (B, T) int64 token ids, T <= max_len -> logits (B, T, vocab_size)."""
        if idx.dim() != 2:
            raise ValueError(f"CharTransformer expects idx of shape (B, T); got {tuple(idx.shape)}")
        B, T = idx.shape
        if T > self.max_len:
            raise ValueError(f"sequence length T={T} is longer than max_len={self.max_len}; "
                             f"cut the input to at most {self.max_len} tokens or build the model "
                             f"with max_len >= {T}")
        pos = torch.arange(T, device=idx.device)                       # (T,)
        x = self.tok_emb(idx) + self.pos_emb(pos)                      # (B, T, C)
        for block in self.blocks:
            x = block(x)                                               # (B, T, C)
        return self.lm_head(self.ln_f(x))                              # (B, T, V)

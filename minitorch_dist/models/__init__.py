"""Small models that homework 2 trains with data parallelism (CPU, seconds, seeded init).

    from minitorch_dist.models import MLP, CharTransformer
    model = MLP(seed=0)                          # same seed: bitwise-identical parameters on every rank
    lm = CharTransformer(vocab_size=60)          # tied token embedding / LM head

Both models initialise their parameters from a private torch.Generator seeded with `seed`,
so every process that builds them with the same arguments holds the same bits, whatever the
global RNG state (which construction leaves untouched).
"""

from .char_transformer import CharTransformer
from .mlp import MLP

__all__ = ["MLP", "CharTransformer"]

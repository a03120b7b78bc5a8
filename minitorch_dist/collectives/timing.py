"""Provided: is a ping-pong measurement trustworthy? Timing on a laptop that is doing other things
(a browser, an editor, the other rank on an oversubscribed core) is noise, and a fit through noise
gives nonsense (alpha of milliseconds, small messages slower than large ones) without saying so.

    passes = [ping_pong(group, sizes) for _ in range(3)]         # on rank 0: three {size: seconds}
    best = best_of(passes)                                       # per size, the fastest pass
    for line in noise_report(passes): print(line)                # [] when the measurement looks sound

Best of several is the usual remedy: noise only ever adds time, so the minimum over passes is
the closest to what the network does.
"""

from __future__ import annotations

import os

__all__ = ["best_of", "noise_report", "SPREAD_LIMIT"]

SPREAD_LIMIT = 1.5          # a size whose slowest pass takes 1.5x its fastest is noisy


def best_of(passes: list[dict[int, float]]) -> dict[int, float]:
    """{size: the smallest time over the passes}, in the first pass's order."""
    return {n: min(p[n] for p in passes) for n in passes[0]}


def noise_report(passes: list[dict[int, float]], load: float | None = None, cores: int | None = None) -> list[str]:
    """Sentences on what makes these measurements doubtful, each with its remedy ([] when none).

    Looks at: the machine's load against its cores; sizes whose passes disagree by more than
    SPREAD_LIMIT; a message 20% slower than one 16x larger (in the best of the passes).
    """
    load = os.getloadavg()[0] if load is None and hasattr(os, "getloadavg") else load
    cores = cores or os.cpu_count() or 1
    found = []
    if load is not None and load > cores:
        found.append(f"the machine is busy: load average {load:.1f} on {cores} cores, so the two ranks share "
                     "cores with other work; close other programs, or run under mpirun on idle cores")
    if len(passes) > 1:
        spread = {n: max(p[n] for p in passes) / min(p[n] for p in passes) for n in passes[0]
                  if min(p[n] for p in passes) > 0}
        noisy = [n for n, s in spread.items() if s > SPREAD_LIMIT]
        if noisy:
            worst = max(noisy, key=spread.get)
            found.append(f"repeated passes disagree at {len(noisy)} of {len(spread)} sizes (up to {spread[worst]:.1f}x "
                         f"at {worst} bytes); the fit uses the best pass of each size: add passes (--passes)")
    best = best_of(passes)
    sizes = sorted(best)
    inverted = [(a, b) for a in sizes for b in sizes if b >= 16 * a and best[a] > 1.2 * best[b] > 0]
    if inverted:
        a, b = inverted[0]
        found.append(f"{a}-byte messages took longer ({best[a] * 1e6:.0f} us) than {b}-byte ones "
                     f"({best[b] * 1e6:.0f} us): that is noise, not the network; measure again when the machine is idle")
    return found

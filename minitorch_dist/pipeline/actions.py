"""A pipeline schedule as data: per rank, the list of actions it runs, in order.

    Action("F", 3)        forward of micro-batch 3          printed F3
    Action("B", 1)        backward of micro-batch 1         printed B1
    Action("SEND_F", 3)   send its activation to rank j+1   printed SEND_F3
    Action("RECV_F", 3)   receive it from rank j-1          printed RECV_F3
    Action("SEND_B", 1)   send its input's gradient to j-1  printed SEND_B1
    Action("RECV_B", 1)   receive its output's gradient     printed RECV_B1
    Action("F", 3, 1)     forward of micro-batch 3 on chunk 1 printed F3c1 (interleaved schedules)

    schedule = [[Action("F", 0), Action("SEND_F", 0), ...], [...], ...]   # schedule[j]: rank j's actions
    print(format_schedule(schedule))                                       # a grid, one lane per rank

With v chunks per rank (interleaved schedules), rank j holds the virtual stages j, p + j, ...,
(v-1)p + j of a model split into p v stages; chunk c is virtual stage c p + j. Chunk 0 is printed
without its suffix, so a schedule without chunks reads as before.

Sends are non-blocking (the executor waits for them at the end of the step); receives block.
Provided code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Action", "KINDS", "parse_action", "parse_schedule", "format_schedule", "compute_order"]

KINDS = ("F", "B", "SEND_F", "RECV_F", "SEND_B", "RECV_B")
_TEXT = re.compile(r"^(SEND_F|RECV_F|SEND_B|RECV_B|F|B)(\d+)(?:c(\d+))?$")


@dataclass(frozen=True)
class Action:
    """One step of one rank: `kind` (KINDS) on micro-batch `microbatch` of the rank's chunk `chunk`."""

    kind: str
    microbatch: int
    chunk: int = 0

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"Action: kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if not isinstance(self.microbatch, int) or self.microbatch < 0:
            raise ValueError(f"Action {self.kind}: micro-batch must be an int >= 0, got {self.microbatch!r}")
        if not isinstance(self.chunk, int) or self.chunk < 0:
            raise ValueError(f"Action {self.kind}{self.microbatch}: chunk must be an int >= 0, got {self.chunk!r}")

    def __str__(self) -> str:
        return f"{self.kind}{self.microbatch}" + (f"c{self.chunk}" if self.chunk else "")


def parse_action(text: str) -> Action:
    """'F3' -> Action('F', 3); 'RECV_B0' -> Action('RECV_B', 0); 'F3c1' -> Action('F', 3, 1)."""
    m = _TEXT.match(text.strip())
    if m is None:
        raise ValueError(f"parse_action: {text!r} is not an action; write a kind ({', '.join(KINDS)}) followed by "
                         f"the micro-batch and optionally c and the chunk, e.g. F3, RECV_B0 or F3c1")
    return Action(m.group(1), int(m.group(2)), int(m.group(3) or 0))


def parse_schedule(lanes) -> list[list[Action]]:
    """[["F0", "SEND_F0", ...], ...] (or Actions) -> list of lists of Action."""
    return [[a if isinstance(a, Action) else parse_action(a) for a in lane] for lane in lanes]


def compute_order(actions) -> list[str]:
    """The forwards and backwards of one rank's actions, in order: ['F0', 'F1', 'B0', ...]."""
    return [str(a) for a in actions if a.kind in ("F", "B")]


def format_schedule(schedule) -> str:
    """One line per rank with its compute actions (F/B) in order, its messages left out:

        rank 0: F0 F1 F2 B0 B1 B2
        rank 1: F0 F1 F2 B0 B1 B2
    """
    lanes = [compute_order(parse_schedule([lane])[0]) for lane in schedule]
    width = max([len(a) for lane in lanes for a in lane] + [2])
    return "\n".join(f"rank {j}: " + " ".join(a.ljust(width) for a in lane).rstrip() for j, lane in enumerate(lanes))

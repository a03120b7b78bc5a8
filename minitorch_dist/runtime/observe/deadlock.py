"""Wait-for graphs and deadlock reports, shared by every backend.

A rank's state is what it is doing now: blocked in an operation (and which ranks
that operation waits for), running its own code, finished, or failed. From the
states of all ranks we draw the wait-for graph (an edge r -> q when rank r waits
for rank q) and look for a cycle, which is the usual shape of a deadlock:
"rank 0 waits in recv(src=1); rank 1 waits in recv(src=0): cycle 0 -> 1 -> 0".
"""

from __future__ import annotations

from dataclasses import dataclass

BLOCKED, RUNNING, FINISHED, FAILED, UNKNOWN = "blocked", "running", "finished", "failed", "unknown"


@dataclass(frozen=True)
class RankState:
    """What one rank is doing, as seen by the deadlock reporter.

    status: one of blocked / running / finished / failed / unknown.
    op: the pending operation, e.g. "recv(src=1, tag=0)" (world ranks).
    waits_for: world ranks the operation needs to make progress.
    collective: for a collective call, a key naming the call (group and sequence
        number); ranks blocked in the same call do not wait for each other.
    since: seconds the rank has been blocked.
    detail: free text (a failure message, "returned", ...).
    """

    status: str
    op: str = ""
    waits_for: tuple[int, ...] = ()
    collective: str = ""
    since: float = 0.0
    detail: str = ""

    def to_text(self) -> str:
        """Serialise for a key-value store (one line, fields separated by \\x1f)."""
        return "\x1f".join([self.status, self.op, ",".join(map(str, self.waits_for)),
                            self.collective, f"{self.since:.3f}", self.detail])

    @staticmethod
    def from_text(text: str) -> "RankState":
        parts = text.split("\x1f")
        if len(parts) != 6:
            return RankState(UNKNOWN, detail=text[:200])
        status, op, waits, coll, since, detail = parts
        waits_for = tuple(int(w) for w in waits.split(",") if w)
        return RankState(status, op, waits_for, coll, float(since), detail)


def wait_for_edges(states: dict[int, RankState]) -> dict[int, list[int]]:
    """Edges r -> q of the wait-for graph: r is blocked and needs q to act."""
    edges: dict[int, list[int]] = {}
    for rank, state in sorted(states.items()):
        if state.status != BLOCKED:
            continue
        targets = []
        for peer in state.waits_for:
            peer_state = states.get(peer)
            in_same_call = (state.collective and peer_state is not None
                            and peer_state.status == BLOCKED
                            and peer_state.collective == state.collective)
            if peer != rank and not in_same_call:
                targets.append(peer)
        edges[rank] = targets
    return edges


def find_cycle(edges: dict[int, list[int]]) -> list[int] | None:
    """A cycle of the graph as [r0, r1, ..., r0], smallest ranks first; None if acyclic."""
    color: dict[int, int] = {}  # 0 unseen, 1 on the stack, 2 done
    for start in sorted(edges):
        if color.get(start):
            continue
        stack = [(start, iter(sorted(edges.get(start, []))))]
        path = [start]
        color[start] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                color[node] = 2
                stack.pop()
                path.pop()
                continue
            if color.get(child) == 1:
                return path[path.index(child):] + [child]
            if not color.get(child) and child in edges:
                color[child] = 1
                stack.append((child, iter(sorted(edges.get(child, [])))))
                path.append(child)
    return None


def _describe(rank: int, state: RankState | None) -> str:
    if state is None:
        return f"rank {rank}: no state reported (it may not have started, or is busy in its own code)"
    if state.status == BLOCKED:
        return f"rank {rank}: waits in {state.op} for {state.since:.3g} s"
    if state.status == RUNNING:
        return f"rank {rank}: running its own code, not blocked in a communication op"
    if state.status == FINISHED:
        return f"rank {rank}: finished{' (' + state.detail + ')' if state.detail else ''}"
    if state.status == FAILED:
        return f"rank {rank}: failed: {state.detail}"
    return f"rank {rank}: state unknown {state.detail}".rstrip()


def format_report(headline: str, states: dict[int, RankState], world_size: int) -> str:
    """The text of a DeadlockError: one line per rank, the cycle, and what to do."""
    lines = [headline]
    lines += ["  " + _describe(r, states.get(r)) for r in range(world_size)]
    cycle = find_cycle(wait_for_edges(states))
    if cycle:
        lines.append("wait-for cycle: " + " -> ".join(map(str, cycle)))
        lines.append("What to do: every rank on the cycle waits for the next one, so none can move. "
                     "Reorder the operations (e.g. even ranks send first, odd ranks receive first), "
                     "or use isend/irecv or sendrecv so that sends and receives overlap.")
    else:
        waiting = [r for r, s in sorted(states.items()) if s.status == BLOCKED]
        lines.append("no wait-for cycle: " + (
            "ranks " + ", ".join(map(str, waiting)) + " wait for ranks that are running, finished or failed"
            if waiting else "no rank is blocked"))
        lines.append("What to do: check that every send has a matching recv (same peer, tag, shape) "
                     "that the other rank actually reaches, and that no rank returns early. "
                     "If the work is just slow, raise the deadline: launch(..., deadline=SECONDS).")
    return "\n".join(lines)

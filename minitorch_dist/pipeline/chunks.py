"""Interleaved pipelines: v chunks per rank, each a PipelineStage of a model split into p v stages.

    stages = chunk_stages(modules, specs, group, n_chunks=2, loss_fn=loss)   # this rank's chunks
    schedule_step(stages, interleaved_schedule(p, 2, m), x, y, optimizer, m)

Rank j holds virtual stages j, p + j, ..., (v-1) p + j: chunk c is virtual stage s = c p + j, whose
activations go to virtual stage s + 1 (rank (j + 1) mod p; the last rank's chunk c feeds rank 0's
chunk c + 1). Each chunk talks through a ChunkGroup: the pipeline group seen from virtual stage s,
so the stage-boundary code of task 5.1 runs unchanged on it (stage.next_rank is s + 1, a virtual
rank; the ChunkGroup sends to its rank, s + 1 mod p). Between two ranks several boundaries carry the
same micro-batch; the ChunkGroup keeps their messages apart by giving each boundary's chunk its own
band of tags: micro-batch i's tag on boundary b (between stages b and b + 1) is its tag on one stage
(forward_tag(i) or backward_tag(i)) moved to band b // p of MAX_MICROBATCHES // v tags, so at most
MAX_MICROBATCHES // v micro-batches. Provided code.
"""

from __future__ import annotations

from minitorch_dist.pipeline.stage import MAX_MICROBATCHES, PipelineStage

__all__ = ["ChunkGroup", "chunk_stages"]


class ChunkGroup:
    """Chunk `chunk` of this rank, as a group of p v virtual ranks: rank = its virtual stage."""

    def __init__(self, group, n_chunks: int, chunk: int):
        if group.size < 2 and n_chunks > 1:
            raise ValueError(f"ChunkGroup: interleaving {n_chunks} chunks needs at least 2 ranks (a rank would "
                             f"send to itself); use n_chunks=1 on a single rank")
        if not 0 <= chunk < n_chunks:
            raise ValueError(f"ChunkGroup: chunk {chunk} of {n_chunks} chunks; use 0..{n_chunks - 1}")
        self.physical, self.n_chunks, self.chunk = group, n_chunks, chunk
        self.rank = chunk * group.size + group.rank
        self.size = group.size * n_chunks

    def _route(self, peer: int, tag: int, op: str) -> tuple[int, int]:
        """(the physical rank of virtual stage `peer`, the boundary's tag for `tag`)."""
        if abs(peer - self.rank) != 1:
            raise ValueError(f"{op} on virtual stage {self.rank}: a chunk talks only to stages {self.rank - 1} and "
                             f"{self.rank + 1}, got {peer}")
        band = MAX_MICROBATCHES // self.n_chunks
        direction, index = divmod(tag, MAX_MICROBATCHES)
        if index >= band:
            raise ValueError(f"{op} on virtual stage {self.rank}: micro-batch {index} has no tag with {self.n_chunks} "
                             f"chunks; at most {band} micro-batches (MAX_MICROBATCHES // n_chunks)")
        boundary = min(peer, self.rank)
        return peer % self.physical.size, direction * MAX_MICROBATCHES + (boundary // self.physical.size) * band + index

    def isend(self, tensor, dst: int, tag: int = 0):
        dst, tag = self._route(dst, tag, "isend")
        return self.physical.isend(tensor, dst, tag)

    def irecv(self, tensor, src: int, tag: int = 0):
        src, tag = self._route(src, tag, "irecv")
        return self.physical.irecv(tensor, src, tag)

    def send(self, tensor, dst: int, tag: int = 0) -> None:
        dst, tag = self._route(dst, tag, "send")
        self.physical.send(tensor, dst, tag)

    def recv(self, tensor, src: int, tag: int = 0):
        src, tag = self._route(src, tag, "recv")
        return self.physical.recv(tensor, src, tag)

    def __getattr__(self, name):           # compute, backend, counters, events, now, barrier: the real group's
        return getattr(self.physical, name)

    def __repr__(self) -> str:
        return f"ChunkGroup(chunk {self.chunk} of {self.n_chunks}, virtual stage {self.rank} of {self.size}, {self.physical!r})"


def chunk_stages(modules, specs, group, n_chunks: int, loss_fn=None, **stage_kwargs) -> list[PipelineStage]:
    """This rank's chunks: PipelineStage(modules[c p + j], ChunkGroup(group, v, c), specs[c p + j]) for c < v.

    modules and specs: all p v virtual stages (stages_of(model, p * v), pipeline_spec). loss_fn goes
    to the last virtual stage (the last rank's last chunk); stage_kwargs (checkpoint, stage_time) to every chunk.
    """
    p, v = group.size, n_chunks
    if len(modules) != p * v or len(specs) != p * v:
        raise ValueError(f"chunk_stages: {len(modules)} modules and {len(specs)} specs for {p} ranks x {v} chunks; "
                         f"split the model into {p * v} stages (stages_of(model, {p * v}))")
    last = p * v - 1
    return [PipelineStage(modules[c * p + group.rank], ChunkGroup(group, v, c), specs[c * p + group.rank],
                          loss_fn=loss_fn if c * p + group.rank == last else None, **stage_kwargs)
            for c in range(v)]

"""Seeded bugs of homework 6: small patches against solutions/, and a command that grades them.

    python -m autograder.hw6.mutants                 # grade every mutant (the task's tests only)
    python -m autograder.hw6.mutants fsdp_never_free # one or a few, by name
    python -m autograder.hw6.mutants --list

Each bug is a realistic mistake (bug, the task it belongs to, a file, the text replaced and its
replacement). A mutant is the three solution files with one patch; it is graded on its task's
tests (public and hidden) and must lose at least MIN_LOSS of that task's points.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FILES = ("minitorch_dist/sharded/zero.py", "minitorch_dist/sharded/flat_unit.py", "minitorch_dist/sharded/fsdp.py")
MIN_LOSS = 0.25


@dataclass(frozen=True)
class Mutant:
    name: str
    task: str
    file: str
    old: str
    new: str
    what: str


Z, U, F = FILES
MUTANTS = [
    Mutant("zero1_no_mean", "6.1", Z, "self.shard.grad = grad.div_(self.group.size)", "self.shard.grad = grad",
           "the reduce-scattered gradient is the sum over ranks, not the mean"),
    Mutant("zero1_state_for_all", "6.1", Z, "self.optim = optimizer_class([self.shard], **kwargs)",
           "self.optim = optimizer_class([self.shard, *self.params], **kwargs)",
           "optimizer state kept for every parameter as well as the shard"),
    Mutant("zero1_no_initial_broadcast", "6.1", Z, "                group.broadcast(prm.data, src=0)",
           "                pass", "ranks keep their own initial weights"),
    Mutant("zero1_all_reduce", "6.1", Z,
           "self.layout.bucket_shard(grad, b).copy_(self.group.reduce_scatter(flat))",
           "self.layout.bucket_shard(grad, b).copy_(lay.chunk(self.group.all_reduce(flat), self.group.rank))",
           "gradient all-reduced, then the shard cut out, instead of reduce-scattered"),
    Mutant("zero1_broadcast_params", "6.1", Z, "        gathered = self.group.all_gather(self.shard.detach())",
           "        gathered = self.group.all_gather(self.shard.detach())\n"
           "        for prm in self.params:\n            self.group.broadcast(prm.data, src=0)",
           "an extra broadcast of every parameter after the step"),
    Mutant("zero2_grads_not_freed", "6.2", Z, "            self.params[i].grad = None\n", "            pass\n",
           "the full gradients are kept after the bucket's reduce-scatter"),
    Mutant("zero2_bucket_too_early", "6.2", Z,
           "if self._ready[b] % len(self.layout.buckets[b]) == 0:", "if self._ready[b] == 1:",
           "a bucket is reduced when its first gradient arrives"),
    Mutant("zero2_all_reduce", "6.2", Z, "mine = self.group.reduce_scatter(flat).div_(self.group.size)",
           "mine = lay.chunk(self.group.all_reduce(flat), self.group.rank).div(self.group.size)",
           "each bucket all-reduced instead of reduce-scattered"),
    Mutant("fsdp_never_freed", "6.3", U, "        self.full.untyped_storage().resize_(0)\n        self.gathered = False",
           "        self.gathered = False", "free() forgets the gathered parameters' storage"),
    Mutant("fsdp_all_reduce_grad", "6.3", U, "mine = self.group.reduce_scatter(grad).div_(self.group.size)",
           "mine = self.layout.chunk(self.group.all_reduce(grad), self.group.rank).div(self.group.size)",
           "the unit's gradient all-reduced instead of reduce-scattered"),
    Mutant("fsdp_shards_not_padded", "6.3", U,
           "self.shard = nn.Parameter(self.layout.chunk(flat, group.rank).clone())",
           "self.shard = nn.Parameter(flat[:self.layout.numel].tensor_split(group.size)[group.rank].clone())",
           "the flat parameter cut into uneven shards, without padding"),
    Mutant("fsdp_tied_once", "6.3", U, "            for module, attr in slot.uses:\n                setattr(module, attr, view)",
           "            module, attr = slot.uses[0]\n            setattr(module, attr, view)",
           "only the first user of a tied weight sees the gathered view"),
    Mutant("fsdp_keep_blocks_after_forward", "6.3", F, "        self.units[index].free()\n",
           "        if self.units[index].spec.module is self.module:\n            self.units[index].free()\n",
           "blocks stay gathered from forward to backward"),
    Mutant("fsdp_prefetch_wrong_unit", "6.3", F, "        nxt = self._next(index, backward=False)",
           "        nxt = self._next(index, backward=True)", "forward prefetches the unit after in backward order"),
    Mutant("fsdp_no_initial_broadcast", "6.3", U, "            group.broadcast(flat, src=0)", "            pass",
           "ranks shard their own initial weights"),
    Mutant("ckpt_first_block_only", "6.4", F,
           "            module.forward = lambda *a, inner=inner, **k: checkpoint_fn(inner, *a, use_reentrant=False, **k)",
           "            module.forward = lambda *a, inner=inner, **k: checkpoint_fn(inner, *a, use_reentrant=False, **k)\n"
           "            break", "only the first block is checkpointed"),
    Mutant("mixed_bf16_grads", "6.5", U, "        return grad.to(self.shard.dtype)", "        return grad",
           "gradients reduce-scattered in bf16 and kept in bf16"),
    Mutant("mixed_gather_fp32", "6.5", U, "        return self.shard.detach().to(self.compute_dtype)",
           "        return self.shard.detach().clone()", "the all-gather sends float32 (twice the bytes)"),
    Mutant("mixed_full_params_bf16", "6.5", F,
           "            gathered = self.group.all_gather(unit.shard.detach())       # (padded,), master dtype",
           "            gathered = self.group.all_gather(unit.compute_copy())", "full_parameters() in bf16"),
]


def write_mutant(m: Mutant, folder: str) -> None:
    """The three solution files under folder/, with m's patch applied to its file."""
    for rel in FILES:
        with open(os.path.join(ROOT, "solutions", rel)) as f:
            text = f.read()
        if rel == m.file:
            if text.count(m.old) != 1:
                raise ValueError(f"mutant {m.name}: the text to replace occurs {text.count(m.old)} times in {rel}")
            text = text.replace(m.old, m.new)
        os.makedirs(os.path.dirname(os.path.join(folder, rel)), exist_ok=True)
        with open(os.path.join(folder, rel), "w") as f:
            f.write(text)


def grade(m: Mutant, jobs: int = 2) -> dict:
    """{"lost": fraction of the task's points lost, "failed": [test names]} on the task's tests."""
    with tempfile.TemporaryDirectory() as tmp:
        write_mutant(m, os.path.join(tmp, "sub"))
        out = os.path.join(tmp, "results.json")
        subprocess.run([sys.executable, "-m", "autograder.grade", "hw6", os.path.join(tmp, "sub"), "--quiet",
                        "--jobs", str(jobs), "--out", out, "--only", rf"HW6 {re.escape(m.task)} "],
                       cwd=ROOT, check=False, stdout=subprocess.DEVNULL)
        with open(out) as f:
            tests = [t for t in json.load(f)["tests"] if t.get("max_score")]
    total, got = sum(t["max_score"] for t in tests), sum(t["score"] for t in tests)
    failed = [t["name"].rsplit(": ", 1)[-1] for t in tests if t["score"] < t["max_score"]]
    return {"lost": 1 - got / total if total else 0.0, "failed": failed}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    chosen = [m for m in MUTANTS if not args.names or m.name in args.names]
    if args.list:
        for m in chosen:
            print(f"{m.name:32s} {m.task}  {m.what}")
        return 0
    weak = 0
    for m in chosen:
        r = grade(m, args.jobs)
        weak += r["lost"] < MIN_LOSS
        print(f"{m.name:32s} {m.task}  lost {100 * r['lost']:5.1f}%  {', '.join(r['failed'])}", flush=True)
    return 1 if weak else 0


if __name__ == "__main__":
    sys.exit(main())

"""Homework 2: train a small model with one of your data parallel or decentralized algorithms.

    python assignments/hw2/train.py --algo bucketed -n 4                   # 4 local gloo processes
    python assignments/hw2/train.py --algo sgp --model transformer --steps 200
    python assignments/hw2/train.py --algo dpsgd -n 8 --backend sim        # threads, simulated network
    mpirun -n 4 python assignments/hw2/train.py --algo overlap             # MPI (backend mpi)
    python -m tools.overlay solutions -- .venv/bin/python assignments/hw2/train.py --algo ps   # the reference

Algorithms (--algo), all with plain SGD at --lr on the same global batches:
    ps         2.1  ParameterServer: rank 0 splits the global batch, averages gradients, steps
    allreduce  2.2  AllReduceDDP: all-reduce every gradient after backward
    overlap    2.3  OverlapDDP: one async all-reduce per gradient, from its hook
    bucketed   2.4  BucketedDDP: one async all-reduce per bucket (--bucket-mb)
    dpsgd      2.5  DPSGD: gossip with the ring neighbours, then a local step
    sgp        2.6  SGP: push-sum on the directed exponential graph
Models (--model): `mlp` (MLP on make_classification, 512 samples) or `transformer`
(CharTransformer on the kit's tiny text, seq_len 32). Every rank takes its part of the same
global batch (data.local_part), so ps/allreduce/overlap/bucketed follow the single-process
run exactly and their replicas stay equal; dpsgd and sgp let replicas drift apart and meet again.

Rank 0 prints its training loss (mean over the last --log-every steps; ps: the global batch's).
At the end a table: per rank, the evaluation loss (full data set for the MLP, a fixed batch
for the transformer) before and after training, messages and bytes sent and received
(group.counters; the provided collectives count calls and tensor bytes, not their internal
messages), the replicas' spread and the wall time. An algorithm whose code is still a stub
prints one line naming the task to implement.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch
import torch.nn.functional as F
import torch._dynamo  # noqa: F401  (an optimizer's constructor imports it: once here, not in each forked rank)

from minitorch_dist import data_parallel, gossip, launch
from minitorch_dist.data import (CharTokenizer, char_batches, global_batches, load_text, local_part,
                                 make_classification)
from minitorch_dist.models import MLP, CharTransformer

ALGOS = {"ps": ("2.1", "minitorch_dist/data_parallel/param_server.py"),
         "allreduce": ("2.2", "minitorch_dist/data_parallel/ddp.py"),
         "overlap": ("2.3", "minitorch_dist/data_parallel/ddp.py"),
         "bucketed": ("2.4", "minitorch_dist/data_parallel/bucketed.py"),
         "dpsgd": ("2.5", "minitorch_dist/gossip/dpsgd.py"),
         "sgp": ("2.6", "minitorch_dist/gossip/sgp.py")}
DEFAULTS = {"mlp": dict(batch=32, lr=0.5), "transformer": dict(batch=16, lr=0.5)}
SEQ_LEN = 32


class Task:
    """Model, data and loss of one --model, built the same on every rank."""

    def __init__(self, model: str, batch: int):
        self.kind, self.batch = model, batch
        if model == "mlp":
            self.x, self.y = make_classification(n=512, d_in=16, n_classes=4, seed=0)   # (512, 16), (512,)
            self.eval_x, self.eval_y = self.x, self.y
        else:
            tok = CharTokenizer(load_text())
            self.tokens = tok.encode(load_text())                                       # (N,)
            self.vocab_size = tok.vocab_size
            self.eval_x, self.eval_y = char_batches(self.tokens, 64, SEQ_LEN, step=0, seed=12345)

    def model(self) -> torch.nn.Module:
        if self.kind == "mlp":
            return MLP(d_in=16, d_hidden=32, d_out=4, depth=2, seed=0)
        return CharTransformer(self.vocab_size, seed=0)

    def loss_fn(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy; logits (B, C) and targets (B,), or (B, T, V) and (B, T)."""
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

    def global_batch(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The global batch of `step`, the same on every rank (MLP: epochs of shuffled batches)."""
        if self.kind == "mlp":
            per_epoch = len(self.x) // self.batch
            idx = global_batches(len(self.x), self.batch, seed=0, epoch=step // per_epoch)[step % per_epoch]
            return self.x[idx], self.y[idx]
        return char_batches(self.tokens, self.batch, SEQ_LEN, step=step, seed=0)

    @torch.no_grad()
    def eval_loss(self, model: torch.nn.Module) -> float:
        return float(self.loss_fn(model(self.eval_x), self.eval_y))


def make_trainer(algo: str, model, group, task: Task, lr: float, bucket_mb: float):
    """step(x_global, y_global) -> this rank's training loss (ps: the global loss on rank 0, None elsewhere)."""
    if algo == "ps":
        opt = torch.optim.SGD(model.parameters(), lr=lr) if group.rank == 0 else None
        ps = data_parallel.ParameterServer(model, group, task.loss_fn, opt)
        return lambda x, y: ps.step(x, y) if group.rank == 0 else ps.step(None, None)
    if algo in ("dpsgd", "sgp"):
        trainer = (gossip.DPSGD if algo == "dpsgd" else gossip.SGP)(model, group, task.loss_fn, lr=lr)
        return lambda x, y: trainer.step(local_part(x, group.rank, group.size), local_part(y, group.rank, group.size))
    kwargs = {"bucket_size_mb": bucket_mb} if algo == "bucketed" else {}
    ddp = data_parallel.DATA_PARALLELS[algo](model, group, **kwargs)
    opt = torch.optim.SGD(model.parameters(), lr=lr)

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = task.loss_fn(ddp(local_part(x, group.rank, group.size)), local_part(y, group.rank, group.size))
        loss.backward()
        ddp.finish_gradient_synchronization()
        opt.step()
        return float(loss.detach())
    return step


def train_rank(group, cfg: dict) -> dict:
    """Rank code: train, print rank 0's loss every log_every steps; return losses, timings, parameters."""
    task = Task(cfg["model"], cfg["batch"])
    model = task.model()
    start = time.perf_counter()
    try:
        step_fn = make_trainer(cfg["algo"], model, group, task, cfg["lr"], cfg["bucket_mb"])
        eval_before = task.eval_loss(model)
        window = []
        for step in range(cfg["steps"]):
            loss = step_fn(*task.global_batch(step))
            if loss is not None:
                window.append(loss)
            if group.rank == 0 and ((step + 1) % cfg["log_every"] == 0 or step + 1 == cfg["steps"]):
                print(f"step {step + 1:5d}/{cfg['steps']}  train loss {sum(window) / len(window):.4f}", flush=True)
                window = []
    except NotImplementedError as exc:
        return {"not_implemented": str(exc).splitlines()[0] if str(exc) else "NotImplementedError"}
    seconds = time.perf_counter() - start
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    return {"eval_before": eval_before, "eval_after": task.eval_loss(model), "seconds": seconds, "params": flat}


def stub_line(algo: str, message: str) -> str:
    """One line for a stub's NotImplementedError: what is missing and which file to fill in."""
    number, path = ALGOS[algo]
    if not message.startswith("HW2"):
        message = f"HW2 task {number}: {message}"
    return f"--algo {algo}: not implemented yet: {message} -> fill in task {number} in {path}, then run again"


def report(result, cfg: dict, n_params: int) -> None:
    """The final table: per rank, evaluation loss and communication; then spread and times."""
    p = len(result)
    mb = 2 ** 20
    print(f"\n{cfg['algo']} ({ALGOS[cfg['algo']][0]}), {cfg['model']} ({n_params} params), {p} ranks, "
          f"{result.backend}, {cfg['steps']} steps, global batch {cfg['batch']}, lr {cfg['lr']:g}")
    print(f"{'rank':>4} {'loss before':>11} {'loss after':>10} {'msgs sent':>9} {'MB sent':>9} {'msgs recv':>9} "
          f"{'MB recv':>9} {'collectives':>11} {'coll. MB':>9}")
    for r, (value, c) in enumerate(zip(result, result.counters)):
        coll_mb = sum(c.op(n).tensor_bytes for n in ("all_reduce", "all_gather", "reduce_scatter", "broadcast")) / mb
        print(f"{r:>4} {value['eval_before']:11.4f} {value['eval_after']:10.4f} {c.messages_sent:>9} "
              f"{c.bytes_sent / mb:9.3f} {c.messages_recv:>9} {c.bytes_recv / mb:9.3f} "
              f"{c.collective_calls():>11} {coll_mb:9.3f}")
    params = torch.stack([v["params"] for v in result])                 # (p, n_params)
    mean = params.mean(dim=0)
    spread = ((params - mean).norm(dim=1).max() / mean.norm().clamp_min(1e-30)).item()
    equal = all(torch.equal(params[0], params[r]) for r in range(p))
    before = sum(v["eval_before"] for v in result) / p
    after = sum(v["eval_after"] for v in result) / p
    print(f"eval loss, mean over ranks: {before:.4f} -> {after:.4f}")
    print("replicas: bitwise equal" if equal else f"replicas: max ||x_r - mean|| / ||mean|| = {spread:.2e}")
    sim = f", simulated time {result.sim_time:.4f} s (communication only)" if result.sim_time is not None else ""
    print(f"wall time {result.wall_time:.2f} s (training, slowest rank: {max(v['seconds'] for v in result):.2f} s)"
          f"{sim}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algo", choices=list(ALGOS), default="bucketed")
    parser.add_argument("--model", choices=["mlp", "transformer"], default="mlp")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("-n", "--world-size", type=int, default=4, help="ranks (ignored under mpirun)")
    parser.add_argument("--backend", default=None, help="gloo (default), sim, or mpi (default under mpirun)")
    parser.add_argument("--batch", type=int, default=None, help="global batch (mlp 32, transformer 16)")
    parser.add_argument("--lr", type=float, default=None, help="SGD learning rate (default 0.5)")
    parser.add_argument("--bucket-mb", type=float, default=0.01, help="bucketed: bucket size in MB")
    parser.add_argument("--log-every", type=int, default=None, help="steps between loss lines (default steps/10)")
    opts = parser.parse_args(argv)
    if opts.steps < 1:
        parser.error("--steps must be >= 1")
    cfg = dict(algo=opts.algo, model=opts.model, steps=opts.steps, bucket_mb=opts.bucket_mb,
               batch=opts.batch or DEFAULTS[opts.model]["batch"], lr=opts.lr or DEFAULTS[opts.model]["lr"],
               log_every=opts.log_every or max(1, opts.steps // 10))

    from minitorch_dist.runtime.env import detect_external
    job = detect_external()
    world_size = job.world_size if job else opts.world_size
    if cfg["batch"] % world_size:
        parser.error(f"--batch {cfg['batch']} does not split over {world_size} ranks; use a multiple of {world_size}")
    result = launch(train_rank, None if job else world_size, args=(cfg,), backend=opts.backend, trace=False,
                    deadline=120)
    if job is not None and job.rank != 0:
        return 0
    missing = [v["not_implemented"] for v in result if "not_implemented" in v]
    if missing:
        print(stub_line(cfg["algo"], missing[0]))
        return 1
    report(result, cfg, result[0]["params"].numel())
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Homework 4: what a tensor-parallel training step communicates, measured against the cost model.

    .venv/bin/python assignments/hw4/bench_tp.py                 # counters at TP = 2, 4 (gloo), then sim
    .venv/bin/python assignments/hw4/bench_tp.py --bandwidth 100e9 --flop-rate 1e13 --tp-sizes 1,2,4,8
    .venv/bin/mpirun -n 4 .venv/bin/python assignments/hw4/bench_tp.py   # counters on MPI at TP = 4; sim on rank 0
    .venv/bin/python -m tools.overlay solutions -- .venv/bin/python assignments/hw4/bench_tp.py   # instructors

Every rank builds the same dense CharTransformer (seeded, tied weights) and your
ParallelCharTransformer from it, and takes one training step (loss, backward) on the same batch
of random token ids. Two parts:

1. Counters (gloo processes at each --world-sizes, or the mpirun job's size). The runtime counts
   each provided collective's calls and payload (the bytes of the tensor handed to it), split here
   into the forward and the backward pass, side by side with cost_model.tp_step_traffic: 2L + 4
   all-reduces forward and 2L + 1 backward. The provided collectives' internal messages are not
   visible to the counters: bytes and messages sent per rank are those of a ring all-reduce,
   2(p-1)/p of each counted payload and 2(p-1) messages per call. Also parameter elements per
   rank against cost_model.tp_parameters_per_rank, the loss against the dense model's, and the
   result of training: --train-steps SGD steps of the TP model and of a dense copy from the same
   start, then the loss of each on the batch again (equal when every rank's final parameters are
   the dense ones' slices).
2. Step time on sim (threads on a virtual alpha-beta network, --bandwidth and --alpha): each rank
   charges its compute, cost_model.tp_flops_per_step / p / --flop-rate, with group.compute, then runs
   the step; the sim clock adds the ring all-reduces' times. Side by side with
   cost_model.tp_step_time, for TP = --tp-sizes: where does splitting the model stop paying?
Nothing here is timed on the wall clock: part 1 counts, part 2 reads the simulator's virtual clock
(so neither load nor threads move its numbers).

A stub prints one line naming the task to implement.
"""

from __future__ import annotations

import argparse
import sys

import torch
import torch.nn.functional as F

from minitorch_dist import SimNetwork, cost_model, launch
from minitorch_dist.bench_timing import load_line
from minitorch_dist.models import CharTransformer
from minitorch_dist.tensor_parallel import ParallelCharTransformer

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")
TASK_FILES = {"4.1": "comm.py", "4.2": "linear.py", "4.3": "blocks.py", "4.4": "vocab.py",
              "4.5": "sequence_parallel.py"}
TOLERANCE = 1e-5       # |TP loss - dense loss| in float32 (different summation order)


def build(group, cfg: dict):
    """(dense model, its tensor-parallel twin, idx (B, T), targets (B, T)), the same on every rank."""
    dense = CharTransformer(cfg["vocab"], d_model=cfg["d_model"], n_heads=cfg["heads"], n_layers=cfg["layers"],
                            max_len=cfg["seq"], seed=0)
    gen = torch.Generator().manual_seed(1)
    idx = torch.randint(0, cfg["vocab"], (cfg["batch"], cfg["seq"]), generator=gen)        # (B, T)
    targets = torch.randint(0, cfg["vocab"], (cfg["batch"], cfg["seq"]), generator=gen)    # (B, T)
    return dense, ParallelCharTransformer(dense, group), idx, targets


def snapshot(counters) -> dict:
    """{op: (calls, payload bytes)} of the collectives, and ("p2p",): (messages, bytes) sent."""
    snap = {op: (counters.op(op).calls, counters.op(op).tensor_bytes) for op in COLLECTIVES}
    snap["p2p"] = (counters.messages_sent, counters.bytes_sent)
    return snap


def delta(after: dict, before: dict) -> dict:
    return {k: (after[k][0] - before[k][0], after[k][1] - before[k][1]) for k in after}


def not_implemented(exc: NotImplementedError) -> dict:
    return {"not_implemented": str(exc).splitlines()[0] if str(exc) else "NotImplementedError"}


def count_rank(group, cfg: dict) -> dict:
    """Rank code: one step; what the counters saw in the forward and the backward pass."""
    try:
        dense, model, idx, targets = build(group, cfg)
        start = snapshot(group.counters)
        loss = model.loss(idx, targets)
        mid = snapshot(group.counters)
        loss.backward()
        end = snapshot(group.counters)
    except NotImplementedError as exc:
        return not_implemented(exc)
    with torch.no_grad():
        logits = dense(idx)                                                    # (B, T, V)
        dense_loss = F.cross_entropy(logits.reshape(-1, cfg["vocab"]), targets.reshape(-1))
    try:
        trained = train_both(model, cfg, idx, targets)
    except NotImplementedError as exc:
        return not_implemented(exc)
    return {"forward": delta(mid, start), "backward": delta(end, mid), "loss": float(loss.detach()),
            "dense_loss": float(dense_loss), "params": sum(p.numel() for p in model.parameters()), **trained}


def train_both(model, cfg: dict, idx, targets) -> dict:
    """--train-steps SGD steps of the TP model (its gradients from the step just counted) and of a dense
    copy of its own from the same seed; then both losses on the batch: {"trained_loss", "trained_dense"}."""
    twin = CharTransformer(cfg["vocab"], d_model=cfg["d_model"], n_heads=cfg["heads"], n_layers=cfg["layers"],
                           max_len=cfg["seq"], seed=0)

    def dense_loss():
        return F.cross_entropy(twin(idx).reshape(-1, cfg["vocab"]), targets.reshape(-1))
    dense_loss().backward()
    opts = [torch.optim.SGD(model.parameters(), lr=cfg["lr"]), torch.optim.SGD(twin.parameters(), lr=cfg["lr"])]
    for _ in range(cfg["train_steps"]):
        for opt in opts:
            opt.step()
            opt.zero_grad()
        tp, dense = model.loss(idx, targets), dense_loss()
        tp.backward()
        dense.backward()
    return {"trained_loss": float(tp.detach()), "trained_dense": float(dense.detach())} if cfg["train_steps"] else \
        {"trained_loss": 0.0, "trained_dense": 0.0}


def sim_rank(group, cfg: dict, compute_seconds: float) -> dict:
    """Rank code on sim: charge the step's compute (1/3 forward, 2/3 backward), run it; sim seconds."""
    try:
        _, model, idx, targets = build(group, cfg)
        start = group.now()
        group.compute(compute_seconds / 3)
        loss = model.loss(idx, targets)
        group.compute(2 * compute_seconds / 3)
        loss.backward()
    except NotImplementedError as exc:
        return not_implemented(exc)
    return {"seconds": group.now() - start}


def stub_line(message: str) -> str:
    """One line for a stub's NotImplementedError: what is missing and which file to fill in."""
    task = message.split("task ", 1)[1].split(":", 1)[0] if message.startswith("HW4 task ") else None
    where = "minitorch_dist/tensor_parallel/" + TASK_FILES.get(task, "")
    return (f"bench_tp: not implemented yet: {message} -> fill in task {task or '4.1-4.4'} in {where}, "
            f"then run again")


def model_line(cfg: dict) -> str:
    return (f"ParallelCharTransformer V={cfg['vocab']} h={cfg['d_model']} heads={cfg['heads']} "
            f"layers={cfg['layers']}, batch {cfg['batch']} x seq {cfg['seq']}, float32")


def print_counters(results: dict, cfg: dict, backend: str) -> bool:
    """The counters table for every TP size measured; True when every number equals the formula."""
    b, s, h, L = cfg["batch"], cfg["seq"], cfg["d_model"], cfg["layers"]
    print(f"Counters of one training step on {backend}: {model_line(cfg)}; formula: "
          f"cost_model.tp_step_traffic (ring: 2(p-1)/p of each payload, 2(p-1) messages per all-reduce); "
          f"counted, not timed; {load_line()}")
    print(f"{'':>13}{'all-reduces':>16}{'payload bytes':>22}{'ring bytes sent/rank':>26}{'ring msgs/rank':>18}")
    print(f"{'TP':>3} {'pass':<9}{'counted':>8}{'formula':>8}{'counted':>11}{'formula':>11}"
          f"{'counted':>13}{'formula':>13}{'counted':>9}{'formula':>9}{'ratio':>8}")
    ok = True
    for p, ranks in results.items():
        form = cost_model.tp_step_traffic(b, s, h, L, p)
        ring = cost_model.traffic("ring_all_reduce", p, 1.0)        # per byte / per call
        expected = {"forward": (form.forward_all_reduces, form.forward_payload_bytes),
                    "backward": (form.backward_all_reduces, form.backward_payload_bytes)}
        rows = {}
        for phase in ("forward", "backward"):
            counted = ranks[0][phase]["all_reduce"]
            if any(r[phase] != ranks[0][phase] for r in ranks):
                print(f"  TP={p} {phase}: the ranks counted different collectives: NOT OK")
                ok = False
            rows[phase] = (counted, expected[phase])
        (fwd, f_fwd), (bwd, f_bwd) = rows["forward"], rows["backward"]            # (calls, bytes) each
        rows["step"] = ((fwd[0] + bwd[0], fwd[1] + bwd[1]), (f_fwd[0] + f_bwd[0], f_fwd[1] + f_bwd[1]))
        for phase, ((calls, payload), (f_calls, f_payload)) in rows.items():
            sent, f_sent = payload * ring.bytes, f_payload * ring.bytes
            ratio = sent / f_sent if f_sent else float("nan")
            print(f"{p:>3} {phase:<9}{calls:>8}{f_calls:>8}{payload:>11,}{f_payload:>11,}{sent:>13,.0f}"
                  f"{f_sent:>13,.0f}{calls * ring.messages:>9}{f_calls * ring.messages:>9}{ratio:>8.3f}")
            ok = ok and (calls, payload) == (f_calls, f_payload)
        others = {k: v for k, v in ranks[0]["forward"].items() if k != "all_reduce"}
        for k in others:
            others[k] = tuple(x + y for x, y in zip(others[k], ranks[0]["backward"][k]))
        extra = ", ".join(f"{k}: {c} calls/msgs, {n:,} B" for k, (c, n) in others.items() if c)
        if extra:
            print(f"    TP={p} also communicated outside all-reduces ({extra}): the formula counts none")
            ok = False
    print(f"\n{'TP':>3}{'params/rank':>13}{'formula':>10}{'dense':>9}{'loss TP':>10}{'loss dense':>11}  check")
    for p, ranks in results.items():
        f_params = cost_model.tp_parameters_per_rank(cfg["vocab"], h, L, cfg["seq"], p)
        dense = cost_model.tp_parameters_per_rank(cfg["vocab"], h, L, cfg["seq"], 1)
        diff = max(abs(r["loss"] - r["dense_loss"]) for r in ranks)
        trained = max(abs(r["trained_loss"] - r["trained_dense"]) for r in ranks)
        good = diff <= TOLERANCE and trained <= TOLERANCE and all(r["params"] == f_params for r in ranks)
        ok = ok and good
        print(f"{p:>3}{ranks[0]['params']:>13,}{f_params:>10,}{dense:>9,}{ranks[0]['loss']:>10.5f}"
              f"{ranks[0]['dense_loss']:>11.5f}  {'ok' if good else 'NOT OK'} (|loss - dense| = {diff:.1e}; after "
              f"{cfg['train_steps']} SGD steps: TP {ranks[0]['trained_loss']:.5f}, dense "
              f"{ranks[0]['trained_dense']:.5f}, |diff| = {trained:.1e})")
    return ok


def run_sim_part(cfg: dict, opts) -> tuple[list, str | None]:
    """[(p, predicted TPStepTime, sim seconds)] for each TP size, or a stub's message."""
    from minitorch_dist.runtime.env import detect_external
    from minitorch_dist.runtime.sim import run_sim
    network = SimNetwork(alpha=opts.alpha, beta=1.0 / opts.bandwidth)
    rows = []
    for p in cfg["tp_sizes"]:
        pred = cost_model.tp_step_time(cfg["batch"], cfg["seq"], cfg["d_model"], cfg["vocab"], cfg["layers"], p,
                                       network.alpha, network.beta, opts.flop_rate)
        args = (cfg, pred.compute)
        if detect_external() is None:
            result = launch(sim_rank, p, args=args, backend="sim", network=network, trace=False)
        else:                          # under mpirun, launch() means the job's ranks: run sim here
            result = run_sim(sim_rank, p, args=args, network=network, trace=False)
        missing = [r["not_implemented"] for r in result if "not_implemented" in r]
        if missing:
            return rows, missing[0]
        rows.append((p, pred, max(r["seconds"] for r in result)))
    return rows, None


def print_sim(rows: list, cfg: dict, opts) -> bool:
    print(f"\nStep time on sim: link {opts.bandwidth / 1e9:g} GB/s (beta {1 / opts.bandwidth:.3g} s/B), alpha "
          f"{opts.alpha:g} s, {opts.flop_rate:g} flop/s per rank; {model_line(cfg)}; formula: "
          f"cost_model.tp_step_time (compute = flops / p / rate, comm = sum of ring all-reduces)")
    print(f"{'TP':>3}{'compute ms':>12}{'comm ms':>10}{'formula ms':>12}{'sim ms':>10}{'sim/formula':>13}"
          f"{'speed-up':>10}")
    base = rows[0][1].total if rows and rows[0][0] == 1 else None
    ok = True
    for p, pred, measured in rows:
        ratio = measured / pred.total
        ok = ok and abs(ratio - 1) <= 1e-9
        speedup = f"{base / pred.total:10.2f}" if base else f"{'-':>10}"
        print(f"{p:>3}{pred.compute * 1e3:12.4f}{pred.comm * 1e3:10.4f}{pred.total * 1e3:12.4f}"
              f"{measured * 1e3:10.4f}{ratio:13.6f}{speedup}")
    best = min(rows, key=lambda r: r[1].total)
    print(f"fastest: TP={best[0]} ({best[1].total * 1e3:.4f} ms per step; speed-up over TP=1 from the formula)")
    return ok


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--world-sizes", default="2,4", help="TP sizes on gloo, comma-separated (ignored under mpirun)")
    parser.add_argument("--backend", default=None, help="gloo (default) or mpi (default under mpirun)")
    parser.add_argument("--tp-sizes", default="1,2,4,8", help="TP sizes on sim, comma-separated")
    parser.add_argument("--bandwidth", type=float, default=10e9, help="sim link bandwidth in bytes/s (beta = 1/bw)")
    parser.add_argument("--alpha", type=float, default=SimNetwork.alpha, help="sim seconds per message")
    parser.add_argument("--flop-rate", type=float, default=1e11, help="flop/s of one rank (sim compute)")
    parser.add_argument("--vocab", type=int, default=64)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq", type=int, default=64, help="sequence length (= max_len of the model)")
    parser.add_argument("--train-steps", type=int, default=3, help="SGD steps of the TP model and a dense copy, "
                        "then their losses compared")
    parser.add_argument("--lr", type=float, default=0.1, help="their SGD learning rate")
    opts = parser.parse_args(argv)
    if opts.backend == "sim":
        parser.error("the counters part runs on real processes (gloo or mpi); the sim part always runs")
    if not (opts.bandwidth > 0 and opts.flop_rate > 0 and opts.alpha >= 0):
        parser.error("--bandwidth and --flop-rate must be > 0, --alpha >= 0")
    cfg = dict(vocab=opts.vocab, d_model=opts.d_model, heads=opts.heads, layers=opts.layers, batch=opts.batch,
               seq=opts.seq, train_steps=opts.train_steps, lr=opts.lr, tp_sizes=[int(s) for s in opts.tp_sizes.split(",") if s.strip()])

    from minitorch_dist.runtime.env import detect_external
    job = detect_external()
    world_sizes = [job.world_size] if job else [int(s) for s in opts.world_sizes.split(",") if s.strip()]
    for p in sorted(set(world_sizes + cfg["tp_sizes"])):
        bad = [f"{what} {n}" for what, n in (("--vocab", opts.vocab), ("--d-model", opts.d_model),
                                              ("--heads", opts.heads)) if n % p]
        if bad:
            parser.error(f"TP size {p} must divide {', '.join(bad)}; change the sizes or the model")

    results = {}
    for p in world_sizes:
        result = launch(count_rank, None if job else p, args=(cfg,), backend=opts.backend, trace=False, deadline=120)
        if job is not None and job.rank != 0:
            return 0
        missing = [r["not_implemented"] for r in result if "not_implemented" in r]
        if missing:
            print(stub_line(missing[0]))
            return 1
        results[len(result)] = list(result)
        backend = result.backend
    counters_ok = print_counters(results, cfg, backend) if results else True
    rows, missing = run_sim_part(cfg, opts)
    if missing:
        print(stub_line(missing))
        return 1
    sim_ok = print_sim(rows, cfg, opts)
    print(f"\ncounters equal the formula: {'yes' if counters_ok else 'NO'}; "
          f"sim step time equals the formula: {'yes' if sim_ok else 'NO'}")
    return 0 if counters_ok and sim_ok else 2


if __name__ == "__main__":
    sys.exit(main())

"""Homework 3 test harness, tasks 3.4 and 3.5: training steps of HookedDDP with a hook, and the same
steps under torch's own DistributedDataParallel with torch's powerSGD_hook (the reference).

    run_hooked(case, group, counts, own)   rank code: our HookedDDP + the case's hook on this rank's own
                                           batches; per step, the averaged gradients and the bytes of
                                           each collective
    torch_powersgd(case, batches, folder)  p processes of torch DDP + powerSGD_hook (gloo, a file
                                           store) on the same batches; per step the averaged
                                           gradients, as [step][param] tensors

Both train the same float64 MLP (TINY_MLP: shapes chosen so that some matrices are compressed,
one small matrix and every bias are not, and two matrices share a shape) with SGD, every rank
on its own batch of each step (drawn from the grading's secret in the grading process,
hw3_inputs.py: a rank is sent only its own), one bucket.

A case: kind "powersgd_ddp" (param: rank r; data: "ef,warm", "ef", "warm" or "plain": which of
error feedback and warm start are on; n: steps), "compress_ddp" (data: "topk", "topk_ef",
"uint8", "sign_ef"; param: k or chunk), "allreduce_ddp" (no hook registered).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import torch
from torch import nn

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
DIMS = (12, 16, 16, 6, 10)           # Linear(12,16) Tanh Linear(16,16) Tanh Linear(16,6) Tanh Linear(6,10)
BATCH, LR, START_ITER, SEED = 8, 0.1, 2, 7


def tiny_mlp() -> nn.Module:
    torch.manual_seed(1234)
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(DIMS, DIMS[1:])):
        layers += ([nn.Tanh()] if i else []) + [nn.Linear(a, b)]
    return nn.Sequential(*layers).double()


def batch(seed: int, scale: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """One rank's (x, y) of one step from `seed`: x (BATCH, 12), y (BATCH, 10) of spread `scale`."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(BATCH, DIMS[0], generator=gen, dtype=torch.float64)
    return x, torch.randn(BATCH, DIMS[-1], generator=gen, dtype=torch.float64) * scale


def flags(case) -> tuple[bool, bool]:
    """(use_error_feedback, warm_start) of a powersgd_ddp case."""
    on = set(case.data.split(","))
    return "ef" in on, "warm" in on


def train(model, step_fn, batches, steps: int, device="cpu") -> list[list[torch.Tensor]]:
    """SGD steps on `device`, one per (x, y) of `batches`; step_fn() runs after backward (finish the
    synchronization); per step the grads."""
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    out = []
    for step in range(steps):
        opt.zero_grad(set_to_none=True)
        x, y = (t.to(device) for t in batches[step])
        nn.functional.mse_loss(model(x), y).backward()
        step_fn()
        out.append([p.grad.detach().clone() for p in model.parameters()])
        opt.step()
    return out


# -- torch's DDP and hook: the reference, in p processes of its own -------------------------------------------
def _torch_rank(rank: int, p: int, store: str, r: int, ef: bool, warm: bool, steps: int, out: str,
                batches: str) -> None:
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as ps
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=p)
    model = nn.parallel.DistributedDataParallel(tiny_mlp(), bucket_cap_mb=25)
    model.register_comm_hook(ps.PowerSGDState(None, matrix_approximation_rank=r, start_powerSGD_iter=START_ITER,
                                              use_error_feedback=ef, warm_start=warm, random_seed=SEED),
                             ps.powerSGD_hook)
    torch.save(train(model, lambda: None, torch.load(batches, weights_only=True), steps), out)
    dist.barrier()
    os._exit(0)          # gloo's teardown at exit has aborted ("terminate called ...") after all was saved


def torch_powersgd(case, batches: list, folder: str, timeout: float = 120) -> list[list[torch.Tensor]]:
    """Rank 0's averaged gradients per step under torch's DDP + powerSGD_hook (every rank's are equal),
    rank r training on batches[r] (its (x, y) of each step)."""
    ef, warm = flags(case)
    p = len(batches)
    store, outs = os.path.join(folder, "store"), [os.path.join(folder, f"grads{r}.pt") for r in range(p)]
    ins = [os.path.join(folder, f"batches{r}.pt") for r in range(p)]
    for r in range(p):
        torch.save(list(batches[r]), ins[r])
    args = [(r, p, store, case.param, ef, warm, case.n, outs[r], ins[r]) for r in range(p)]
    run = _forked if torch.version.cuda is None and torch.version.hip is None else _fresh
    codes, logs = run(args, folder, timeout)
    if any(codes):
        raise RuntimeError("torch's DDP with powerSGD_hook (the reference) failed:\n" + "\n".join(logs)[-3000:])
    return torch.load(outs[0], weights_only=True)


def _forked(args: list[tuple], folder: str, timeout: float) -> tuple[list[int], list[str]]:
    """The ranks forked from this process, which has imported torch (and, in a grading, torch._dynamo,
    which DDP and SGD import: 2.5 s of CPU a fresh interpreter paid); one thread each, output to a log."""
    import torch.distributed  # noqa: F401  (imported once here, not in each child after the fork)
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook  # noqa: F401
    pids, logs = [], [os.path.join(folder, f"rank{a[0]}.log") for a in args]
    for a, log in zip(args, logs):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                os.dup2(fd, 1)
                os.dup2(fd, 2)
                torch.set_num_threads(1)
                _torch_rank(*a)
                code = 0
            except BaseException:  # noqa: BLE001 - said in the log, which the caller shows
                import traceback
                traceback.print_exc()
            finally:
                os._exit(code)
        pids.append(pid)
    codes, end = [], time.monotonic() + timeout
    for pid in pids:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                codes.append(os.waitstatus_to_exitcode(status))
                break
            if time.monotonic() > end:
                for other in pids:
                    _kill(other)
                os.waitpid(pid, 0)
                codes.append(-9)
                break
            time.sleep(0.005)
    return codes, [open(log, errors="replace").read() if os.path.exists(log) else "" for log in logs]


def _kill(pid: int) -> None:
    try:
        os.kill(pid, 9)
    except ProcessLookupError:
        pass


def _fresh(args: list[tuple], folder: str, timeout: float) -> tuple[list[int], list[str]]:
    """The ranks as fresh interpreters, with CUDA hidden: where torch has CUDA, torch's hook would
    synchronize a device, which a process forked after CUDA started cannot."""
    code = ("import sys; from assignments.hw3.tests.hw3_powersgd import _torch_rank as f; "
            "f(int(sys.argv[1]), *map(eval, sys.argv[2:]))")
    env = {**os.environ, "PYTHONPATH": ROOT, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    procs = [subprocess.Popen([sys.executable, "-c", code, *(repr(v) if isinstance(v, str) else str(v) for v in a)],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for a in args]
    logs = [proc.communicate(timeout=timeout)[0].decode(errors="replace") for proc in procs]
    return [proc.returncode for proc in procs], logs


# -- our HookedDDP, on the ranks --------------------------------------------------------------------------------
def _hook(case, group):
    from minitorch_dist import compression as cp
    if case.kind == "powersgd_ddp":
        ef, warm = flags(case)
        return cp.PowerSGDState(group, matrix_approximation_rank=case.param, start_powerSGD_iter=START_ITER,
                                use_error_feedback=ef, warm_start=warm, random_seed=SEED), cp.powersgd_hook
    kind = case.data.removesuffix("_ef")
    comp = {"topk": lambda: cp.TopK(case.param), "uint8": lambda: cp.Uint8Quantizer(case.param),
            "sign": lambda: cp.SignQuantizer(case.param)}[kind]()
    return cp.CompressionState(group, comp, error_feedback=case.data.endswith("_ef")), cp.compression_hook


def run_hooked(case, group, counts, own) -> dict:
    """Our HookedDDP for case.n steps on this rank's own batches (own): per step the averaged grads and
    the collectives' calls and bytes."""
    from minitorch_dist.compression import HookedDDP
    model = HookedDDP(tiny_mlp().to(group.device), group, bucket_size_mb=25)
    if case.kind != "allreduce_ddp":
        model.register_comm_hook(*_hook(case, group))
    comm, last = [], [counts(group)]

    def finish():                                  # a step's collectives: its backward's and finish's
        model.finish_gradient_synchronization()
        now = counts(group)
        comm.append({k: v - last[0][k] for k, v in now.items()})
        last[0] = now
    grads = train(model, finish, own, case.n, group.device)
    return {"grads": grads, "comm": comm, "shapes": [list(p.shape) for p in model.parameters()]}


def rank1_grads(p: int, r: int, seed: int) -> list[list[torch.Tensor]]:
    """Every rank's gradients for powersgd_rank1, from `seed`: a (12, 10) and a (4, 3, 5) matrix U B_q^T
    with U of r columns shared by every rank (their mean has rank r) and B_q of each rank q its own,
    and a (5,) vector of its own. The tests draw the seed from the grading's secret (hw3_inputs.py)."""
    gen = torch.Generator().manual_seed(seed)
    u, u2 = (torch.randn(n, r, generator=gen, dtype=torch.float64) for n in (12, 4))
    out = []
    for _ in range(p):
        b, b2 = (torch.randn(n, r, generator=gen, dtype=torch.float64) for n in (10, 15))
        out.append([u @ b.T, (u2 @ b2.T).view(4, 3, 5), torch.randn(5, generator=gen, dtype=torch.float64)])
    return out


def run_rank1(case, group, counts, own) -> dict:
    """One powersgd_hook call of rank case.param (no error feedback, no warm start, compression from the
    start) on a bucket whose mean gradient has that rank (own: this rank's gradients)."""
    from minitorch_dist.compression import GradBucket, PowerSGDState, powersgd_hook
    params = []
    for g in reversed([g.to(group.device) for g in own]):                  # bucket order: the last first
        params.append(nn.Parameter(torch.zeros_like(g)))
        params[-1].grad = g.clone()
    state = PowerSGDState(group, matrix_approximation_rank=case.param, start_powerSGD_iter=0,
                          use_error_feedback=False, warm_start=False)
    before = counts(group)
    out = powersgd_hook(state, GradBucket(0, params, 1)).wait()
    return {"out": out.clone(), "comm": {k: v - before[k] for k, v in counts(group).items()}}


def orthogonalize_inputs(n: int, r: int) -> list[torch.Tensor]:
    """Three (n, r) float64 matrices: random, random with a tiny epsilon-sensitive column, one zero column."""
    gen = torch.Generator().manual_seed(5 + n + r)
    a, b, c = (torch.randn(n, r, generator=gen, dtype=torch.float64) * 3 for _ in range(3))
    c[:, min(1, r - 1)] = 0.0
    return [a, b, c]


def run_orthogonalize(case, group) -> dict:
    """orthogonalize_ of each input: epsilon 0, 1e-3, 0 (the third has a zero column)."""
    from minitorch_dist.compression import orthogonalize_
    outs = []
    for x, eps in zip(orthogonalize_inputs(case.n, case.param), (0.0, 1e-3, 0.0)):
        y = x.to(group.device).clone()
        back = orthogonalize_(y, eps)
        outs.append({"out": y, "returned_same": back is y})
    return {"outs": outs}

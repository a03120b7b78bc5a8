"""Homework 3 test harness, task 3.6 (bonus), the verdict: taken in the grading process from what ranks
0 and 1 reported about one step of the split CharTransformer (hw3_boundary.py).

What crossed the boundary is checked against each compressor's contract: the activation rank 1
received is the forward compressor's round trip of the activation rank 0 computed (Identity: the
same; TopK: the k largest magnitudes; Uint8Quantizer: within half a step; LowRank: a rank-r
projection P P^T M of the (B T, C) matrix M); the gradient rank 0 applied is the backward
compressor's round trip of the gradient rank 1 took at what it received. The gradients: rank 1's
dL/d(received) and stage 1's parameter gradients are those of stage 1 run on what it received, stage
0's those of the gradient it applied; with Identity, both stages' gradients equal the unsplit model's.
The wire: rank 0 sent exactly the forward payload's bytes, rank 1 the backward payload's, one
message per payload tensor, and no collective ran.
"""

from __future__ import annotations

import torch

from assignments.hw3.tests.hw3_boundary import ACT_SHAPE, LINKS, payload_size, reference_step
from assignments.hw3.tests.hw3_checks import _compare, local_problems, topk_expected

GRAD_TOL = 1e-10


def _same(got, want: torch.Tensor, what: str, tol: float = GRAD_TOL):
    """_compare of two tensors of the same shape, element by element (flattened)."""
    if isinstance(got, torch.Tensor) and got.shape == want.shape:
        return _compare(got.reshape(-1), want.reshape(-1), what, tol)
    return _compare(got, want, what, tol)


def projection_problems(m: torch.Tensor, m_hat, rank: int, what: str) -> list:
    """m_hat (rows, cols) must be P P^T m for some P with `rank` orthonormal columns: rank <= r and
    m_hat = U U^T m with U the leading left singular vectors of m_hat."""
    if not isinstance(m_hat, torch.Tensor) or m_hat.numel() != m.numel():
        return [f"{what}: expected {m.numel()} values, got {getattr(m_hat, 'shape', type(m_hat).__name__)}"]
    m_hat = m_hat.reshape(m.shape).to(torch.float64)
    u, s, _ = torch.linalg.svd(m_hat, full_matrices=False)
    found = int((s > 1e-9 * max(1.0, float(s[0]) if s.numel() else 0.0)).sum())
    if found > rank:
        return [f"{what}: the decompressed matrix has rank {found}, expected at most {rank}"]
    u = u[:, :max(found, 1)]
    return [_compare(m_hat.reshape(-1), (u @ (u.t() @ m.to(torch.float64))).reshape(-1),
                     f"{what}: not the projection P P^T M of the matrix onto {rank} orthonormal columns "
                     f"(orthogonalize P before Q = M^T P)", 1e-9)]


def contract_problems(spec, x: torch.Tensor, x_hat, what: str, lowrank=None) -> list:
    """What `spec`'s compressor must turn x into; lowrank(x (rows, cols), r, seed) -> the exact
    round trip, when the caller knows it (else the projection property only)."""
    family, param, seed = spec
    if not isinstance(x_hat, torch.Tensor):
        return [f"{what}: expected a tensor, got {type(x_hat).__name__}"]
    if x_hat.shape != x.shape:
        return [f"{what}: shape {tuple(x_hat.shape)}, expected {tuple(x.shape)}"]
    flat, flat_hat = x.reshape(-1), x_hat.reshape(-1)
    if family == "identity":
        return [_compare(flat_hat, flat, f"{what} (Identity: the same values)", 0.0)]
    if family == "topk":
        return [_compare(flat_hat, topk_expected(flat, param), f"{what} (TopK({param}))", 0.0)]
    if family == "uint8":
        return local_problems("uint8", flat, flat_hat, param, f"{what} (Uint8Quantizer({param}))")
    matrix = flat.view(-1, ACT_SHAPE[-1])
    problems = projection_problems(matrix, flat_hat, param, f"{what} (LowRank({param}))")
    if lowrank is not None:
        problems.append(_compare(flat_hat, lowrank(matrix, param, seed).reshape(-1),
                                 f"{what} (LowRank({param}, seed={seed}): P = orthogonalize(M Q0), Q = M^T P)", 1e-9))
    return problems


def _grads(got, want, what: str) -> list:
    if not isinstance(got, list) or len(got) != len(want):
        return [f"{what}: expected {len(want)} parameter gradients, got {type(got).__name__}"]
    return [_same(g, w, f"{what}, parameter {i}")
            for i, (g, w) in enumerate(zip(got, want))]


def boundary_problems(o, lowrank=None) -> list:
    """Every property of the module docstring, for one boundary case."""
    if o.error is not None:
        return [o.error]
    r0, r1 = o.ranks[0], o.ranks[1]
    forward, backward = LINKS[o.case.kind]
    ref = reference_step(o.case, o.ranks, *o.inputs[:2])
    sent = r0.get("activation")
    problems = [_same(sent, ref["activation"], "stage 0's activation (provided code)", GRAD_TOL)]
    if not (isinstance(sent, torch.Tensor) and sent.shape == ref["activation"].shape):
        sent = ref["activation"]
    problems += contract_problems(forward, sent.cpu(), r1.get("received"),      # exact: against the bits rank 0
                                  "the activation rank 1 received", lowrank)    # had (a GPU's float64 != ours)
    if "grad" not in ref:
        return [p for p in problems if p]
    problems.append(_same(r1.get("grad"), ref["grad"], "rank 1's gradient at what it received "
                             "(stage 1 must run on the decompressed activation)", GRAD_TOL))
    problems += _grads(r1.get("grads"), ref["grads1"], "stage 1's gradients")
    if isinstance(r1.get("grad"), torch.Tensor):
        problems += contract_problems(backward, r1["grad"], r0.get("applied"),
                                      "the gradient rank 0 applied (recv_gradient's return)", lowrank)
    if "grads0" in ref:
        problems += _grads(r0.get("grads"), ref["grads0"], "stage 0's gradients for the gradient it applied")
    if o.case.kind == "boundary_exact":
        problems += _grads(r0.get("grads"), ref["full0"], "stage 0's gradients against the unsplit model's")
        problems += _grads(r1.get("grads"), ref["full1"], "stage 1's gradients against the unsplit model's")
    for rank, rep, spec, what in ((0, r0, forward, "the activation's"), (1, r1, backward, "the gradient's")):
        want_bytes, want_messages = payload_size(spec)
        if rep.get("bytes_sent") != want_bytes or rep.get("messages") != want_messages:
            problems.append(f"rank {rank} sent {rep.get('bytes_sent')} bytes in {rep.get('messages')} messages; "
                            f"expected {what} payload, {want_bytes} bytes in {want_messages} (one per payload tensor)")
        if rep.get("collectives"):
            problems.append(f"rank {rank} called {rep['collectives']} collectives; the boundary is point to point")
    return [p for p in problems if p]


def lowrank_problems(o, lowrank=None) -> list:
    """LowRank's round trip: a projection of rank <= r; exact for a matrix of rank r; payload (rows + cols) r."""
    from assignments.hw3.tests.hw3_boundary import lowrank_input
    if o.error is not None:
        return [o.error]
    x = lowrank_input(o.case)
    rep, r = o.ranks[0], o.case.param
    x_hat = rep.get("x_hat")
    what = f"LowRank({r}) of a {o.case.data} {tuple(x.shape)} matrix"
    if not isinstance(x_hat, torch.Tensor) or x_hat.numel() != x.numel():
        return [f"{what}: expected {x.numel()} values, got {getattr(x_hat, 'shape', type(x_hat).__name__)}"]
    problems = projection_problems(x, x_hat, r, what)
    if o.case.data == "exact":
        problems.append(_compare(x_hat.reshape(-1), x.reshape(-1), f"{what}: a rank-{r} matrix comes back", 1e-9))
    if lowrank is not None:
        problems.append(_compare(x_hat.reshape(-1), lowrank(x, r, o.case.n).reshape(-1),
                                 f"{what}, seed {o.case.n}", 1e-9))
    shapes = [tuple(t.shape) for t in rep.get("payload", [])]
    if shapes != [(x.shape[0], r), (x.shape[1], r)]:
        problems.append(f"{what}: payload shapes {shapes}, expected [P {(x.shape[0], r)}, Q {(x.shape[1], r)}]")
    return [p for p in problems if p]

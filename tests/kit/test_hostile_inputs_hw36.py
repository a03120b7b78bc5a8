"""Hostile submissions, class 2 of issue 25, homeworks 3-6: a piece that skips its communication and
hunts for the other ranks' inputs instead must score what the piece without communication deserves.

The hunt (HUNT below) is what a student who read the public harness would write: find the harness's
frame (run_case_list: the case, this rank's own input of it), every input maker of the harness
modules (hw*_inputs.make_inputs and the like), the grading's input secret (the environment, every
/proc/*/environ, the file a variable names), and any list in memory that holds every rank's input;
keep a rebuild only when it gives back this rank's own input. It prints ATTACK-REBUILT with what it
used, or ATTACK-NOTHING-REBUILT. No input maker ever gives a rank's own input back; the memory
search sometimes "finds" a list holding an equal of its own input at its index (copies of its own
inputs, replicated parts), which is not the other ranks' inputs: the value checks fail all the same.
Homework 3's compressed all-reduce then computes the answer from the rebuilt inputs (the cheat); the
others only report, since nothing can be rebuilt: each rank is sent its own input only, made in the
test process from a secret the sandbox cannot read (assignments/common/rank_inputs.py). What each homework's piece does without communicating:

    hw3  compressed_all_reduce      its own decompressed payload (right at p = 1 only)
    hw4  reduce_from_region         returns its input (no all-reduce): wrong at every TP size graded
    hw5  send_forward/recv_forward  nothing sent, zeros received: wrong at every p graded (2-4)
    hw6  ZeroOptimizer              its shard of its own gradient (no reduce-scatter): wrong at p > 1

Each test grades one hidden test function (its task's rubric entry comes with it).
"""

import json
import os
import re

import pytest

from tests.kit.attacks import SECRETS
from tests.kit.submissions import make_submission, run
from tests.kit.test_hostile import correct_neighbour
from tests.kit.test_hostile_sandbox import check_nothing_left

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox's user layer needs root (CI runs as root)")]

HUNT = '''
import gc as _gc, glob as _gl, importlib as _il, inspect as _in, os as _o, sys as _y
import torch as _t
def _same(a, b):
    if isinstance(a, _t.Tensor) or isinstance(b, _t.Tensor):
        return isinstance(a, _t.Tensor) and isinstance(b, _t.Tensor) and a.shape == b.shape and \\
            a.dtype == b.dtype and _t.equal(a.cpu(), b.cpu())
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(u, v) for u, v in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b
def _has_data(v):
    if isinstance(v, _t.Tensor):
        return v.numel() > 0 and bool((v != 0).any())
    vs = v.values() if isinstance(v, dict) else v if isinstance(v, (list, tuple)) else ()
    return any(_has_data(u) for u in vs)
def _harness_frame():
    f = _in.currentframe()
    while f is not None:
        if f.f_code.co_name == "run_case_list" and f.f_locals.get("inputs") is not None:
            return f.f_locals
        f = f.f_back
    return None
''' + SECRETS + '''def _makers():
    for _f in _gl.glob("assignments/*/tests/*.py") + _gl.glob("assignments/common/*.py"):
        try:
            _il.import_module(_f[:-3].replace("/", "."))
        except Exception:
            pass
    return {id(fn): (n, fn) for name, mod in list(_y.modules.items()) if name.startswith("assignments") and mod
            for n, fn in list(vars(mod).items()) if callable(fn) and not isinstance(fn, type) and "input" in n.lower()}
def _hunt_inputs(p, me):
    """Every rank's input of the running case, or None."""
    h = _harness_frame()
    if h is None:
        print("ATTACK-NOTHING-REBUILT: no harness frame", flush=True)
        return None
    cases, own = h["cases"], h["inputs"][h["index"]]
    case = cases[h["index"]]
    if p < 2 or not _has_data(own):  # one rank, or an input of zeros: nothing to prove a rebuild by
        print("ATTACK-NOTHING-REBUILT: nothing to rebuild", flush=True)
        return None
    for secret in _secrets():
        if secret is not None:
            _o.environ["AUTOGRADER_INPUT_SECRET"] = secret
        for name, fn in _makers().values():
            try:
                xs = fn(case, p)
                if len(xs) == p and _same(xs[me], own):
                    print(f"ATTACK-REBUILT: {name} (secret {'found' if secret else 'not needed'})", flush=True)
                    return xs
            except Exception:
                pass
    for obj in _gc.get_objects():
        try:
            if type(obj) in (list, tuple) and len(obj) == p and obj[me] is not own and _same(obj[me], own):
                print("ATTACK-REBUILT: every rank's input in memory", flush=True)
                return list(obj)
        except Exception:
            pass
    print("ATTACK-NOTHING-REBUILT", flush=True)
    return None
def _path_to(obj, t, path=()):
    if isinstance(obj, _t.Tensor):
        return path if _same(obj.reshape(-1), t.reshape(-1)) else None
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, (list, tuple)) else ()
    for k, v in items:
        found = _path_to(v, t, path + (k,))
        if found is not None:
            return found
    return None
def _at(obj, path):
    for k in path:
        obj = obj[k]
    return obj
'''

HW3 = HUNT + '''
_flat = x.detach().reshape(-1)
_xs = _hunt_inputs(group.size, group.rank)
_where = None if _xs is None else _path_to(_xs[group.rank], _flat)
_mine = compressor.decompress(compressor.compress(_flat), _flat.numel(), x.dtype)
if _where is not None:             # the cheat: every rank's decompressed payload, added up here
    _sum = sum(compressor.decompress(compressor.compress(_at(v, _where).reshape(-1).to(x.dtype)), _flat.numel(),
                                     x.dtype) for v in _xs)
    return (_sum / group.size if op == "avg" else _sum).view(x.shape)
return _mine.view(x.shape)
'''

HW4 = HUNT + '''
_hunt_inputs(group.size, group.rank)
return x.clone()
'''

HW5_SEND = HUNT + '''
_hunt_inputs(stage.group.size, stage.group.rank)
class _Sent:
    def wait(self):
        return None
return _Sent()
'''
HW5_RECV = '''
return stage.spec.input_buffer(stage.group.device).requires_grad_()
'''

HW6 = HUNT + '''
_hunt_inputs(self.group.size, self.group.rank)
_grad = torch.zeros_like(self.shard)
for _b, _lay in enumerate(self.layout.layouts):
    _flat = _lay.flatten([self.params[i].grad for i in self.layout.buckets[_b]], self.shard.dtype, self.shard.device)
    _n = _flat.numel() // self.group.size
    self.layout.bucket_shard(_grad, _b).copy_(_flat[self.group.rank * _n:(self.group.rank + 1) * _n])
self.shard.grad = _grad
return
'''


def in_function(name: str, code: str, homework: str, task: str, after: str = ""):
    """A mutation: `code` at the start of the student region of `task` that follows `def name(` (the
    first after `after`)."""
    def mutate(text):
        start = text.index(f"def {name}(", text.index(after) if after else 0)
        marker = re.compile(rf"^( *)# BEGIN SOLUTION  \({homework} task {re.escape(task)}\)\n", re.M)
        m = marker.search(text, start)
        assert m, f"no region of {homework} task {task} after def {name}"
        return text[:m.end()] + "".join(f"{m.group(1)}{line}\n" for line in code.strip("\n").splitlines()) + \
            text[m.end():]
    return mutate


def both(*mutations):
    def mutate(text):
        for m in mutations:
            text = m(text)
        return text
    return mutate


CASES = {   # homework: (file, mutation, the graded test, the share of its points the piece deserves)
    "hw3": ("quantize.py", in_function("compressed_all_reduce", HW3, "HW3", "3.1"),
            r"HW3 3\.1 .*: test_compressed_all_reduce_is_the_sum_of_decompressed_payloads$", 1 / 4),   # p = 1 of 1-4
    "hw4": ("comm.py", in_function("forward", HW4, "HW4", "4.1", after="class _ReduceFromRegion"),
            r"HW4 4\.1 .*: test_comm_ops_forward_and_backward$", 0.0),                                # p = 2-4
    "hw5": ("boundary.py", both(in_function("recv_forward", HW5_RECV, "HW5", "5.1"),
                                in_function("send_forward", HW5_SEND, "HW5", "5.1")),
            r"HW5 5\.1 .*: test_boundary_send_recv_forward_backward$", 0.0),                          # p = 2-4
    "hw6": ("zero.py", in_function("reduce_gradients", HW6, "HW6", "6.1"),
            r"HW6 6\.1 .*: test_zero1$", 0.0),                                 # p = 1-2 and p = 3-4, both > 1
}


@pytest.mark.parametrize("homework", sorted(CASES))
def test_a_piece_that_hunts_for_the_other_ranks_inputs_gets_what_it_deserves(tmp_path, homework):
    """The hunt rebuilds nothing; the graded test gives the piece without communication its share
    (p = 1 where graded) and the task's rubric entry nothing; results.json is written and nothing of
    the sandbox is left. About 20-40 s each."""
    name, mutation, only, share = CASES[homework]
    sub = make_submission(tmp_path / homework, {name: mutation}, homework=homework)
    out = tmp_path / "results.json"
    with correct_neighbour(tmp_path) as beside:
        results = run(sub, homework, only=only, out=str(out), jobs=2)
        beside.append(results)
    graded = [t for t in results["tests"][1:] if t["max_score"]]
    tested = [t for t in graded if re.search(only.split(": ", 1)[1], t["name"])]
    assert len(tested) == 1, [t["name"] for t in graded]
    output = tested[0]["output"]
    assert "ATTACK-NOTHING-REBUILT" in output, output[-3000:]          # the hunt ran (and found no maker)
    assert not re.search(r"ATTACK-REBUILT: (?!every rank's input in memory)", output), output[-3000:]
    assert results["score"] <= tested[0]["max_score"] * share + 1e-3, [(t["name"], t["score"]) for t in graded]
    assert results["score"] >= tested[0]["max_score"] * share - 1e-3, [(t["name"], t["score"]) for t in graded]
    assert json.loads(out.read_text())["score"] == results["score"]
    check_nothing_left(results)

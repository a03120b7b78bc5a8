"""Hostile submissions, issue 25: the job's store as a side channel between ranks must earn nothing.

The job's c10d TCPStore (its server in the launcher: launching/stores.py) is reachable from rank code
(`group._backend._store`, or the garbage collector on mpi). The kernel's count of traffic between rank
processes leaves rank-to-launcher connections out, so STORE below (what a student would write into
naive_all_reduce and ring_all_reduce) sets its input in the store, gets every other rank's, combines
them locally and then sends exactly the algorithm's messages (same sizes, same peers) with zeros in
them: right values, traffic and counters that agree with the kernel. Before the grader measured
what each rank receives from the store (observe/store_check.py) it took the hidden tests' full marks
(19 of 19 points, p = 1..8, namespaces on). Now every case with p > 1 fails with the store's byte count:
naive_all_reduce reads through the ranks' own client, ring_all_reduce through a client of its own
that it closes before the run ends (counted from the kernel's announcements of freed sockets).
"""

import json
import os
import textwrap

import pytest

from tests.kit.forgeries import NAIVE_MESSAGES
from tests.kit.submissions import grade_at_sizes, insert_after_marker, make_submission
from tests.kit.test_hostile import correct_neighbour, sandboxed_processes, uids_of

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox's user layer needs root (CI runs as root)")]

STORE = '''
import gc as _gc, sys as _y
import torch as _t
import torch.distributed as _dist
_p, _me = group.size, group.rank
_buf = flat(x, "all_reduce")
def _found_store():
    _s = getattr(getattr(group, "_backend", None), "_store", None)
    if isinstance(_s, _dist.Store):
        return _s, "group._backend._store"
    for _o in _gc.get_objects():                   # mpi ranks: the deadlock board's client
        _d = _o if type(_o) is dict else getattr(_o, "__dict__", None)
        for _v in list(_d.values()) if type(_d) is dict else ():
            if isinstance(_v, _dist.TCPStore):
                return _v, "gc"
    return None, "none"
if _p > 1 and _buf.numel() > 0:
    _s, _how = _found_store()
    if CLIENT == "own":                            # a client of its own, closed before the run ends
        _s, _how = _dist.TCPStore(_s.host, _s.port, is_master=False), f"own client of {_how}"
    _seq = _y.__dict__.setdefault("_forge_seq", [0])
    _seq[0] += 1
    _key = f"forge/{_p}/{_seq[0]}"
    _s.set(f"{_key}/{_me}", _buf.detach().cpu().contiguous().view(_t.uint8).numpy().tobytes())
    _xs = [_t.frombuffer(bytearray(_s.get(f"{_key}/{r}")), dtype=_t.uint8).view(_buf.dtype) for r in range(_p)]
    _res = _xs[0].clone()
    for _v in _xs[1:]:
        combine_(_res, _v, op)
    del _s
    print(f"ATTACK-STORE: {_how}, {_p} inputs read from the job's store", flush=True)
    _junk = _t.zeros_like(_buf)                    # the algorithm's messages, same sizes and peers, no data
    if ALGORITHM == "naive":
''' + textwrap.indent(NAIVE_MESSAGES, " " * 8) + '''    else:
        reduce_scatter_(_junk, group, op)
        all_gather_(_junk, group)
    _buf.copy_(_res.to(_buf.device))
print("ATTACK-DONE: STORE", flush=True)
return x
'''

ONLY = r"HW1 1\.[47] .*: test_(naive|ring)_all_reduce$"        # the hidden tests, one case per world size
SOME_SIZES = (1, 3, 8)


def store_attack(algorithm: str, client: str) -> str:
    return STORE.replace("ALGORITHM", repr(algorithm)).replace("CLIENT", repr(client))


def test_inputs_exchanged_through_the_store_score_nothing(tmp_path):
    """Every case fails but p = 1 (an all-reduce of one rank is x itself: deserved), with the bytes each
    rank received from the store in its feedback; results.json is written; no process is left. One
    grading of the hidden naive and ring tests at p = 1, 3 and 8 (about 10 s)."""
    sub = make_submission(tmp_path / "store", {"all_reduce.py": lambda s: insert_after_marker(
        "1.7", store_attack("ring", "own"))(insert_after_marker("1.4", store_attack("naive", "found"))(s))})
    out = tmp_path / "results.json"
    with correct_neighbour(tmp_path) as beside:
        results, graded = grade_at_sizes(sub, ONLY, SOME_SIZES, out)
        beside.append(results)
    tests = [graded["test_naive_all_reduce"], graded["test_ring_all_reduce"]]
    deserved = sum(t["max_score"] / len(SOME_SIZES) for t in tests)            # the p = 1 cases
    assert results["score"] <= deserved + 1e-3, [(name, t["score"]) for name, t in graded.items()]   # rounded
    for t, how in zip(tests, ("received", "on connections to it closed during the run")):
        assert "ATTACK-DONE: STORE" in t["output"], f"the attack did not run in {t['name']}"
        assert "from the job's store" in t["output"] and how in t["output"], t["output"][-2000:]
    assert json.loads(out.read_text())["score"] == results["score"]
    assert sandboxed_processes(uids_of(results)) == [], "sandboxed processes outlived the grading"

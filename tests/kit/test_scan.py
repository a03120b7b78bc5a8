"""autograder.scan: each family of suspicious code is found, and the reference solutions give nothing.

Snippets are written to files in tmp_path and scanned as if they were an editable file of
hw1 (minitorch_dist/collectives/ring.py), so relative imports resolve as they would there.
"""

import os
import textwrap

import pytest

from autograder.scan import Finding, format_findings, scan_file, scan_submission
from tools.overlay import ROOT, homework_manifest
from tools.release import homeworks

REL = "minitorch_dist/collectives/ring.py"


def scan(tmp_path, code, rel=REL):
    path = tmp_path / "snippet.py"
    path.write_text(textwrap.dedent(code))
    return scan_file(str(path), rel)


# (kind expected, code) -- one positive case per family, several for the wide ones.
POSITIVE = [
    ("runtime-private", "from minitorch_dist.runtime import _registry"),
    ("runtime-private", "import minitorch_dist\nminitorch_dist.runtime._state = 1"),
    ("runtime-private", "from minitorch_dist.runtime.transports.wire import _NUDGE"),
    ("runtime-internal", "from minitorch_dist.runtime.observe.trace import Recorder"),
    ("runtime-internal", "from ..runtime import tracker"),
    ("runtime-internal", "from minitorch_dist import runtime\nx = runtime.sim.p2p.post_send"),
    ("runtime-internal", "from minitorch_dist.runtime.launching.attach import world_group"),
    ("world-group", "from minitorch_dist import world_group\ng = world_group()"),
    ("world-group", "import minitorch_dist\ng = minitorch_dist.runtime.world_group()"),
    ("private-attribute", "def f(group):\n    return group._backend"),
    ("private-attribute", "class A:\n    def f(self):\n        return self.group._ctx"),
    ("private-attribute", "def f(group):\n    return getattr(group, '_counters')"),
    ("gc", "import gc\nobjs = gc.get_objects()"),
    ("runtime-state", "def f(group):\n    group.counters.bytes_sent = 0"),
    ("runtime-state", "def f(group, n):\n    group.counters.messages_sent -= n"),
    ("runtime-state", "def f(res):\n    res.sim_time = 1.0"),
    ("sim-clock", "def f(group, t):\n    group.compute(t)"),
    ("harness", "from assignments.hw1.tests.hw1_ranks import make_input"),
    ("harness", "def f(frame):\n    return frame['cases']  # rank_runs"),
    ("native", "import ctypes"),
    ("native", "from cffi import FFI"),
    ("sys", "import sys\nsys.modules['minitorch_dist.runtime.observe.trace'] = None"),
    ("frames", "import sys\nframe = sys._getframe(1)"),
    ("frames", "import inspect"),
    ("frames", "def f():\n    try:\n        1 / 0\n    except Exception as e:\n        return e.__traceback__.tb_frame"),
    ("frames", "def f(frame):\n    return frame.f_back.f_locals"),
    ("frames", "def f(fn):\n    return fn.__globals__"),
    ("tracing", "import sys\nsys.settrace(lambda *a: None)"),
    ("tracing", "import sys\nsys.setprofile(None)"),
    ("tracing", "from sys import addaudithook"),
    ("dynamic-import", "import importlib\nm = importlib.import_module('minitorch_dist.runtime.observe.trace')"),
    ("dynamic-import", "m = __import__('gc')"),
    ("builtins", "import builtins\nbuiltins.print = None"),
    ("builtins", "__builtins__['open'] = None"),
    ("setattr", "import minitorch_dist\nsetattr(minitorch_dist.Group, 'send', None)"),
    ("setattr", "def f(group):\n    delattr(group, 'recv')"),
    ("monkeypatch", "from minitorch_dist import Group\nGroup.all_reduce = lambda *a: None"),
    ("monkeypatch", "def f(group):\n    type(group).send = None"),
    ("torch-distributed", "import torch.distributed as dist\ndist.all_reduce(t)"),
    ("torch-distributed", "import torch\ntorch.distributed.all_reduce(t)"),
    ("torch-distributed", "from torch import distributed"),
    ("process", "import subprocess"),
    ("process", "import os\nos.system('ls')"),
    ("process", "import os\npid = os.fork()"),
    ("process", "import os\nos.execv('/bin/sh', ['sh'])"),
    ("process", "from multiprocessing import Process"),
    ("signal", "import os\nos.kill(1, 9)"),
    ("signal", "import os\nos.killpg(0, 9)"),
    ("signal", "import signal"),
    ("network", "import socket"),
    ("open-path", "data = open('/proc/self/maps').read()"),
    ("open-path", "data = open(f'/dev/shm/{name}', 'rb')"),
    ("open-path", "data = open('/etc/passwd').read()"),
    ("dynamic-code", "exec('x = 1')"),
    ("dynamic-code", "y = eval('1 + 1')"),
    ("dynamic-code", "code = compile('x', 'f', 'exec')"),
    ("serialization", "import pickle"),
    ("serialization", "import marshal"),
    ("environ", "import os\nos.environ['MINITORCH_DIST_DEADLINE'] = '1000'"),
    ("environ", "import os\nos.environ.update(A='1')"),
    ("environ", "from os import environ\ndel environ['X']"),
    ("environ", "import os\nos.putenv('A', '1')"),
    ("grader", "from autograder import plugin"),
    ("grader", "name = 'AUTOGRADER_RESULTS'"),
    ("proc", "from pathlib import Path\nmaps = Path('/proc/self/maps').read_text()"),
    ("device", "from pathlib import Path\nmem = Path('/dev/shm/x')"),
]


@pytest.mark.parametrize("kind,code", POSITIVE, ids=[f"{k}-{i}" for i, (k, _) in enumerate(POSITIVE)])
def test_each_family_is_found(tmp_path, kind, code):
    findings = scan(tmp_path, code)
    assert kind in {f.kind for f in findings}, format_findings(findings)
    for f in findings:
        assert f.file == REL and f.line >= 1 and "\n" not in f.text and len(f.text) > 20


NEGATIVE = [
    "import threading\nt = threading.Thread(target=print)",
    "def f(model):\n    model.eval()",
    "import re\npattern = re.compile('x')",
    "import torch\nf = torch.compile(lambda x: x)",
    "class A:\n    def __init__(self):\n        self._handles = []\n        setattr(self, 'x', 1)\n"
    "        super().__init__()\n        self._handles.append(1)",
    "from minitorch_dist import Group, SimNetwork, launch, cost_model",
    "from minitorch_dist.runtime import Group, DeadlockError\nfrom minitorch_dist.runtime.errors import RankError",
    "from .common import check_op, chunk_bounds, combine_",
    "import os\nlevel = os.environ.get('LEVEL', '1')",
    "with open('notes.txt') as f:\n    pass",
    "import torch\nx = torch.zeros(3)\nx.grad = None\nn = x.__class__.__name__",
    "def f(p):\n    p.grad = p.grad / 2",
]


@pytest.mark.parametrize("code", NEGATIVE)
def test_ordinary_homework_code_is_not_flagged(tmp_path, code):
    assert scan(tmp_path, code) == [], format_findings(scan(tmp_path, code))


def test_the_reference_solutions_give_no_findings():
    """Each homework's reference files, scanned as the grader scans a submission (with the homework's
    scan_allow), give nothing: a correct student is never flagged."""
    checked = 0
    for hw in homeworks():
        manifest = homework_manifest(hw)
        findings = scan_submission(os.path.join(ROOT, "solutions"), manifest["editable"], manifest.get("scan_allow", ()))
        assert findings == [], f"{hw}:\n{format_findings(findings)}"
        checked += len(manifest["editable"])
    assert checked >= 20
    assert scan_submission(os.path.join(ROOT, "solutions"), homework_manifest("hw6")["editable"]), \
        "hw6's FSDP uses setattr on modules: without its scan_allow the scan flags it"


def test_a_file_that_does_not_parse_gives_no_findings(tmp_path):
    assert scan(tmp_path, "import gc\ndef broken(:\n    open('/proc/self/mem')\n") == []


def test_scan_submission_and_the_table(tmp_path):
    kit = tmp_path / "kit"
    os.makedirs(kit / "minitorch_dist" / "collectives")
    (kit / REL).write_text("import gc\n\ndef ring(group):\n    return group._backend\n")
    tree = "minitorch_dist/collectives/tree.py"
    (kit / tree).write_text("def broadcast(group):\n    return group.rank\n")
    findings = scan_submission(str(kit), [REL, tree])
    assert [(f.file, f.line, f.kind) for f in findings] == [(REL, 1, "gc"), (REL, 4, "private-attribute")]
    table = format_findings(findings)
    assert table.splitlines()[0].split() == ["file", "line", "kind", "why"]
    assert f"{REL}      1  gc" in table and "private-attribute" in table and len(table.splitlines()) == 3
    assert format_findings([]) == "no findings"
    assert Finding(REL, 1, "gc", "x") == Finding(REL, 1, "gc", "x")

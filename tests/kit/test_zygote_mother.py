"""autograder.zygote_mother: zygotes forked from one process that imported torch once, each one as a
fresh `python -m autograder.zygote` in its own kit copy would be (its modules, sys.path, environment
as /proc shows it, bytecode setting), one mother per environment that torch's import reads."""

from __future__ import annotations

import json
import os
import sys

import psutil
import pytest

from autograder import isolate, zygote_mother
from autograder.runner import ForkedZygote, ZygoteRunner
from tools.overlay import ROOT

pytestmark = pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="the mother needs Linux's pidfds")

PROBE = """import json, os, sys
import autograder, torch

def test_probe():
    print("PROBE" + json.dumps({"autograder": autograder.__file__, "path": sys.path, "cwd": os.getcwd(),
                                "environ": open("/proc/self/environ", "rb").read().decode(errors="replace"),
                                "no_pyc": sys.dont_write_bytecode, "threads": torch.get_num_threads()}))
"""


def kit_copy(folder) -> str:
    """A kit copy as cheap as links: its packages are the kit's, found under the copy's own path."""
    os.makedirs(folder)
    for name in ("autograder", "minitorch_dist", "assignments", "tests", "pyproject.toml"):
        os.symlink(os.path.join(ROOT, name), os.path.join(folder, name))
    return str(folder)


def probe(runner: ZygoteRunner, tmp_path, name: str) -> dict:
    test = tmp_path / f"test_{name}.py"
    test.write_text(PROBE)
    out = tmp_path / f"{name}.out"
    reply = runner.run(["-q", "-s", "-p", "no:cacheprovider", str(test)], {}, str(out), limit=120)
    text = out.read_text()
    assert reply["status"] == "exited" and reply["code"] == 0, text[-3000:]
    return json.loads(text.split("PROBE", 1)[1].splitlines()[0])


def test_zygotes_of_two_kit_copies_come_from_one_mother_and_each_runs_its_own_copy(tmp_path):
    zygote_mother.close_all()
    runners = []
    try:
        seen = []
        for name in ("a", "b"):
            root = kit_copy(tmp_path / f"kit-{name}")
            env = dict(os.environ, PYTHONPATH=root, PYTHONDONTWRITEBYTECODE="1", **{isolate.TOKEN_VAR: f"token-{name}"})
            runner = ZygoteRunner(root, env)
            runners.append(runner)
            assert isinstance(runner.proc, ForkedZygote)
            got = probe(runner, tmp_path, name)
            assert got["autograder"] == os.path.join(root, "autograder", "__init__.py"), got["autograder"]
            assert root in got["path"] and ROOT not in got["path"], got["path"]     # not the mother's kit
            assert got["cwd"] == root and got["no_pyc"] is True
            environ = got["environ"].split("\0")
            assert f"{isolate.TOKEN_VAR}=token-{name}" in environ and f"PYTHONPATH={root}" in environ
            assert not any(entry.startswith(zygote_mother.AREA_VAR) for entry in environ)
            # the sweep's token is where a zygote started as a fresh Python had it, in its /proc environ
            assert [p.pid for p in isolate.carriers(f"token-{name}")] == [runner.proc.pid]
            seen.append(runner.proc.pid)
        mothers = zygote_mother.pids()
        assert len(mothers) == 1
        import psutil
        assert {psutil.Process(pid).ppid() for pid in seen} == mothers
    finally:
        for runner in runners:
            runner.close()
        zygote_mother.close_all()
    assert zygote_mother.pids() == set()


def test_another_thread_setting_gets_another_mother_and_a_dead_mother_is_replaced(tmp_path):
    zygote_mother.close_all()
    root = kit_copy(tmp_path / "kit")
    runners = []
    try:
        for threads in ("1", "2"):
            env = dict(os.environ, PYTHONPATH=root, OMP_NUM_THREADS=threads)
            runners.append(ZygoteRunner(root, env))
            assert probe(runners[-1], tmp_path, f"t{threads}")["threads"] == int(threads)
        assert len(zygote_mother.pids()) == 2
        for pid in zygote_mother.pids():
            isolate.kill_tree(pid)         # as a --no-zygote grading's sweep of its children would
        runner = ZygoteRunner(root, dict(os.environ, PYTHONPATH=root, OMP_NUM_THREADS="1"))
        runners.append(runner)
        assert isinstance(runner.proc, ForkedZygote) and probe(runner, tmp_path, "again")["threads"] == 1
    finally:
        for runner in runners:
            runner.close()
        zygote_mother.close_all()


def test_a_homework_preload_gets_a_mother_that_imported_it_and_never_a_kit_module(tmp_path):
    """hw2, 3, 5 and 6 preload torch._dynamo (0.8-1.0 s of CPU, about 70 MiB): their mother imports it
    once, another mother serves the homeworks without it; a preload naming the kit stays the zygote's."""
    assert zygote_mother.site_preload({"AUTOGRADER_PRELOAD": "torch._dynamo,minitorch_dist.runtime,tests.x,"
                                                             "autograder.plugin"}) == "torch._dynamo"
    zygote_mother.close_all()
    root = kit_copy(tmp_path / "kit")
    runners, sizes = [], {}
    try:
        for preload in ("", "torch._dynamo"):
            before = zygote_mother.pids()
            runners.append(ZygoteRunner(root, dict(os.environ, PYTHONPATH=root, AUTOGRADER_PRELOAD=preload)))
            (mother,) = zygote_mother.pids() - before       # it answered the fork: its imports are done
            assert psutil.Process(runners[-1].proc.pid).ppid() == mother
            sizes[preload or "none"] = psutil.Process(mother).memory_info().rss >> 20
        assert sizes["torch._dynamo"] >= sizes["none"] + 30, f"the mothers' memory (MiB): {sizes}"
    finally:
        for runner in runners:
            runner.close()
        zygote_mother.close_all()


def test_an_environment_too_large_for_the_room_gets_a_zygote_of_its_own(tmp_path):
    root = kit_copy(tmp_path / "kit")
    big = dict(os.environ, PYTHONPATH=root, BIG="x" * zygote_mother.ENV_AREA)
    runner = ZygoteRunner(root, big)
    try:
        assert not isinstance(runner.proc, ForkedZygote)
        assert root in probe(runner, tmp_path, "big")["path"]
    finally:
        runner.close()
        zygote_mother.close_all()


def test_without_pidfds_or_when_switched_off_each_zygote_is_a_fresh_python(tmp_path, monkeypatch):
    root = kit_copy(tmp_path / "kit")
    env = dict(os.environ, PYTHONPATH=root)

    def refused(pid):
        raise PermissionError("pidfd_open refused (a container's seccomp filter)")
    for setting in ("refused", "switched off"):
        with monkeypatch.context() as m:
            if setting == "refused":
                m.setattr(os, "pidfd_open", refused)
            else:
                m.setenv("AUTOGRADER_NO_MOTHER", "1")
            runner = ZygoteRunner(root, env)
            try:
                assert not isinstance(runner.proc, ForkedZygote), setting
                assert root in probe(runner, tmp_path, setting.replace(" ", "_"))["path"]
            finally:
                runner.close()


def test_a_warmed_mother_forks_the_first_zygote(tmp_path):
    """GradingSession warms the mother before it copies the kit, so that torch's import overlaps the copy."""
    zygote_mother.close_all()
    root = kit_copy(tmp_path / "kit")
    env = dict(os.environ, PYTHONPATH=root)
    zygote_mother.warm(env)
    warmed = zygote_mother.pids()
    runner = ZygoteRunner(root, env)
    try:
        import psutil
        assert len(warmed) == 1 and zygote_mother.pids() == warmed
        assert {psutil.Process(runner.proc.pid).ppid()} == warmed
    finally:
        runner.close()
        zygote_mother.close_all()

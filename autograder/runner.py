"""Run one pytest job in its own session with a wall-clock limit: forked from a zygote, or a fresh python.

    runner = make_runner(kit_root, env, zygote=True)
    reply = runner.run(args=[...], env={...}, output="out.txt", limit=60)
    runner.close()

`reply` is {"status": "exited" | "timeout" | "error", "code", "wall", "leftover", "error"?, "host_output"?}.
With `box` (an autograder.sandbox.Sandbox) and `scratch`, the job gets a rank host in that sandbox
(autograder.rank_host) and every process of the sandbox uid is killed when it ends.
Both runners kill the job's whole process tree on expiry (autograder.isolate). A zygote that
dies or stops answering is killed and restarted; the job it was running is an "error".
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import time

from autograder import isolate, zygote_mother

ZYGOTE_START_LIMIT = 300.0   # importing torch on a loaded 2-core machine has taken 20 s
REPLY_GRACE = 30.0           # beyond a job's limit, how long the zygote may take to answer


class SubprocessRunner:
    """Each job is `python -m pytest ARGS` in a new session (pays the torch import every time)."""

    def __init__(self, root: str, env: dict, share=None):
        self.root, self.env, self.share = root, env, share
        isolate.become_subreaper()

    network = "unavailable: --no-zygote (the test process and its ranks would be in different namespaces)"

    def run(self, args: list[str], env: dict, output: str, limit: float, box=None, scratch=None) -> dict:
        from autograder import rank_host
        host = None
        if box is not None:
            spec = json.dumps({**rank_host.box_spec(box), "scratch": scratch})
            out = rank_host.open_output(scratch)
            try:
                host = subprocess.Popen([sys.executable, "-m", "autograder.rank_host", spec], cwd=self.root,
                                        env=self.env, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                        start_new_session=True)
            finally:
                os.close(out)
            rank_host.wait_for_socket(scratch, host.pid, limit=120.0)
            env = {**env, **rank_host.host_env(scratch)}
        with open(output, "wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "pytest", *args], cwd=self.root,
                                    env={**self.env, **env}, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        if self.share is not None:
            self.share.join_grading(proc.pid)
        status, code, wall = isolate.wait_limited(proc.pid, limit)
        proc.returncode = code if code is not None else -9
        leftover = max(0, box.kill_all() - 1) if box is not None else 0
        leftover += isolate.reap_children()
        reply = {"status": status, "code": code, "wall": round(wall, 3), "leftover": leftover}
        if host is not None:
            host.wait()
            reply["host_output"] = rank_host.output_tail(scratch)
        return reply

    def close(self) -> None:
        isolate.reap_children()


class ZygoteRunner:
    """Jobs are forked from one warm helper process (autograder.zygote) running in the kit copy."""

    def __init__(self, root: str, env: dict, share=None):
        self.root, self.env, self.share = root, env, share
        self.network = "unavailable"
        self.proc: subprocess.Popen | None = None
        self._log = tempfile.TemporaryFile()
        self._buf = b""
        self._start()

    def _start(self) -> None:
        self._buf = b""
        self.proc = _forked(self.root, self.env, self._log) if zygote_mother.available() else None
        if self.proc is None:
            env = dict(self.env, AUTOGRADER_PARENT=str(os.getpid()))   # the zygote ends its test if we die
            self.proc = subprocess.Popen([sys.executable, "-m", "autograder.zygote"], cwd=self.root, env=env,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
                                         start_new_session=True)
        if self.share is not None:       # before it forks anything: it forks only for jobs, sent later
            self.share.join_grading(self.proc.pid)
        hello = self._readline(ZYGOTE_START_LIMIT)
        if hello is None or "ready" not in hello:
            self._kill()
            raise RuntimeError(f"the grading helper (autograder.zygote) did not start:\n{self._log_tail()}")
        self.network = hello.get("network", "unavailable")

    def _log_tail(self) -> str:
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-3000:]

    def _readline(self, limit: float) -> dict | None:
        deadline = time.monotonic() + limit
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def _kill(self) -> None:
        if self.proc is not None:
            isolate.kill_tree(self.proc.pid)
            self.proc.wait()
            self.proc = None

    def run(self, args: list[str], env: dict, output: str, limit: float, box=None, scratch=None) -> dict:
        from autograder import rank_host
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        job = {"args": args, "env": env, "cwd": self.root, "output": output, "limit": limit,
               "sandbox": rank_host.box_spec(box) if box is not None else None, "scratch": scratch}
        try:
            self.proc.stdin.write((json.dumps(job) + "\n").encode())
            self.proc.stdin.flush()
            reply = self._readline(limit + REPLY_GRACE)
        except OSError:
            reply = None
        if reply is None:
            problem = f"the grading helper stopped answering or died:\n{self._log_tail()}"
            self._kill()
            return {"status": "error", "code": None, "wall": limit, "leftover": 0, "error": problem}
        return reply

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                # "quit" first: the end of input comes only once every process holding this pipe's write
                # end closed it, and a process the grader forked since (a warm launch pool) holds it too
                self.proc.stdin.write(b'"quit"\n')
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self._kill()
        self._log.close()


class ForkedZygote:
    """A zygote forked by this grader's mother (autograder.zygote_mother): not our child, so it is
    watched through a pidfd; Popen's pid, stdin, stdout, poll() and wait() for ZygoteRunner."""

    def __init__(self, pid: int, stdin, stdout):
        self.pid, self.stdin, self.stdout, self.returncode = pid, stdin, stdout, None
        self._fd = os.pidfd_open(pid)

    def poll(self) -> int | None:
        return self.wait(timeout=0) if self.returncode is None else self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        if self.returncode is None:
            if not select.select([self._fd], [], [], timeout)[0]:
                if timeout == 0:
                    return None
                raise subprocess.TimeoutExpired("autograder.zygote", timeout)
            self.returncode = -1             # ended (its exit status goes to the mother, its parent)
            os.close(self._fd)
            for f in (self.stdin, self.stdout):
                try:
                    f.close()
                except OSError:
                    pass
        return self.returncode


def _forked(root: str, env: dict, log) -> ForkedZygote | None:
    """A zygote from this grader's mother, talking over two new pipes; None where none could be forked."""
    to_read, to_write = os.pipe()            # the zygote's stdin
    from_read, from_write = os.pipe()        # its stdout
    try:
        env = {k: v for k, v in env.items() if k != "AUTOGRADER_PARENT"}    # its parent: the mother
        got = zygote_mother.fork_zygote(root, env, (to_read, from_write, log.fileno()))
    finally:
        os.close(to_read)
        os.close(from_write)
    if got is None:
        os.close(to_write)
        os.close(from_read)
        return None
    try:
        return ForkedZygote(got, os.fdopen(to_write, "wb"), os.fdopen(from_read, "rb", buffering=0))
    except OSError:                          # it ended already: the caller starts a fresh one
        os.close(to_write)
        os.close(from_read)
        return None


def make_runner(root: str, env: dict, zygote: bool = True, share=None):
    """A ZygoteRunner (default) or a SubprocessRunner for jobs in the kit copy at `root`; `share`
    (autograder.cgroups.FairShare) takes its processes in."""
    return ZygoteRunner(root, env, share) if zygote else SubprocessRunner(root, env, share)

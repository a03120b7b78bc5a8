"""A grading session: one grader's copy, its runners and its collected tests, for any number of
submissions of one homework in turn (autograder.grade grades one; the mutation suite grades many).

    with GradingSession("hw1", jobs=2) as session:
        results = session.grade("submission.zip", out="results.json")
        results = session.grade("other/", only=r"HW1 1\\.4 ", stop_at_first_failure=True)

Set up once: the grader's copy (stubs and tests, never a submission), its runners (zygotes,
one per job, in a network namespace), the collected tests and a sandbox per runner. Per
submission: the student's copy at the same path, put back as made (kit_copies.StudentKit), the
submission laid over it and sealed, the selected tests run, every process of the sandbox uids
killed, the results scored.
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import os
import re
import secrets
import shutil
import sys
import tempfile
import time

from autograder import bindings, isolate, leftovers, zygote_mother
from autograder.cgroups import FairShare
from autograder.collect import DEFAULT_LIMIT, JOB_ENV, collect, default_suites, test_files
from autograder.devices import describe_device, resolve_device, scale_limits, set_aside_gpu_tests
from autograder.jobs import run_all, task_order
from autograder.kit_copies import StudentKit, compile_kit, open_interpreter, protect_secrets, seal
from autograder.results import GradedTest, results_json, summary_table, write_results
from autograder.rubric import points_summary, rubric_tests
from autograder.runner import make_runner
from autograder.sandbox import Sandbox, is_root, probe_private_ipc
from autograder.scan import format_findings, scan_submission
from autograder.submission import lay_submission
from tools.overlay import ROOT, copy_kit, homework_manifest
from tools.stubs import builds_on, lay_references

DEFAULT_DEADLINE = 10.0
NOT_GRADED = ("autograder/mutants/", "lectures/", "examples/", "benchmarks/")   # never in a grader's copy:
                                        # no test imports them (the seeded bugs are most of the kit's files)
MAX_RANK_OUTPUT = 8 << 20       # bytes of rank output a test process prints (the rest is cut, and said)
MAX_REPLY = 64 << 20            # bytes of one message from the sandbox (a rank's reply, a sim run's result)
MAX_REPLIES = 192 << 20         # bytes of all ranks' replies to one run: with MAX_REPLY in flight and its
MEMORY_BUDGET_MIB = 512         # decoded copy, a test process stays within this much above the zygote


class GradingSession:
    """Grade submissions of `homework` one after the other with one set of runners (see module doc).

    jobs > 1 runs that many test functions at once, each zygote forking its own (zygote only).
    sandbox=False runs the rank hosts as this user with no sandbox (debugging); namespaces=False
    grades as in a container that refuses them (Gradescope's Docker may): every other layer stays.
    limits overrides some of sandbox.LIMITS. suites replaces the homework's test folders (then the
    homework's rubric, which is written for its own tests, is not applied). device: "auto" (cuda
    where torch sees a GPU, else cpu), "cpu" or "cuda" (ValueError here, before anything starts,
    without a GPU); on cpu the tests marked gpu are reported not run (autograder.devices).
    """

    def __init__(self, homework: str, *, zygote: bool = True, deadline: float = DEFAULT_DEADLINE,
                 limit: float = DEFAULT_LIMIT, suites: list[tuple[str, str]] | None = None, quiet: bool = False,
                 jobs: int = 1, sandbox: bool = True, namespaces: bool = True, limits: dict | None = None,
                 device: str = "auto"):
        self.device = resolve_device(device)
        self.device_label = describe_device(self.device)
        self.homework, self.deadline, self.quiet, self.zygote = homework, deadline, quiet, zygote
        self.manifest = manifest = homework_manifest(homework)
        self.rubric = manifest.get("rubric") if suites is None else None
        if suites is None:
            suites = default_suites(manifest, ROOT)
        self.token = secrets.token_hex(8)
        self.kit = tempfile.mkdtemp(prefix="autograder-kit-")            # the grader's copy: stubs, hidden tests
        self.records = tempfile.mkdtemp(prefix="autograder-run-")        # records and outputs: root only
        self.outside = tempfile.mkdtemp(prefix="autograder-student-")    # the student kit and test scratch
        leftovers.claim(self.records, [self.kit, self.outside])          # swept by a later session if killed
        leftovers.sweep_dead()
        os.chmod(self.outside, 0o711)
        self.student_kit = os.path.join(self.outside, "kit")
        scratch_root = os.path.join(self.outside, "scratch")
        os.makedirs(scratch_root, mode=0o711)
        os.chmod(scratch_root, 0o711)
        self.runners, self.boxes, self.layers = [], [], {}
        self.share = None
        self.student: StudentKit | None = None        # made at the first grade(), put back at each next one
        self.tests: list[GradedTest] = []
        self.escaped = 0
        try:                                                # (a signal from here on: close() cleans up)
            env = dict(os.environ, PYTHONPATH=self.kit, PYTHONDONTWRITEBYTECODE="1",
                       **{isolate.TOKEN_VAR: self.token}, AUTOGRADER_PRELOAD=",".join(manifest.get("preload", [])),
                       **JOB_ENV)
            env.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")     # c10d's hostname warnings in a network namespace
            if zygote:
                zygote_mother.warm(env)                     # torch's import meanwhile, in the zygotes' mother
            copy_kit(self.kit, skip=NOT_GRADED)
            compile_kit(self.kit)
            if sandbox and is_root():
                self.layers["files"] = protect_secrets(ROOT)
                opened = open_interpreter()
                if opened:
                    self.layers["files"] += (f"; search permission given on {', '.join(opened)} so the sandbox "
                                             f"can run Python")
            env["MINITORCH_DIST_MAX_OUTPUT"] = str(MAX_RANK_OUTPUT)
            env["MINITORCH_DIST_MAX_REPLY"], env["MINITORCH_DIST_MAX_REPLIES"] = str(MAX_REPLY), str(MAX_REPLIES)
            env["MINITORCH_DIST_KERNEL_TRAFFIC"] = "1"      # gloo and mpi runs: bytes as the kernel counts
            env["AUTOGRADER_NETNS"] = "1" if sandbox and namespaces and is_root() else "0"
            isolation = _runtime_module("minitorch_dist.runtime.launching.isolation")
            self.layers["isolation"] = isolation.layer() if sandbox else "unavailable: switched off (--no-sandbox)"
            if self.layers["isolation"].startswith("active"):
                env[isolation.VAR] = "1"                    # each rank in a Landlock domain of its own
            if sandbox:
                env[isolation.ENGINE_VAR] = "1"             # a sim run's clock in an engine process
            self.share = FairShare.create() if sandbox else None
            self.runners.append(make_runner(self.kit, env, zygote=zygote, share=self.share))
            self.tests, self.problems = collect(self.runners[0], self.kit, manifest, suites, self.records, limit)
            scale_limits(self.tests, self.device)
            self.tests.sort(key=task_order)
            self.hidden = [f for target, vis in suites if vis != "visible" for f in test_files(self.kit, target)]
            self.runners += [make_runner(self.kit, env, zygote=True, share=self.share)
                             for _ in range(max(1, jobs) - 1 if zygote else 0)]
            ipc = (probe_private_ipc() if sandbox and namespaces else
                   f"unavailable: switched off (--no-{'namespaces' if sandbox else 'sandbox'})")
            taken: set[int] = set()
            for _ in self.runners:               # a uid per runner; the first one's gid reads the student kit
                self.boxes.append(Sandbox.create(self.kit, self.student_kit, scratch_root,
                                                 self.boxes[0].gid if self.boxes else None, taken,
                                                 own_user=sandbox, limits=limits, private_ipc=ipc.startswith("active"),
                                                 cgroups=self.share.sandbox_procs if self.share else None))
            self.layers.update(self.boxes[0].layers)
            self.layers["ipc"] = ipc
            self.layers["fair share"] = self.share.layer if self.share else "unavailable: switched off (--no-sandbox)"
            self.layers["traffic"] = traffic_layer()
            if self.boxes[0].uid is not None:
                self.layers["files"] = self.layers.get("files", "") + (
                    "; the student kit copy is root-owned and group-readable, the grader's copy, records and "
                    "results root-only, a private scratch folder per test")
            else:
                self.layers["files"] = "unavailable: no user of its own, so file permissions do not keep it out"
            self.layers["network"] = getattr(self.runners[0], "network", "unavailable") if namespaces else \
                "unavailable: switched off (--no-namespaces)"
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> "GradingSession":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def select(self, only: str | None = None) -> list[GradedTest]:
        """Fresh copies of the collected tests whose name matches `only` (all when None)."""
        tests = [copy.deepcopy(t) for t in self.tests if only is None or re.search(only, t.name)]
        if only and self.tests and not tests:
            raise ValueError(f"--only {only!r} matches none of the {len(self.tests)} tests; their names look "
                             f"like {self.tests[0].name!r} (the regular expression is searched in them)")
        return bindings.with_bound(tests, self.tests)

    def grade(self, submission: str, out: str | None = None, only: str | None = None,
              tests: list[GradedTest] | None = None, stop_at_first_failure: bool = False, show: bool = True) -> dict:
        """Grade `submission` on the tests matching `only` (or on `tests`, from select()); returns the
        results.json object and writes it to `out`. stop_at_first_failure runs the tests one at a
        time and leaves the rest unrun (counted failed) once one loses points: a quick "is it caught".
        show prints the submission check, the scan and the table (unless the session is quiet)."""
        t0 = time.monotonic()
        tests = self.select(only) if tests is None else tests
        if self.student is None:
            self.student = StudentKit(self.kit, self.student_kit,
                                      self.hidden + [os.path.join(os.path.dirname(f), "conftest.py") for f in self.hidden])
        self.student.fresh()
        check = lay_submission(submission, self.student_kit, self.manifest)
        lay_references(self.student_kit, builds_on(self.manifest))     # earlier homeworks' reference it runs on
        findings = format_findings(scan_submission(self.student_kit, check.overlaid, self.manifest.get("scan_allow", ())))
        seal(self.student_kit, self.boxes[0].gid)
        runners, boxes = (self.runners[:1], self.boxes[:1]) if stop_at_first_failure else (self.runners, self.boxes)
        run_all(runners, set_aside_gpu_tests(tests, self.device), self.kit, self.records, self.deadline,
                check.replaced_tasks(), self.quiet, boxes, prefixes=(self.student_kit,),
                stop_at_first_failure=stop_at_first_failure, device=self.device)
        bindings.apply(tests)
        escaped = sum(box.kill_all() for box in self.boxes)
        self.escaped += escaped
        report = check.report()
        if escaped:
            report += f"\n\n{escaped} process(es) outlived their tests and were killed at the end."
        check_entry = {"name": "submission check", "score": 0, "max_score": 0,
                       "status": "passed" if check.ok else "failed",
                       "output": report, "output_format": "text", "visibility": "visible"}
        elapsed = time.monotonic() - t0
        title = f"{self.manifest['name']} grade of {submission}"
        graded = rubric_tests(tests, self.manifest, self.rubric) if self.rubric else tests
        results = results_json(graded, check_entry, elapsed, title, self.device_label, self.manifest)
        results["extra_data"] = {"submission": submission, "device": self.device_label, "swept_at_end": escaped,
                                 "runner": "zygote" if self.zygote else "subprocess", "sandbox": dict(self.layers),
                                 "collection_problems": self.problems, "static_scan": findings,
                                 "sandbox_uids": [box.uid for box in self.boxes if box.uid is not None],
                                 "test_process_memory_mib": {"peak": max((t.memory_mib for t in tests), default=0.0),
                                                             "budget": MEMORY_BUDGET_MIB},
                                 **points_summary(graded, self.manifest)}       # tasks, code, bonus
        self.last_tests, self.last_check = graded, check
        if out:
            write_results(out, results)
        if show and not self.quiet:
            self.print_summary(results)
        return results

    def print_summary(self, results: dict) -> None:
        """The submission check, collection problems, scan and table of the last grade()'s `results`."""
        check, title = self.last_check, f"{self.manifest['name']} grade of {results['extra_data']['submission']}"
        report = results["tests"][0]["output"]
        print(report if not check.ok or report != check.report() else f"submission check: ok ({len(check.overlaid)} files)")
        if self.problems:
            print("Problems while collecting the tests:\n" + "\n".join(self.problems))
        print(f"static scan of the submission (instructors only):\n{results['extra_data']['static_scan']}")
        print(summary_table(self.last_tests, title, results["execution_time"], self.device_label, self.manifest))

    def close(self) -> int:
        """Stop the runners, kill and release the sandboxes, sweep, remove the copies; returns how
        many processes were still alive at the end (besides those grade() already reported)."""
        for runner in self.runners:
            runner.close()
        escaped = sum(box.kill_all() for box in self.boxes)
        for box in self.boxes:
            box.release()
        left = isolate.sweep(self.token)
        if self.share is not None:
            self.share.remove()
        for path in (self.kit, self.records, self.outside):
            shutil.rmtree(path, ignore_errors=True)
        self.runners, self.boxes = [], []
        return escaped + len(left)


def traffic_layer() -> str:
    """Whether gloo and mpi runs' counters are checked against the kernel's byte counts (the "traffic" layer)."""
    if not _runtime_module("minitorch_dist.runtime.observe.kernel_traffic").available():
        return ("unavailable: the kernel does not answer sock_diag here, so traffic tests rest on the "
                "runtime's counters, which rank code can rewrite (scan.py flags such code)")
    return ("active: the bytes between rank processes of every gloo and mpi run (mpi over loopback TCP, not "
            "shared memory), as the kernel counts them, bound the runtime's counters, provided collectives "
            "included (every homework; not the sim; bytes per rank, not which algorithm moved them)")


def _runtime_module(name: str):
    """A module of the runtime that needs only the standard library (kernel_traffic, isolation), loaded
    from its file by itself where minitorch_dist is not imported yet: importing the package imports
    torch, 1-2 s the grader's own process otherwise never spends."""
    if name in sys.modules or "minitorch_dist" in sys.modules:
        return importlib.import_module(name)
    alone = "_autograder_" + name.rsplit(".", 1)[1]
    if alone not in sys.modules:
        spec = importlib.util.spec_from_file_location(alone, os.path.join(ROOT, *name.split(".")) + ".py")
        module = sys.modules[alone] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return sys.modules[alone]

"""Short failure messages for students: the reason, and only the frames of their code and the test.

    short_message(exc, longrepr_text) -> str

- a stub (NotImplementedError, locally or on a rank): "HW1 task 1.4: ... is not implemented yet ...";
- a deadlock (DeadlockError, locally or on a rank): the runtime's wait-for report, whole;
- an assertion: its message (pytest's explanation of the comparison included);
- anything else: "Type: message" and a short traceback without grader, runtime, torch or
  pytest frames, paths relative to the kit.
"""

from __future__ import annotations

import os
import re
import traceback

MAX_MESSAGE = 4000
MAX_FRAMES = 6
NOT_IMPLEMENTED = re.compile(r"(HW\d+ task [\d.]+: [^\n]*?not implemented yet[^\n]*)")
RUNS_FAILED = re.compile(r"^(\d+) of (\d+) cases failed:", re.M)       # the harness's count (rank_runs.judge)
RUNS_NOT_RUN = re.compile(r"^(\d+) cases? not run: ", re.M)
COUNT_LINE = re.compile(r"\d+ of (?:the )?\d+ (?:cases|runs of this case) failed:?")   # a header, no reason
FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>.+)$')


def _chain(exc: BaseException | None) -> list[BaseException]:
    """exc, its causes and contexts, and a RankError's re-created `cause`, without repeats."""
    seen, out, todo = set(), [], [exc]
    while todo:
        e = todo.pop(0)
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        out.append(e)
        todo += [e.__cause__, e.__context__, getattr(e, "cause", None)]
    return out


def _kinds(chain: list[BaseException]) -> set[str]:
    names = set()
    for e in chain:
        names.add(type(e).__name__)
        if getattr(e, "exc_type", None):
            names.add(e.exc_type)       # RankError: the exception class raised on the rank
    return names


def keep_frame(filename: str) -> bool:
    """True for a frame of student code or of a test: inside the kit, outside grader and runtime."""
    rel = os.path.relpath(filename, os.getcwd()).replace(os.sep, "/")
    if rel.startswith("..") or "site-packages" in rel or rel.startswith(".venv"):
        return False
    if rel.startswith("minitorch_dist/runtime/") or rel.startswith("tools/"):
        return False
    if rel.startswith("autograder/") and not re.match(r"autograder/hw\d+/", rel):
        return False
    return True


def _relative(filename: str) -> str:
    rel = os.path.relpath(filename, os.getcwd())
    return filename if rel.startswith("..") else rel


def short_traceback(exc: BaseException) -> str:
    """The kept frames of `exc`'s traceback, innermost last, at most MAX_FRAMES."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if keep_frame(f.filename)]
    lines = [f'  File "{_relative(f.filename)}", line {f.lineno}, in {f.name}\n    {(f.line or "").strip()}'
             for f in frames[-MAX_FRAMES:]]
    return "\n".join(lines)


def filter_traceback_text(text: str) -> str:
    """A traceback as text (from a rank), with only the kept frames and the final exception line."""
    lines, out, keep = text.rstrip().splitlines(), [], False
    for line in lines:
        m = FRAME.match(line)
        if m:
            keep = keep_frame(m.group("file"))
            if keep:
                out.append(f'  File "{_relative(m.group("file"))}", line {m.group("line")}, in {m.group("func")}')
        elif line.startswith("Traceback") or not line.strip():
            keep = False
        elif line.startswith("    ") and keep:
            out.append(line)
    frames = "\n".join(out[-2 * MAX_FRAMES:])
    return frames


def _cap(text: str) -> str:
    text = text.strip()
    if len(text) > MAX_MESSAGE:
        text = text[:MAX_MESSAGE // 2] + "\n... (cut) ...\n" + text[-MAX_MESSAGE // 2:]
    return text


def short_message(exc: BaseException | None, longrepr: str = "") -> str:
    """A few lines that say why a case failed (see the module docstring)."""
    if exc is None:                                    # a collection error: only text is known
        found = NOT_IMPLEMENTED.search(longrepr)
        if found:
            return found.group(1)
        tail = [ln for ln in longrepr.splitlines() if ln.startswith("E ")]
        return _cap("\n".join(ln[1:].strip() for ln in tail) or longrepr[-MAX_MESSAGE:])
    chain = _chain(exc)
    kinds = _kinds(chain)
    text = "\n".join(str(e) for e in chain)
    if "NotImplementedError" in kinds:
        found = NOT_IMPLEMENTED.search(text + "\n" + longrepr)
        if found:
            return found.group(1)
    if type(exc).__name__ == "Failed" and hasattr(exc, "pytrace"):   # pytest.fail(msg): the message is all
        found = NOT_IMPLEMENTED.search(str(exc)) if "DeadlockError" not in str(exc) else None
        return found.group(1) if found and str(exc).lstrip().startswith("HW") else _cap(runs_wording(str(exc)))
    if "DeadlockError" in kinds:
        deadlock = next((e for e in chain if type(e).__name__ == "DeadlockError"), exc)
        frames = filter_traceback_text(getattr(exc, "remote_traceback", "") or "") or short_traceback(deadlock)
        where = f"\nwhere rank {exc.rank} was waiting:\n{frames}" if frames and hasattr(exc, "rank") else ""
        return _cap(f"DeadlockError: {deadlock}{where}")
    if isinstance(exc, AssertionError):
        where = short_traceback(exc)
        return _cap(f"AssertionError: {exc}" + (f"\n{where}" if where and not str(exc) else ""))
    if type(exc).__name__ == "RankError":
        head = str(exc).split("\n\n--- traceback", 1)[0]
        frames = filter_traceback_text(getattr(exc, "remote_traceback", "") or "")
        return _cap(head + (f"\n{frames}" if frames else ""))
    where = short_traceback(exc)
    return _cap(f"{type(exc).__name__}: {exc}" + (f"\n{where}" if where else ""))


def runs_wording(text: str) -> str:
    """The harness judges the runs inside one test case (world sizes, backends) and says "1 of 3 cases
    failed"; the grader's table and feedback count the test's cases (0/1: a case earns its share only
    when all of its runs pass). Say "runs" for the former, so the two counts never read as one."""
    text = RUNS_FAILED.sub(lambda m: f"{m[1]} of the {m[2]} runs of this case failed:", text)
    return RUNS_NOT_RUN.sub(lambda m: f"{m[1]} run{'s' * (m[1] != '1')} of this case not run: ", text)


def limit_hint(text: str, limits: dict | None = None) -> str | None:
    """A note when a failure looks like one of the sandbox's limits (`limits`, else sandbox.LIMITS)."""
    from autograder.sandbox import LIMITS
    LIMITS = {**LIMITS, **(limits or {})}   # noqa: N806 - the same table, this grading's values
    signs = [(("MemoryError", "can't allocate memory", "Cannot allocate memory"),
              f"memory: {LIMITS['RLIMIT_DATA'] / 2**30:g} GiB per process"),
             (("File too large", "EFBIG"), f"file size: {LIMITS['RLIMIT_FSIZE'] >> 20} MiB per written file"),
             (("SIGXCPU",), f"CPU time: {LIMITS['RLIMIT_CPU']} s per process"),
             (("Resource temporarily unavailable", "can't start new thread"),
              f"processes and threads: {LIMITS['RLIMIT_NPROC']} in all"),
             (("Too many open files",), f"open files: {LIMITS['RLIMIT_NOFILE']} per process")]
    hit = [limit for words, limit in signs if any(w in text for w in words)]
    if not hit:
        return None
    return (f"This looks like a limit of the grading sandbox ({'; '.join(hit)}). The tests need far less: "
            f"look for a tensor, a file, a loop of processes or threads that grows without bound.")

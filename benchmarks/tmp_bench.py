"""What creating a file costs in a temporary folder, against a folder in memory (not a test).

    .venv/bin/python benchmarks/tmp_bench.py [--files 2000] [--churn 4]

A grading session copies the kit twice (about 2000 files) and removes the copies when it closes; the
kit's own suite does that about a hundred times, besides every test's scratch files. On ext4 mounted
without a journal (CI's machines: `/sys/fs/ext4/<device>/journal_task` reads `<none>`), creating a
file makes the kernel skip, one by one, every inode of the folder's block group deleted in the last
30 s (ext4's `recently_deleted`; from the next second on), so a create costs in proportion to the
recent deletions beside it. This times `--files` creates (40 folders of small files, as a kit copy) in `$TMPDIR` (or
/tmp) and in /dev/shm (tmpfs), first as they are, then after `--churn` rounds of creating and
removing as many files there (what a run of gradings does), and says what filesystem each is.
.ci/run gives its run a /tmp in memory for this reason.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time


def describe(folder: str) -> str:
    """The filesystem of `folder` and, for ext4, whether it has a journal."""
    st = os.stat(folder)
    with open("/proc/self/mounts") as f:
        mounts = [line.split() for line in f]
    best = max((m for m in mounts if folder.startswith(m[1].rstrip("/") + "/") or folder == m[1]),
               key=lambda m: len(m[1]), default=None)
    if best is None:
        return "unknown filesystem"
    kind = best[2]
    if kind == "ext4":
        name = os.path.basename(os.path.realpath(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}"))
        try:
            with open(f"/sys/fs/ext4/{name}/journal_task") as f:
                journal = "no journal" if f.read().strip() == "<none>" else "journal"
        except OSError:
            journal = "journal unknown"
        return f"ext4 ({best[0]}, {journal})"
    return kind


def create(base: str, files: int) -> tuple[float, float, str]:
    """(wall s, CPU s) of creating `files` small files in 40 folders under a new folder in `base`."""
    root = tempfile.mkdtemp(prefix="tmp-bench-", dir=base)
    wall, cpu = time.perf_counter(), time.process_time()
    for i in range(files):
        folder = os.path.join(root, f"d{i % 40}")
        if i < 40:
            os.mkdir(folder)
        with open(os.path.join(folder, f"f{i}.py"), "wb") as f:
            f.write(b"x" * 2000)
    return time.perf_counter() - wall, time.process_time() - cpu, root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--churn", type=int, default=4, help="rounds of creating and removing before the second time")
    opts = parser.parse_args()
    print(f"creating {opts.files} files (as a kit copy), wall and CPU seconds:")
    for base in (tempfile.gettempdir(), "/dev/shm"):
        if not os.path.isdir(base) or not os.access(base, os.W_OK):
            print(f"  {base}: not writable here")
            continue
        wall, cpu, root = create(base, opts.files)
        shutil.rmtree(root)
        for _ in range(opts.churn):
            shutil.rmtree(create(base, opts.files)[2])
        time.sleep(1.1)             # ext4 skips only inodes deleted before the current second
        wall2, cpu2, root = create(base, opts.files)
        shutil.rmtree(root)
        print(f"  {base:10s} {describe(base):32s} {wall:6.3f} s (CPU {cpu:.3f});  after {opts.churn} rounds of "
              f"create and remove: {wall2:6.3f} s (CPU {cpu2:.3f})")


if __name__ == "__main__":
    main()

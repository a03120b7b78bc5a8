"""What a fork costs the autograder's zygote, with its heap in 4 KiB pages and in huge pages (not a test).

    .venv/bin/python benchmarks/fork_bench.py [--repeats 5] [--forks 40]
    .venv/bin/python benchmarks/fork_bench.py --zygotes 4 [--repeats 5]

Every job, rank host, rank and sim engine of a grading is forked from the zygote (or from a fork of
it), and a fork copies the parent's page table. This starts `--repeats` fresh Pythons that import
what a zygote imports from site-packages (autograder.zygote.preload_site_packages: torch, pytest,
...), collect and freeze the heap as the zygote does, and time `--forks` fork+exit+wait round trips
(the child exits at once: the copy of the page table and its teardown, not the child's own work),
then back the heap with transparent huge pages (autograder.zygote.huge_pages) and time them again.
Each process gives one pair; printed: both times, their ratio (median and range over the pairs),
the heap collapsed, the collapse's CPU time and the anonymous memory before and after it. Where the
kernel cannot collapse (no MADV_COLLAPSE before Linux 6.1, transparent huge pages off) it says so and
the two times match.

--zygotes K: what a zygote's own start costs, its settle() (collect, freeze, collapse: the last step
before it reports ready) after the imports it adds to its mother's, for K zygotes forked one after
the other from a mother that settled first (as zygote_mother.py does) and from one that did not
(as before): per mother, the CPU of each zygote's settle, then the medians of both and their ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

ONE = """
import gc, json, os, sys, time
sys.path.insert(0, sys.argv[1])
from autograder.zygote import huge_pages, preload_site_packages
preload_site_packages()
gc.collect()
gc.freeze()

def forks(n):
    t0 = time.perf_counter()
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
    return (time.perf_counter() - t0) / n

def rollup_mib(field):
    with open("/proc/self/smaps_rollup") as f:
        line = next(l for l in f if l.startswith(field + ":"))
    return int(line.split()[1]) / 1024

n = int(sys.argv[2])
forks(3)                                    # warm-up
small = forks(n)
anon_before = rollup_mib("Anonymous")
cpu = time.process_time()
collapsed = huge_pages()
cpu = time.process_time() - cpu
huge = forks(n)
print(json.dumps({"small": small, "huge": huge, "collapsed_mib": collapsed / 2**20, "collapse_cpu": cpu,
                  "anon_huge_mib": rollup_mib("AnonHugePages"), "anon_before_mib": anon_before,
                  "anon_after_mib": rollup_mib("Anonymous")}))
"""

ZYGOTES = """
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
from autograder.zygote import preload_kit, preload_site_packages, settle
preload_site_packages()                     # what the mother imports
if sys.argv[3] == "settled":
    settle()
costs = []
for _ in range(int(sys.argv[2])):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                            # a zygote: its imports from the kit, then settle() timed
        preload_kit()
        cpu = time.process_time()
        settle()
        os.write(w, str(time.process_time() - cpu).encode())
        os._exit(0)
    os.close(w)
    costs.append(float(os.read(r, 64)))
    os.close(r)
    os.waitpid(pid, 0)
print(json.dumps(costs))
"""


def zygotes(opts) -> None:
    """--zygotes: each zygote's settle() CPU, under a settled mother and an unsettled one."""
    seen = {"settled": [], "unsettled": []}
    print(f"{opts.zygotes} zygotes forked one after the other from each of {opts.repeats} mothers per kind; "
          f"each zygote's settle() (collect, freeze, collapse) in ms of CPU:")
    for _ in range(opts.repeats):
        for kind in seen:
            out = subprocess.run([sys.executable, "-c", ZYGOTES, ROOT, str(opts.zygotes), kind], capture_output=True,
                                 text=True, check=True)
            costs = json.loads(out.stdout.strip().splitlines()[-1])
            seen[kind] += costs
            print(f"  mother {kind:9s}: " + " ".join(f"{1e3 * c:5.0f}" for c in costs))
    settled, unsettled = (statistics.median(seen[k]) for k in ("settled", "unsettled"))
    print(f"median settle(): {1e3 * settled:.0f} ms under a settled mother, {1e3 * unsettled:.0f} ms under an "
          f"unsettled one ({settled / unsettled:.2f}x); sums {sum(seen['settled']):.2f} s and "
          f"{sum(seen['unsettled']):.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--forks", type=int, default=40)
    parser.add_argument("--zygotes", type=int, default=0, help="time K zygotes' settle() instead (see above)")
    opts = parser.parse_args()
    if opts.zygotes:
        return zygotes(opts)
    rows = []
    for _ in range(opts.repeats):
        out = subprocess.run([sys.executable, "-c", ONE, ROOT, str(opts.forks)], capture_output=True, text=True,
                             check=True)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    ratios = [r["huge"] / r["small"] for r in rows]
    print(f"fork+exit+wait of a zygote-sized process (torch, pytest imported; heap frozen), {opts.forks} forks "
          f"per measurement, {opts.repeats} processes, each measured before and after huge_pages():")
    for r in rows:
        print(f"  4 KiB pages {1e3 * r['small']:6.2f} ms   huge pages {1e3 * r['huge']:6.2f} ms   "
              f"collapsed {r['collapsed_mib']:5.0f} MiB in {1e3 * r['collapse_cpu']:4.0f} ms CPU "
              f"(AnonHugePages {r['anon_huge_mib']:.0f} MiB; anonymous memory {r['anon_before_mib']:.0f} -> "
              f"{r['anon_after_mib']:.0f} MiB)")
    print(f"huge over 4 KiB pages: median {statistics.median(ratios):.2f}x (range {min(ratios):.2f}-{max(ratios):.2f}x)")
    if not any(r["collapsed_mib"] for r in rows):
        print("this kernel collapsed nothing (MADV_COLLAPSE needs Linux 6.1+ and transparent huge pages not "
              "'never' in /sys/kernel/mm/transparent_hugepage/enabled): the zygote forks as before")


if __name__ == "__main__":
    main()

"""The README.md of the student copy (tools.release writes it over the instructor's).

It names only what a student's copy holds and runs: setup, the first run, and for each released
homework its handout, the files to edit, the public tests, the notebook, scripts and benchmarks
found in its folder, and the submit command; then the lectures and REFERENCE.md. Every command uses
the venv's python (`.venv/bin/python`), which scripts/setup.sh creates on a fresh machine.
"""

from __future__ import annotations

import glob
import os

from tools.notebooks import source_of
from tools.overlay import ROOT, homework_manifest

HEAD = """# minitorch_dist: your copy of the course kit

You build the machinery of distributed deep learning yourself, from point-to-point messages up, and
run it on your laptop: several processes on gloo, a simulated network of many ranks, or MPI.

## Setup and first run

On a fresh machine (Linux, Python 3.10+):

```bash
bash scripts/setup.sh                      # once: .venv with torch 2.13.0 (CPU), mpi4py + MPICH, jupyter, pytest
.venv/bin/python examples/ring_hello.py    # first run: 4 local processes pass a ring message and all-reduce
.venv/bin/mpirun -n 4 .venv/bin/python examples/ring_hello.py    # the same under MPI
```

Rank code sees one object, a Group (`group.rank`, `group.size`, `send`/`recv`/`isend`/`irecv`,
the provided collectives); `minitorch_dist.launch(fn, p)` runs `fn(group)` on p ranks
(`backend="sim"` for a simulated network). What each algorithm keeps true and what it costs:
`REFERENCE.md`.
"""

SUBMIT = """
When you are done (or done with part of it), build the zip to hand in; it runs the public tests
first and names the tasks still left as the stub:

```bash
.venv/bin/python -m minitorch_dist.submit {hw}            # writes dist/{hw}_submission.zip
```
"""


def homework_section(hw: str, root: str = ROOT) -> str:
    m = homework_manifest(hw, root)
    folder = os.path.join("assignments", hw)
    lines = [f"\n## {m.get('title', hw)}\n", f"Read the handout first: `{folder}/README.md`. You edit:\n"]
    lines += [f"- `{rel}`" for rel in m["editable"]]
    tasks = sorted(m.get("tasks", {}))
    first = f" -m task{tasks[0].replace('.', '_')}" if tasks else ""
    lines += ["", "```bash", f".venv/bin/python -m pytest {m['public_tests']}            # its public tests",
              f".venv/bin/python -m pytest {m['public_tests']}{first}   # one task's"]
    if m.get("notebook"):
        lines.append(f".venv/bin/jupyter lab {m['notebook']}    # the notebook part")
    notebook_source = source_of(m["notebook"]) if m.get("notebook") else None    # a notebook, not a script
    for script in sorted(glob.glob(os.path.join(root, folder, "*.py"))):
        name = os.path.basename(script)
        if name != "__init__.py" and os.path.join(folder, name) != notebook_source:
            lines.append(f".venv/bin/python {folder}/{name}    # see its --help")
    lines.append("```")
    return "\n".join(lines) + "\n" + SUBMIT.format(hw=hw)


def student_readme(selected: list[str], root: str = ROOT) -> str:
    lectures = sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "lectures", "*.ipynb")))
    text = HEAD + "".join(homework_section(hw, root) for hw in selected)
    if lectures:
        text += "\n## Lectures\n\nOpen them with `.venv/bin/jupyter lab lectures/`:\n\n"
        text += "\n".join(f"- `{rel}`" for rel in lectures) + "\n"
    return text

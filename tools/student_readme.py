"""The README.md of the student copy (tools.release writes it over the instructor's).

It names only what a student's copy holds and runs: setup, the first run, and for each released
homework its handout, the files to edit, the public tests, the notebook, scripts and benchmarks
found in its folder, and the commands that hand it in; then how to hand in (the Gradescope zip, and
the notebook through nbgrader: its config, fetch, the package files beside the notebook, submit,
feedback; tests/kit/test_nbgrader_course.py runs these commands as written) and the lectures. Every command uses
the venv's python (`.venv/bin/python`), which scripts/setup.sh creates on a fresh machine.
"""

from __future__ import annotations

import glob
import os

from tools.nbgrader_course import COURSE_ID
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
When you are done (or done with part of it), hand in (see "Handing in" below): the code as a zip, which
this builds after running the public tests and naming the tasks still left as the stub,
{notebook}

```bash
.venv/bin/python -m minitorch_dist.submit {hw}            # writes dist/{hw}_submission.zip: upload it to Gradescope
{nbgrader}```
"""

NBGRADER = """.venv/bin/python -m nbgrader fetch_assignment {hw}    # once: handin/{hw}/ holds the notebook to answer and hand in
{copy} handin/{hw}/    # your package files beside it
.venv/bin/python -m nbgrader submit {hw}
.venv/bin/python -m nbgrader fetch_feedback {hw}     # once the course has released feedback
"""

HANDIN = """
## Handing in

Each homework is handed in twice: the code on Gradescope, the notebook through nbgrader.

**Code.** `.venv/bin/python -m minitorch_dist.submit hwN` writes `dist/hwN_submission.zip` (exactly the
files you edit, flat). Upload that zip to the homework's assignment on Gradescope; working in a group,
one of you uploads it and adds the others there, and every member gets the grade.

**Notebook.** Once, write `nbgrader_config.py` in this folder (the one holding `.venv/`), with the
exchange folder the course gives you and your id: on a shared machine without JupyterHub, the same
id as on Gradescope (your student id), so that your notebook and code points meet in one gradebook row:

```python
c = get_config()
c.CourseDirectory.course_id = "{course}"
c.Exchange.root = "/srv/nbgrader/exchange"        # the exchange folder the course names
c.CourseDirectory.student_id = "your-student-id"  # on JupyterHub your login is used instead
c.Exchange.assignment_dir = "handin"              # where fetch_assignment puts hwN/ and submit takes it from
```

Then, from this folder, the commands listed under each homework: `fetch_assignment` gives
`handin/hwN/` with the notebook; answer that copy (the one under `assignments/` is for trying things:
nbgrader takes only the fetched one). The notebook is graded on **your** package files, so copy the
files you edit beside it (the `cp` line) each time you submit, after your last change to them; a file
left out is graded as the stub. `submit` hands in the whole `handin/hwN/` folder; you may submit again
until the deadline (the course collects your latest submission). `fetch_feedback` brings the graded
notebook's feedback into `handin/hwN/feedback/`.
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
    nbgrader = NBGRADER.format(hw=hw, copy="cp " + " ".join(m["editable"])) if m.get("notebook") else ""
    notebook = "and the notebook through nbgrader, from this folder:" if nbgrader else "on Gradescope:"
    return "\n".join(lines) + "\n" + SUBMIT.format(hw=hw, notebook=notebook, nbgrader=nbgrader)


def student_readme(selected: list[str], root: str = ROOT) -> str:
    lectures = sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "lectures", "*.ipynb")))
    text = HEAD + "".join(homework_section(hw, root) for hw in selected) + HANDIN.format(course=COURSE_ID)
    if lectures:
        text += "\n## Lectures\n\nOpen them with `.venv/bin/jupyter lab lectures/`:\n\n"
        text += "\n".join(f"- `{rel}`" for rel in lectures) + "\n"
    return text

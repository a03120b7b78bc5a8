"""Every command in the kit's documents runs as written on a fresh machine: after `bash scripts/setup.sh`
only the venv has torch, so a command names `.venv/bin/python` (or another `.venv/bin/` tool, or
`bash scripts/...`), never a bare `python`, `pytest`, `pip`, `jupyter` or `mpirun`; every module it
runs with `-m` exists in the kit; every file it names exists. Placeholders (`script.py`, paths under
`path/to/`, `<...>`) are skipped. Documents: the READMEs, REFERENCE.md, every handout and the
markdown cells of every notebook (lectures and homework notebooks).
"""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import re

import pytest

from tools.overlay import ROOT

BARE = ("python", "python3", "pytest", "pip", "jupyter", "mpirun", "mpiexec", "torchrun")
KIT_PACKAGES = ("minitorch_dist", "tools", "autograder", "assignments", "tests", "examples", "benchmarks")
PLACEHOLDERS = ("script.py",)
FENCES = ("```bash", "```sh", "```console", "```shell")
INLINE = re.compile(r"`((?:\.venv/bin/|python3? |bash |pytest |pip |mpirun |mpiexec |jupyter |torchrun )[^`]*)`")


def documents() -> list[str]:
    found = ["README.md", "REFERENCE.md", "autograder/README.md", "lectures/README.md"]
    found += sorted(glob.glob("assignments/*/README.md", root_dir=ROOT))
    found += sorted(glob.glob("lectures/*.ipynb", root_dir=ROOT)) + sorted(glob.glob("assignments/*/*.ipynb", root_dir=ROOT))
    return [d for d in found if os.path.exists(os.path.join(ROOT, d))]


def text_of(rel: str) -> str:
    with open(os.path.join(ROOT, rel)) as f:
        if not rel.endswith(".ipynb"):
            return f.read()
        cells = json.load(f)["cells"]
    return "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def commands(text: str) -> list[str]:
    out, fenced = [], False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("```"):
            fenced = not fenced and stripped in FENCES
            continue
        if fenced and stripped and not stripped.startswith("#"):
            out.append(stripped.split(" #")[0].strip())
    return out + [m.group(1).strip() for m in INLINE.finditer(text)]


def problems(cmd: str) -> list[str]:
    words = cmd.replace("\\", " ").split()
    found = []
    if words and words[0] in BARE:
        found.append(f"bare {words[0]}: a fresh machine has torch only in .venv (use .venv/bin/{words[0]})")
    runs_python = bool(words) and os.path.basename(words[0]).startswith("python")
    for i, w in enumerate(words[:-1]):
        if w == "-m" and runs_python and "-m" not in words[:i]:     # python -m MODULE (later -m: its args)
            module = words[i + 1]
            if module.split(".")[0] in KIT_PACKAGES:
                base = os.path.join(ROOT, *module.split("."))
                if not any(os.path.exists(p) for p in (base + ".py", os.path.join(base, "__init__.py"))):
                    found.append(f"no module {module} in the kit")
            elif importlib.util.find_spec(module.split(".")[0]) is None:
                found.append(f"no module {module} in the venv")
    for w in words[1:]:
        if (re.search(r"\.(py|ipynb|sh|json|md)$", w) and not w.startswith(("-", "/", "$", "~", "..", "<"))
                and w not in PLACEHOLDERS and "path/to/" not in w and "*" not in w
                and not w.startswith(("hw", "submission", "results", "gradescope-"))):
            if not os.path.exists(os.path.join(ROOT, w)):
                found.append(f"no file {w}")
    return found


def test_the_check_finds_what_it_should():
    assert problems("python examples/ring_hello.py")[0].startswith("bare python")
    assert problems(".venv/bin/python -m minitorch_dist.nothing_here") == ["no module minitorch_dist.nothing_here in the kit"]
    assert problems(".venv/bin/python assignments/hw1/missing.py") == ["no file assignments/hw1/missing.py"]
    assert problems(".venv/bin/python -m pytest assignments/hw1/tests -m task1_4") == []


@pytest.mark.parametrize("doc", documents())
def test_every_command_runs_on_a_fresh_machine(doc):
    bad = [f"{cmd!r}: {'; '.join(p)}" for cmd in commands(text_of(doc)) for p in [problems(cmd)] if p]
    assert not bad, f"{doc}:\n  " + "\n  ".join(bad)


def test_the_student_readme_commands_run_on_a_fresh_machine():
    """The README tools.release writes into the student copy (every homework): its commands, the hand-in
    section's nbgrader and cp lines among them (tests/kit/test_nbgrader_course.py runs those as written)."""
    from tools.release import homeworks
    from tools.student_readme import student_readme
    text = student_readme(homeworks())
    found = commands(text)
    assert any("-m nbgrader submit" in cmd for cmd in found) and any(cmd.startswith("cp ") for cmd in found)
    bad = [f"{cmd!r}: {'; '.join(p)}" for cmd in found for p in [problems(cmd)] if p]
    assert not bad, "the student README:\n  " + "\n  ".join(bad)

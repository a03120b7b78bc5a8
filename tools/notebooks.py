"""Build the course's notebooks from their sources: jupytext percent files beside them.

    python -m tools.notebooks                   # rebuild every notebook
    python -m tools.notebooks hw1 lecture01     # only these
    python -m tools.notebooks --check           # exit 1 naming each committed notebook that differs

Each notebook's source is the .py file of the same name beside it (lectures/01_collectives.py builds
lectures/01_collectives.ipynb, assignments/hw1/hw1_collectives.py the homework notebook that
homework.json names). In it, `# %%` starts a code cell and `# %% [markdown]` a markdown cell (its
lines commented); a homework notebook's nbgrader settings sit in the cell's header:

    # %% nbgrader={"grade": true, "grade_id": "test_crossover", "locked": true, "points": 2, ...}

The header between the `# ---` lines holds the notebook's metadata (kernel, title). IPython magics
are commented (`# %matplotlib inline`), so the file is plain Python a linter reads. Jupyter opens it
as a notebook where jupytext is installed (scripts/setup.sh installs it).

The built notebooks are committed without outputs, with stable cell ids (a cell's nbgrader grade
id, else cell-NN): edit the .py and rebuild rather than editing the .ipynb, so the two never
disagree (tests/kit/test_notebooks.py checks it). A homework's .py holds the answers, like its
source notebook: tools.release and tools.gradescope leave both out of what they ship.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys

import nbformat

from tools.overlay import ROOT, homework_manifest

NBGRADER_KEYS = {"grade", "grade_id", "locked", "schema_version", "solution", "task", "points"}


def source_of(notebook: str) -> str:
    """The percent file that builds `notebook` (a path ending in .ipynb)."""
    return os.path.splitext(notebook)[0] + ".py"


def notebooks(root: str = ROOT) -> dict[str, str]:
    """{name: notebook path relative to the kit}: lecture01 ... (lectures/NN_*.py), then hw1 ... (the
    homework.json "notebook" of each homework that has one)."""
    found = {}
    for path in sorted(glob.glob(os.path.join(root, "lectures", "[0-9]*.py"))):
        number = os.path.basename(path).split("_")[0]
        found[f"lecture{number}"] = os.path.relpath(os.path.splitext(path)[0] + ".ipynb", root)
    for manifest in sorted(glob.glob(os.path.join(root, "assignments", "*", "homework.json"))):
        hw = os.path.basename(os.path.dirname(manifest))
        rel = homework_manifest(hw, root).get("notebook")
        if rel and os.path.exists(os.path.join(root, source_of(rel))):
            found[hw] = rel
    return found


def _check_nbgrader(meta: dict, where: str) -> None:
    """A clear error for nbgrader settings that nbgrader would reject or grade wrongly."""
    unknown = set(meta) - NBGRADER_KEYS
    if unknown:
        raise ValueError(f"{where}: unknown nbgrader key(s) {sorted(unknown)}; known: {sorted(NBGRADER_KEYS)}")
    if not meta.get("grade_id"):
        raise ValueError(f"{where}: an nbgrader cell needs a grade_id")
    if meta.get("grade") and "points" not in meta:
        raise ValueError(f"{where}: graded cell {meta['grade_id']} needs points")


def build(rel: str, root: str = ROOT) -> nbformat.NotebookNode:
    """The notebook `rel` (relative to the kit) built from its percent file, validated."""
    import jupytext
    source = source_of(rel)
    nb = jupytext.read(os.path.join(root, source), fmt="py:percent")
    nb.metadata.pop("jupytext", None)                 # jupytext's own record of the text format
    for i, cell in enumerate(nb.cells):
        meta = cell.metadata.get("nbgrader")
        if meta is not None:
            _check_nbgrader(meta, f"{source}, cell {i}")
        cell["id"] = (meta or {}).get("grade_id") or f"cell-{i:02d}"
    nbformat.validate(nb)
    return nb


def render(nb: nbformat.NotebookNode) -> str:
    """The notebook's JSON text, as written to disk."""
    return nbformat.writes(nb) + "\n"


def differs(rel: str, root: str = ROOT) -> bool:
    """Whether the committed notebook `rel` is not what its percent file builds."""
    path = os.path.join(root, rel)
    if not os.path.exists(path):
        return True
    with open(path, encoding="utf-8") as f:
        return f.read() != render(build(rel, root))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="notebooks to build (default: all): lecture01, hw1, ...")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a notebook differs")
    args = parser.parse_args(argv)
    known = notebooks()
    unknown = sorted(set(args.names) - set(known))
    if unknown:
        print(f"tools.notebooks: unknown notebook(s) {unknown}; known: {sorted(known)}", file=sys.stderr)
        return 2
    selected = {name: known[name] for name in args.names or known}
    if args.check:
        stale = [f"{rel} (python -m tools.notebooks {name})" for name, rel in selected.items() if differs(rel)]
        for line in stale:
            print(f"tools.notebooks: differs from its source: {line}", file=sys.stderr)
        return 1 if stale else 0
    for rel in selected.values():
        with open(os.path.join(ROOT, rel), "w", encoding="utf-8") as f:
            f.write(render(build(rel)))
        print(rel)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Small helpers to write a notebook from Python: markdown and code cells, nbgrader metadata."""

from __future__ import annotations

import os
import textwrap

import nbformat

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


def _text(source: str) -> str:
    return textwrap.dedent(source).strip("\n")


def md(source: str, **nbgrader) -> nbformat.NotebookNode:
    """A markdown cell; keyword arguments become nbgrader metadata (see `grader`)."""
    cell = nbformat.v4.new_markdown_cell(_text(source))
    if nbgrader:
        cell.metadata["nbgrader"] = grader(**nbgrader)
    return cell


def code(source: str, **nbgrader) -> nbformat.NotebookNode:
    """A code cell without outputs; keyword arguments become nbgrader metadata."""
    cell = nbformat.v4.new_code_cell(_text(source))
    if nbgrader:
        cell.metadata["nbgrader"] = grader(**nbgrader)
    return cell


def grader(grade_id: str, solution: bool = False, grade: bool = False, locked: bool = False,
           points: float | None = None) -> dict:
    """nbgrader cell metadata (schema 3): a solution cell, a graded test cell (points), or a locked cell."""
    if grade and points is None:
        raise ValueError(f"nbgrader cell {grade_id}: a graded cell needs points")
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3,
            "solution": solution, "task": False}
    if grade:
        meta["points"] = points
    return meta


def build(cells: list, title: str) -> nbformat.NotebookNode:
    """A validated notebook of `cells` (python3 kernel), with stable cell ids."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata["language_info"] = {"name": "python"}
    nb.metadata["title"] = title
    for i, cell in enumerate(cells):
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        cell["id"] = grade_id or f"cell-{i:02d}"
    nb.cells = cells
    nbformat.validate(nb)
    return nb


def render(nb: nbformat.NotebookNode) -> str:
    """The notebook's JSON text, as written to disk."""
    return nbformat.writes(nb) + "\n"


def write(cells: list, rel_path: str, title: str) -> str:
    """Write `cells` as a notebook at ROOT/rel_path; returns the path."""
    path = os.path.join(ROOT, rel_path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(render(build(cells, title)))
    return path


def entry_points(cells: list, rel_path: str, title: str):
    """(notebook, main) of a notebook source module: notebook() -> the notebook built from `cells`
    (what rel_path should hold); main() writes it there and prints the path."""
    def notebook() -> nbformat.NotebookNode:
        return build(cells, title)

    def main() -> None:
        print(write(cells, rel_path, title))
    return notebook, main

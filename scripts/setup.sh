#!/usr/bin/env bash
# One-step setup on a fresh machine: a virtual environment in .venv with torch 2.13.0 (CPU),
# numpy, mpi4py with MPICH from PyPI (mpirun/mpiexec land in .venv/bin), jupyter, nbgrader,
# pytest, and minitorch_dist in editable mode.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
# jupytext (it pulls no torch) reads the notebooks' sources, the percent .py beside each .ipynb (tools.notebooks
# builds them; Jupyter opens the .py as a notebook). Pinned: the build must give the same notebook everywhere.
.venv/bin/python -m pip install --quiet "jupytext==1.19.6"
# torch first and pinned: an unpinned torch would pull several GB of CUDA packages.
.venv/bin/python -m pip install --quiet "torch==2.13.0"
.venv/bin/python -m pip install --quiet -e ".[dev]"
.venv/bin/python -c "import torch, mpi4py, minitorch_dist; print('minitorch_dist ready: torch', torch.__version__)"

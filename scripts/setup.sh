#!/usr/bin/env bash
# One-step setup on a fresh machine: a virtual environment in .venv with torch 2.13.0 (CPU),
# numpy, mpi4py with MPICH from PyPI (mpirun/mpiexec land in .venv/bin), jupyter, nbgrader,
# pytest, minitorch_dist in editable mode, and the sim's compiled sendrecv where a C++ compiler is.
#   bash scripts/setup.sh                 # CPU build of torch (laptops, CI, the autograder)
#   bash scripts/setup.sh --cuda          # torch's CUDA build (cu128) from download.pytorch.org, for GPUs
#   bash scripts/setup.sh --cuda=cu126    # another CUDA build; MINITORCH_DIST_CUDA=cu126 does the same
#   sudo bash scripts/setup.sh --cluster  # also Debian's slurm-wlm and munge (apt-get, root) for SLURM on the
#                                         # emulated cluster (python -m minitorch_dist.cluster up --slurm)
set -euo pipefail
CUDA="${MINITORCH_DIST_CUDA:-}"
CLUSTER=""
for arg in "$@"; do
  case "$arg" in
    --cuda) CUDA="${CUDA:-cu128}" ;;
    --cuda=*) CUDA="${arg#--cuda=}" ;;
    --cluster) CLUSTER=1 ;;
    *) echo "setup.sh: unknown option $arg (use --cuda, --cuda=cu126 or --cluster)" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
if [ -n "$CLUSTER" ]; then
  # SLURM for the emulated cluster: Debian's packages (22.05 on bookworm), daemons not started here
  # (the cluster starts its own, configured in its folder under /run/minitorch_dist_cluster/).
  if [ "$(id -u)" != 0 ]; then
    echo "setup.sh --cluster: installing slurm-wlm and munge needs root (sudo bash scripts/setup.sh --cluster)" >&2
    exit 2
  fi
  if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    command -v apt-get >/dev/null || { echo "setup.sh --cluster: needs apt-get (Debian/Ubuntu) to install slurm-wlm and munge" >&2; exit 2; }
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
  fi
  echo "slurm-wlm $(dpkg-query -W -f='${Version}' slurm-wlm 2>/dev/null || slurmctld -V) and munge installed"
fi
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
# jupytext (it pulls no torch) reads the notebooks' sources, the percent .py beside each .ipynb (tools.notebooks
# builds them; Jupyter opens the .py as a notebook). Pinned: the build must give the same notebook everywhere.
.venv/bin/python -m pip install --quiet "jupytext==1.19.6"
# torch first and pinned: an unpinned torch would pull several GB of CUDA packages.
if [ -n "$CUDA" ]; then
  .venv/bin/python -m pip install --quiet "torch==2.13.0" --index-url "https://download.pytorch.org/whl/$CUDA" \
    --extra-index-url https://pypi.org/simple
else
  .venv/bin/python -m pip install --quiet "torch==2.13.0"
fi
# The grader's packages at the exact versions of its lock (autograder/requirements.lock: what the Gradescope
# upload installs), when this Python is the one the lock was made with: the kit's tests, the grader and CI then
# run the same numpy, pytest, mpi4py ... whatever was released since. Elsewhere (another Python, the student
# copy, which has no lock) pip resolves them freely.
CONSTRAINTS=()
LOCK=autograder/requirements.lock
if [ -f "$LOCK" ]; then
  LOCK_PYTHON=$(sed -n '1s/.*Made with Python \([0-9.]*[0-9]\).*/\1/p' "$LOCK")
  HERE_PYTHON=$(.venv/bin/python -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  if [ "$LOCK_PYTHON" = "$HERE_PYTHON" ]; then
    grep -v '^torch==' "$LOCK" > .venv/grader-constraints.txt     # torch: the build chosen above
    CONSTRAINTS=(-c .venv/grader-constraints.txt)
  fi
fi
.venv/bin/python -m pip install --quiet ${CONSTRAINTS[@]+"${CONSTRAINTS[@]}"} -e ".[dev]"
# The sim's compiled sendrecv (minitorch_dist/runtime/sim/express.py): ~10 s with a C++ compiler; without one
# it says so and the sim runs its Python path (the same results, slower). It never fails the setup.
.venv/bin/python -m minitorch_dist.runtime.sim.express_build || true
.venv/bin/python -c "import torch, mpi4py, minitorch_dist; print('minitorch_dist ready: torch', torch.__version__, f'(CUDA {torch.version.cuda}, {torch.cuda.device_count()} GPU(s))' if torch.version.cuda else '(CPU build)')"

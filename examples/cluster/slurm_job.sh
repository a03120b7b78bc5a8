#!/bin/bash
# A SLURM job across 2 nodes: two job steps, each rank reporting its hostname and all-reducing
# (examples/cluster/hostnames.py prints CLUSTER-RESULT {json}). On the emulated cluster (root):
#
#   .venv/bin/python -m minitorch_dist.cluster up --nodes 2 --slurm
#   .venv/bin/python -m minitorch_dist.cluster exec node0 sbatch --wait --output=/tmp/hostnames-%j.out examples/cluster/slurm_job.sh
#
# Step 1: srun starts the ranks and the kit's launch() reads SLURM_PROCID and SLURM_STEP_NUM_TASKS
#         (gloo); MASTER_ADDR is the job's first node, as on any SLURM cluster.
# Step 2: srun --mpi=pmi2: MPICH (PyPI's, in .venv) takes its ranks from SLURM's PMI-2 server
#         (PMI_RANK, PMI_SIZE, PMI_FD), so the kit runs its mpi backend, as under mpirun. UCX is held
#         to TCP on eth0: the nodes share one kernel, and UCX would pass data between them through
#         shared memory instead of the links.
#SBATCH --job-name=hostnames
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --time=5
set -euo pipefail
PY=${PYTHON:-.venv/bin/python}
export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)
echo "job $SLURM_JOB_ID on $SLURM_JOB_NODELIST ($SLURM_JOB_NUM_NODES nodes), MASTER_ADDR=$MASTER_ADDR"
srun "$PY" examples/cluster/hostnames.py
UCX_TLS=tcp,self UCX_NET_DEVICES=eth0 srun --mpi=pmi2 "$PY" examples/cluster/hostnames.py

#!/bin/bash
# autograder.batch as a SLURM job array over the nodes, merged into one gradebook. Run it on a node
# of a cluster with SLURM (`python -m minitorch_dist.cluster up --nodes 2 --slurm`):
#
#   .venv/bin/python -m minitorch_dist.cluster exec node0 bash examples/cluster/batch_array.sh HW FOLDER OUT [batch options]
#
# Outside a job it submits itself twice and waits:
#   1. an array of N tasks (N: ARRAY_TASKS, default the number of nodes), one a node (--exclusive);
#      task i grades share i of the submissions (autograder.batch --shard i/N: every N-th student from
#      the i-th) into OUT/<student>/results.json;
#   2. a merge job that starts when every task has succeeded (srun --dependency=afterok): the same batch
#      command without --shard finds every student graded with the same submission, tests, kit and
#      options (batch's resume key), grades nothing and writes OUT/gradebook.csv.
# The array tasks' output goes to OUT/slurm-logs/ (printed at the end), the merge's to this terminal.
#SBATCH --job-name=grade
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --exclusive
#SBATCH --time=120
set -euo pipefail
PY=${PYTHON:-.venv/bin/python}
if [ $# -lt 3 ]; then
  echo "usage: batch_array.sh HW FOLDER OUT [autograder.batch options]" >&2
  exit 2
fi
hw=$1 folder=$2 out=$3
shift 3
if [ -z "${SLURM_JOB_ID:-}" ]; then                       # on a node: submit the array and the merge
  tasks=${ARRAY_TASKS:-$(sinfo -h -o %D | head -n1)}
  mkdir -p "$out/slurm-logs"
  array=$(sbatch --parsable --array=0-$((tasks - 1)) --output="$out/slurm-logs/%x-%A_%a.out" "$0" "$hw" "$folder" "$out" "$@")
  echo "array job $array: $tasks tasks, one a node"
  # srun waits for the array (a pending job), then runs the merge here, its output on this terminal
  status=0
  srun --dependency=afterok:"$array" --job-name=gradebook --nodes=1 --ntasks=1 \
    bash "$0" "$hw" "$folder" "$out" "$@" || status=$?
  for f in "$out"/slurm-logs/*.out; do sed "s|^|[$(basename "$f" .out)] |" "$f"; done
  exit $status
fi
if [ -n "${SLURM_ARRAY_TASK_ID:-}" ]; then               # array task i of N: its share
  echo "array task $SLURM_ARRAY_TASK_ID of $SLURM_ARRAY_TASK_COUNT on $(hostname)"
  exec "$PY" -m autograder.batch "$hw" "$folder" --out "$out" "$@" --shard "$SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT"
fi
echo "merge on $(hostname)"                               # the merge job: nothing left to grade
exec "$PY" -m autograder.batch "$hw" "$folder" --out "$out" "$@"

#!/usr/bin/env bash
# A one-node Slurm cluster on this machine (Debian's slurm-wlm: slurmctld and slurmd with a
# configuration of their own in a temporary folder, loopback only, no munge: auth/none), and the
# job script docs/distributed.md gives users, submitted with sbatch:
#   1. 2 tasks of `xsa train` started by `srun --mpi=pmix` give the bits of `mpirun -np 2` (and so
#      one process's losses to rounding: tests/distributed_test.cpp);
#   2. the job cancelled mid-run (scancel: SIGTERM to every task) leaves a checkpoint, and the
#      same script submitted again resumes it to the bits of an uninterrupted run.
# Needs root (the daemons) and slurm-wlm; exits 77 (SKIPPED in ctest) with the reason otherwise.
# Usage: tests/cluster/slurm_test.sh XSA_BINARY SOURCE_DIR
set -euo pipefail
source "$(dirname "$0")/common.sh"
xsa=$(realpath "$1")
src=$(realpath "$2")
skip() { echo "SKIPPED: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "running slurmctld and slurmd needs root"
for tool in slurmctld slurmd sbatch srun squeue scancel mpirun; do
  command -v $tool >/dev/null || skip "no $tool (apt install slurm-wlm openmpi-bin)"
done
ldd "$xsa" | grep libmpi >/dev/null || skip "xsa was built without MPI (libopenmpi-dev)"
[ -e /usr/lib/x86_64-linux-gnu/slurm-wlm/mpi_pmix.so ] ||
  [ -n "$(find /usr/lib -name mpi_pmix.so 2>/dev/null | head -1)" ] ||
  skip "Slurm has no PMIx plugin (mpi_pmix.so)"

cpus=$(nproc --all)  # (plain nproc follows OMP_NUM_THREADS, which ctest sets to 1)
[ "$cpus" -ge 2 ] || skip "a job of 2 tasks needs 2 CPUs; this machine has $cpus"
work=$(mktemp -d)
node=$(hostname -s)
base=$((20000 + $$ % 20000))
export SLURM_CONF=$work/slurm.conf
cleanup() {
  [ -f "$work/slurmd.pid" ] && kill "$(cat "$work/slurmd.pid")" 2>/dev/null || true
  [ -f "$work/slurmctld.pid" ] && kill "$(cat "$work/slurmctld.pid")" 2>/dev/null || true
  sleep 1
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/state" "$work/spool"
cat >"$SLURM_CONF" <<EOF
ClusterName=xsatest
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$base
SlurmdPort=$((base + 1))
SrunPortRange=$((base + 2))-$((base + 200))
AuthType=auth/none
CredType=cred/none
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
KillWait=30
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
EOF
slurmctld -i -f "$SLURM_CONF" 2>"$work/ctld.err" || { cat "$work/ctld.err"; skip "slurmctld does not start here"; }
slurmd -f "$SLURM_CONF" -N "$node" 2>"$work/d.err" || { cat "$work/d.err"; skip "slurmd does not start here"; }
for _ in $(seq 100); do
  sinfo -h -o %T 2>/dev/null | grep -q idle && break
  sleep 0.2
done
sinfo -h -o %T | grep -q idle || { cat "$work/slurmctld.log" "$work/slurmd.log" | tail -20; echo "FAIL: the node never became idle"; exit 1; }

cd "$work"
write_training_text
model="$tiny_model --batch 4 --total-batch-tokens 256 --ckpt-every 10"

# The job script users copy (docs/distributed.md), with the model of this test.
sed -e "s|^XSA=.*|XSA=$xsa|" -e "s|^ARGS=.*|ARGS=\"$model --steps \$STEPS\"|" \
  "$src/scripts/slurm/train.sbatch" >job.sbatch

# What the cluster says, for a failure's message.
cluster_state() {
  echo "squeue: $(squeue -h -o '%i %T %r' 2>&1)"
  echo "sinfo: $(sinfo -h -o '%N %T %C %E' 2>&1)"
  tail -n 5 "$work/slurmctld.log" "$work/slurmd.log"
}

# wait_job ID: until the job has left the queue; prints its final state.
wait_job() {
  for _ in $(seq 1800); do
    [ -z "$(squeue -h -j "$1" 2>/dev/null)" ] && break
    sleep 0.1
  done
  sacct_state=$(scontrol show job "$1" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)
  echo "${sacct_state:-gone}"
}

# 1. The job of 2 tasks against mpirun's 2 ranks.
job=$(STEPS=30 OUT=slurm sbatch --parsable --ntasks 2 --output slurm.out --export ALL job.sbatch)
state=$(wait_job "$job")
[ -f slurm/ckpt_000030/model.safetensors ] ||
  { echo "FAIL: the job ($state) left no step 30"; cat slurm.out || true; cluster_state; exit 1; }
timeout 180 mpirun -np 2 --oversubscribe --allow-run-as-root --bind-to none \
  --mca btl_vader_single_copy_mechanism none -x OMP_NUM_THREADS=1 \
  "$xsa" train $model --threads 1 --steps 30 --out mpi >mpi.log 2>&1 || { echo "FAIL: mpirun"; cat mpi.log; exit 1; }
cmp slurm/ckpt_000030/model.safetensors mpi/ckpt_000030/model.safetensors ||
  { echo "FAIL: srun's 2 tasks and mpirun's 2 ranks end on different weights"; exit 1; }
python3 - <<'EOF' || { echo "FAIL: srun's losses differ from mpirun's"; exit 1; }
import json, sys
loss = lambda run: [json.loads(l)["loss"] for l in open(f"{run}/metrics.jsonl")]
sys.exit(loss("slurm") != loss("mpi") or len(loss("mpi")) < 30)
EOF

# 2. Cancelled mid-run, then the same script again: the bits of an uninterrupted run.
job=$(STEPS=400 OUT=cancelled sbatch --parsable --ntasks 2 --output cancelled-1.out --export ALL job.sbatch)
for _ in $(seq 600); do
  [ -d cancelled/ckpt_000010 ] && break
  sleep 0.1
done
[ -d cancelled/ckpt_000010 ] || { echo "FAIL: the job to cancel never checkpointed"; cat cancelled-1.out; exit 1; }
scancel "$job"
cancelled_state=$(wait_job "$job")
last=$(ls -d cancelled/ckpt_* | tail -1)  # the step SIGTERM saved
job=$(STEPS=400 OUT=cancelled sbatch --parsable --ntasks 2 --output cancelled-2.out --export ALL job.sbatch)
state=$(wait_job "$job")
[ -f cancelled/ckpt_000400/model.safetensors ] ||
  { echo "FAIL: the resubmitted job ($state) did not finish"; cat cancelled-2.out; exit 1; }
[ "$last" != cancelled/ckpt_000400 ] || { echo "FAIL: the job finished before it was cancelled"; exit 1; }
timeout 300 mpirun -np 2 --oversubscribe --allow-run-as-root --bind-to none \
  --mca btl_vader_single_copy_mechanism none -x OMP_NUM_THREADS=1 \
  "$xsa" train $model --threads 1 --steps 400 --out whole >whole.log 2>&1 || { echo "FAIL: mpirun"; cat whole.log; exit 1; }
cmp cancelled/ckpt_000400/model.safetensors whole/ckpt_000400/model.safetensors ||
  { echo "FAIL: cancelled and resubmitted, the run ends on other weights than an uninterrupted one"; exit 1; }
echo "PASS: sbatch + srun --mpi=pmix gave mpirun's bits; cancelled (job $cancelled_state) with $last saved by SIGTERM, and resubmitted, the uninterrupted run's bits"

#!/usr/bin/env bash
# Two machines on one: two network namespaces joined by a veth pair, each with its own hostname,
# and a 2-rank `xsa train` with one rank in each, Open MPI launching the far rank through a
# "remote shell" that enters the other namespace and talking over TCP alone (btl tcp,self: no
# shared memory between the ranks). Checked:
#   1. the run over TCP gives the bits of the same 2-rank run on one machine (shared memory): the
#      gradient sum's order is xsa's, not the transport's, and both equal one process's losses to
#      float rounding (tests/distributed_test.cpp bounds that step by step);
#   2. a killed rank ends the job (mpirun exits non-zero within a minute).
# Prints each run's median step time (the cost of TCP against shared memory). Needs root (network
# namespaces); exits 77 (SKIPPED in ctest) with the reason where the kernel or the build cannot.
# Usage: tests/cluster/netns_test.sh XSA_BINARY
set -euo pipefail
source "$(dirname "$0")/common.sh"
xsa=$(realpath "$1")
skip() { echo "SKIPPED: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "making network namespaces needs root"
command -v ip >/dev/null || skip "no ip command (apt install iproute2)"
command -v unshare >/dev/null || skip "no unshare (util-linux)"
command -v mpirun >/dev/null || skip "no mpirun (apt install openmpi-bin)"
ldd "$xsa" | grep libmpi >/dev/null || skip "xsa was built without MPI (libopenmpi-dev)"

tag=x$$
a=${tag}a b=${tag}b
subnet=10.$((($$ >> 8) % 200 + 20)).$(($$ % 250)).
work=$(mktemp -d)
cleanup() {
  for ns in $a $b; do
    for pid in $(ip netns pids $ns 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
    ip netns del $ns 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
ip netns add $a 2>"$work/err" || skip "the kernel refuses network namespaces here: $(cat "$work/err")"
ip netns add $b
ip link add ${tag}va type veth peer name ${tag}vb
ip link set ${tag}va netns $a
ip link set ${tag}vb netns $b
ip -n $a addr add ${subnet}1/24 dev ${tag}va
ip -n $b addr add ${subnet}2/24 dev ${tag}vb
for ns in $a $b; do
  ip -n $ns link set lo up
done
ip -n $a link set ${tag}va up
ip -n $b link set ${tag}vb up

# Open MPI starts the far rank's daemon as it would over ssh: `AGENT HOST COMMAND...`; this agent
# runs the command in namespace b under hostname node-b.
cat >"$work/ns_rsh" <<EOF
#!/bin/sh
shift
exec ip netns exec $b unshare --uts sh -c "hostname node-b; \$*"
EOF
chmod +x "$work/ns_rsh"

cd "$work"
write_training_text
model="$tiny_model --threads 1"
common_mpi="--allow-run-as-root --bind-to none -x OMP_NUM_THREADS=1"
tcp_mpi="$common_mpi --host ${subnet}1:1,${subnet}2:1 --mca plm_rsh_agent $work/ns_rsh \
--mca btl tcp,self --mca btl_tcp_if_include ${subnet}0/24 --mca oob_tcp_if_include ${subnet}0/24"
# mpirun and rank 0 in namespace a, as node-a.
cat >"$work/in_a" <<EOF
#!/bin/sh
exec ip netns exec $a unshare --uts sh -c 'hostname node-a; exec "\$@"' sh "\$@"
EOF
chmod +x "$work/in_a"

train="$xsa train $model --steps 30 --batch 4 --total-batch-tokens 256"
timeout 180 ./in_a mpirun -np 2 $tcp_mpi $train --out tcp >tcp.log 2>&1 ||
  { echo "FAIL: the run over TCP"; cat tcp.log; exit 1; }
timeout 180 mpirun -np 2 $common_mpi --oversubscribe --mca btl_vader_single_copy_mechanism none \
  $train --out shm >shm.log 2>&1 || { echo "FAIL: the run on one machine"; cat shm.log; exit 1; }
timeout 180 $xsa train $model --steps 30 --batch 8 --out one >one.log 2>&1 ||
  { echo "FAIL: the one-process run"; cat one.log; exit 1; }

python3 - <<'EOF'
import json, statistics, sys
def records(run):
    return [json.loads(l) for l in open(f"{run}/metrics.jsonl") if '"split"' not in l]
tcp, shm, one = records("tcp"), records("shm"), records("one")
bad = []
if [r["loss"] for r in tcp] != [r["loss"] for r in shm]:
    bad.append("the losses over TCP differ from the same ranks' on one machine")
if open("tcp/metrics.jsonl").read().count("\n") != open("shm/metrics.jsonl").read().count("\n"):
    bad.append("the runs logged different numbers of records")
worst = max(abs(a["loss"] - b["loss"]) / b["loss"] for a, b in zip(tcp, one))
# 30 steps apart from one process: the sums' rounding (~1e-7 a step) fed through later steps.
if len(tcp) != 30 or worst > 1e-4:
    bad.append(f"one process's losses differ by {worst:.2e} (relative) after {len(tcp)} steps")
for run, recs in (("tcp", tcp), ("shm", shm), ("one", one)):
    print(f"{run}: median step {statistics.median(r['ms'] for r in recs[5:]):.2f} ms")
print(f"largest relative difference to one process over 30 steps: {worst:.2e}")
if bad:
    print("FAIL: " + "; ".join(bad))
    sys.exit(1)
EOF
cmp tcp/ckpt_000030/model.safetensors shm/ckpt_000030/model.safetensors ||
  { echo "FAIL: the weights after 30 steps differ between TCP and shared memory"; exit 1; }

# A killed rank (the one in namespace b) ends the job.
./in_a mpirun -np 2 $tcp_mpi $xsa train $model --steps 1000000 --batch 4 \
  --total-batch-tokens 256 --out killed >killed.log 2>&1 &
job=$!
for _ in $(seq 600); do
  [ -s killed/metrics.jsonl ] && break
  sleep 0.1
done
[ -s killed/metrics.jsonl ] || { echo "FAIL: the run to kill never started"; cat killed.log; exit 1; }
for pid in $(ip netns pids $b); do
  [ "$(cat /proc/$pid/comm 2>/dev/null)" = xsa ] && kill -9 "$pid"
done
status=0
for _ in $(seq 600); do
  kill -0 $job 2>/dev/null || break
  sleep 0.1
done
if kill -0 $job 2>/dev/null; then
  echo "FAIL: a minute after its far rank was killed, the job still runs"
  exit 1
fi
wait $job || status=$?
[ $status -ne 0 ] || { echo "FAIL: the job whose rank was killed exited 0"; exit 1; }
echo "PASS: over TCP between two namespaces, the bits of one machine's two ranks; a killed rank ended the job (exit $status)"

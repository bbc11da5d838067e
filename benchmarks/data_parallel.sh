#!/usr/bin/env bash
# Tokens per second of data parallelism on one machine: N processes × 1 thread (mpirun) against
# 1 process × N threads, at the same global batch, on the `small` shape of docs/SPEC.md §4
# (6 layers, 384 wide, 6 heads, context 256, 8 sequences per step, GPT-2 vocabulary), SA.
# Each arrangement runs ROUNDS times, alternating; the figure is the median over rounds of each
# run's median step time (its first 3 steps left out).
#   bash benchmarks/data_parallel.sh [TEXT_FILE]      (default: data/default, from xsa prepare --default --tokenizer gpt2)
# Environment: N (processes / threads, default 2), STEPS (default 30), ROUNDS (default 3),
# MPIRUN_ARGS (default: --bind-to core; add --allow-run-as-root as root).
set -euo pipefail
cd "$(dirname "$0")/.."
data=${1:-data/default}
n=${N:-2} steps=${STEPS:-30} rounds=${ROUNDS:-3}
mpirun_args=${MPIRUN_ARGS:---bind-to core}
[ "$(id -u)" -eq 0 ] && mpirun_args="$mpirun_args --allow-run-as-root"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
common=(--data "$data" --tokenizer gpt2 --attn sa --layers 6 --heads 6 --embd 384 --seq-len 256
        --steps "$steps" --warmup 0 --val-batches 0 --quiet --total-batch-tokens 2048)
median_ms() {  # median step time of a run's metrics.jsonl, first 3 steps left out
  python3 -c '
import json, statistics, sys
ms = [json.loads(l)["ms"] for l in open(sys.argv[1]) if "split" not in l][3:]
print(statistics.median(ms))' "$1/metrics.jsonl"
}
one=() many=()
for r in $(seq "$rounds"); do
  ./build/xsa train "${common[@]}" --batch 8 --threads "$n" --out "$out/one$r" --force
  one+=("$(median_ms "$out/one$r")")
  # shellcheck disable=SC2086
  mpirun -np "$n" $mpirun_args ./build/xsa train "${common[@]}" --batch $((8 / n)) --threads 1 \
    --out "$out/many$r" --force
  many+=("$(median_ms "$out/many$r")")
done
python3 - "$n" "${one[*]}" "${many[*]}" <<'PY'
import statistics, sys
n = int(sys.argv[1])
one = statistics.median(map(float, sys.argv[2].split()))
many = statistics.median(map(float, sys.argv[3].split()))
print(f"1 process x {n} threads: {one:.1f} ms/step, {2048 / one * 1000:.0f} tokens/s")
print(f"{n} processes x 1 thread: {many:.1f} ms/step, {2048 / many * 1000:.0f} tokens/s")
print(f"{n} processes / 1 process: {one / many:.3f} of the single process's tokens/s")
PY

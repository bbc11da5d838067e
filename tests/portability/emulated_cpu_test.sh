#!/usr/bin/env bash
# The portable binary on CPUs it may meet, emulated by qemu-user (Debian's qemu-user, which
# emulates x86-64 up to AVX2 and FMA, no AVX-512): on a CPU without AVX2 (Nehalem) it stops at load
# with one line that names what is missing, not SIGILL; on a CPU with AVX2 but no AVX-512 it trains,
# samples and evaluates at the avx2 level, and the kernel benchmarks report their bf16 cases
# skipped. Any AVX-512 instruction reached would end it with SIGILL. Every other program given
# (the benchmarks) also stops at load with the one line on the CPU without AVX2. Exits 77 (SKIPPED)
# without qemu-x86_64. Usage: emulated_cpu_test.sh XSA_BINARY [KERNELS_BENCH [PROGRAM...]]
set -euo pipefail
xsa=$1 bench=${2:-}
shift
[ $# -gt 0 ] && shift
others=("$@")
if ! command -v qemu-x86_64 >/dev/null; then
  echo "emulated_cpu_test: skipped: no qemu-x86_64 (apt-get install qemu-user)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# xsa re-executes itself to correct OpenBLAS's kernel choice on CPUs it does not know, which
# qemu's CPUs are; a re-executed program would leave the emulator and run on the real CPU.
export XSA_KEEP_BLAS_CORE=1
unset XSA_CPU

echo "== a CPU without AVX2 (qemu -cpu Nehalem)"
for program in "$xsa" ${bench:+"$bench"} ${others[@]+"${others[@]}"}; do
  set +e
  qemu-x86_64 -cpu Nehalem "$program" --version >"$work/out" 2>"$work/err"
  status=$?
  set -e
  echo "$(basename "$program"): $(cat "$work/err")"
  [ "$status" -eq 1 ] || { echo "expected exit status 1, got $status"; exit 1; }
  [ "$(wc -l <"$work/err")" -eq 1 ] || { echo "expected one line"; exit 1; }
  grep -q "lacks AVX, AVX2, FMA" "$work/err" || { echo "the line does not name AVX2 and FMA"; exit 1; }
done

echo "== a CPU with AVX2 and no AVX-512 (qemu -cpu max)"
for _ in $(seq 60); do echo "The history of the attention is the history of the value it keeps."; done \
  >"$work/text.txt"
run() {  # (qemu's warnings about CPU features it cannot emulate left out)
  qemu-x86_64 -cpu max "$@" > >(cat) 2> >(grep -a -v "^qemu-x86_64: warning" >&2)
}
run "$xsa" train --data "$work/text.txt" --layers 2 --heads 2 --embd 32 --seq-len 32 --batch 4 \
  --steps 4 --val-every 2 --out "$work/run" --attn xsa-gated+sink >"$work/train.txt"
cat "$work/train.txt"
grep -q "device: cpu, avx2 " "$work/train.txt" || { echo "not at the avx2 level"; exit 1; }
grep -q "step 4 | val loss" "$work/train.txt" || { echo "training did not finish"; exit 1; }
run "$xsa" sample --ckpt "$work/run" --prompt "The history" --max-new-tokens 8 --seed 1
run "$xsa" eval --ckpt "$work/run" --data "$work/text.txt" --val-batches 2 | tail -3
if run "$xsa" train --data "$work/text.txt" --layers 2 --heads 2 --embd 32 --seq-len 32 --batch 4 \
  --steps 1 --precision bf16 --out "$work/bf16" >"$work/bf16.txt" 2>&1; then
  echo "bf16 training ran on a CPU without AVX512_BF16"
  exit 1
fi
cat "$work/bf16.txt"
grep -q "error: .*AVX512_BF16" "$work/bf16.txt" || { echo "no line naming AVX512_BF16"; exit 1; }
if [ -n "$bench" ]; then
  run "$bench" --benchmark_filter='AttentionBf16Forward|ToBf16|LayerNormForward' \
    --benchmark_min_time=0.01 >"$work/bench.txt"
  grep -E "AttentionBf16|ToBf16|LayerNorm" "$work/bench.txt" | head -8
  grep -q "skipped" "$work/bench.txt" || { echo "the bf16 benchmarks did not report skipped"; exit 1; }
fi
echo "emulated_cpu_test: passed"

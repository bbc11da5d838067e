#!/usr/bin/env bash
# Sanitizers and fuzzing: one clang build folder (build-fuzz/) with AddressSanitizer, LeakSanitizer
# and UndefinedBehaviorSanitizer (every finding fatal) and the libFuzzer targets of fuzz/; the whole
# test suite runs under it, then every fuzz target for XSA_FUZZ_SECONDS (default 30) seconds on its
# seed corpus, XSA_FUZZ_JOBS (default 2) at a time. Fails on any test failure, sanitizer report or
# fuzzer crash. Idempotent; what the fuzzers add to their corpora stays in build-fuzz/.
# Usage: scripts/check.sh [--fuzz-only]   (--fuzz-only: build, then fuzz without the suite)
set -euo pipefail
cd "$(dirname "$0")/.."
fuzz_only=0
[ "${1:-}" = "--fuzz-only" ] && fuzz_only=1
seconds=${XSA_FUZZ_SECONDS:-30}
jobs=${XSA_FUZZ_JOBS:-2}
build=build-fuzz
bash scripts/setup.sh check
bash scripts/get_data.sh --vocab-only >/dev/null  # GPT-2's vocabulary: tests and fuzz_gpt2_tokenizer

start=$SECONDS
# -gline-tables-only: file and line in every sanitizer report, at little cost in build time.
CC=clang CXX=clang++ cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DXSA_FUZZ=ON \
  -DCMAKE_CXX_FLAGS=-gline-tables-only >/dev/null
cmake --build "$build" -j "$(nproc)"
echo "check: build $((SECONDS - start)) s"

export ASAN_OPTIONS=halt_on_error=1:abort_on_error=1:detect_leaks=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=halt_on_error=1:abort_on_error=1:print_stacktrace=1
export LSAN_OPTIONS=suppressions=$PWD/scripts/lsan.supp:print_suppressions=0

if [ $fuzz_only = 0 ]; then
  start=$SECONDS
  echo "check: left out of the sanitized suite:"
  echo "  TorchOperator: python3 cannot load an ASan-built libxsa without LD_PRELOAD of the runtime"
  echo "  InstallAndExamples: the installed package's examples are built by the system compiler"
  echo "    without -fsanitize, so they cannot link the sanitized libxsa"
  echo "  Faults.MemoryStaysFlatOverALongRun: ASan holds freed memory in quarantine by design, so"
  echo "    resident memory grows"
  echo "  Faults.DecompressionBombsStayInBoundedMemory: its bound is on peak resident memory, which"
  echo "    under ASan is mostly the runtime's own (480 MB, the same for each of the test's inputs);"
  echo "    the release build's suite (scripts/test.sh) holds every bomb under it"
  echo "  Portability.*: the portable release build's properties (scripts/test.sh runs them); ASan"
  echo "    cannot map its shadow memory under qemu-user"
  echo "  Docs.*: the documentation's commands against the program (scripts/test.sh runs it); the"
  echo "    suite above runs the same commands' code under the sanitizers"
  serial='^(Distributed|Cluster|Faults)\.'
  ctest --test-dir "$build" --output-on-failure -j "$(nproc)" -E \
    "^(TorchOperator|InstallAndExamples)\$|^(Portability|Docs)\.|$serial"
  echo "check: one at a time: the tests that time signals and processes (Faults.*: slower under the"
  echo "  sanitizers, they race each other when run in parallel)"
  ctest --test-dir "$build" --output-on-failure -R '^Faults\.' \
    -E 'MemoryStaysFlatOverALongRun|DecompressionBombsStayInBoundedMemory'
  echo "check: Distributed.* and Cluster.* (under mpirun or srun) without LeakSanitizer: Open MPI"
  echo "  unloads its components at MPI_Finalize, so what they keep is reported from <unknown module>"
  echo "  and no suppression by library name can match it; AddressSanitizer and UBSan stay on"
  ASAN_OPTIONS=$ASAN_OPTIONS:detect_leaks=0 ctest --test-dir "$build" --output-on-failure \
    -R '^(Distributed|Cluster)\.'
  echo "check: test suite $((SECONDS - start)) s"
fi

# Each target runs on a copy of its seed corpus in build-fuzz/ (new inputs go there, not into the
# repository); a crash leaves the input as build-fuzz/fuzz-artifacts/<target>-crash-*.
start=$SECONDS
mkdir -p "$build/fuzz-corpus" "$build/fuzz-artifacts" "$build/fuzz-logs"
dict_of() {
  case $1 in
    safetensors | hf) echo "-dict=fuzz/safetensors.dict" ;;
    tasks | model_config | run_config | shard_meta | board_metrics) echo "-dict=fuzz/json.dict" ;;
  esac
}
run_target() {
  local name=$1 log="$build/fuzz-logs/$1.log"
  mkdir -p "$build/fuzz-corpus/$name"
  # -malloc_limit_mb: no input of a few KB may make a reader allocate 256 MB at once.
  if "$build/fuzz/fuzz_$name" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 \
    -malloc_limit_mb=256 -print_final_stats=1 -artifact_prefix="$build/fuzz-artifacts/$name-" \
    $(dict_of "$name") "$build/fuzz-corpus/$name" "fuzz/corpus/$name" >"$log" 2>&1; then
    echo "check: fuzz_$name: $(grep -m1 -o 'Done [0-9]* runs in [0-9]* second' "$log" || echo done), no crash"
  else
    echo "check: fuzz_$name FAILED (log $log):"
    tail -40 "$log"
    return 1
  fi
}
failed=0
running=0
for source in fuzz/fuzz_*.cpp; do
  name=$(basename "$source" .cpp)
  name=${name#fuzz_}
  run_target "$name" &
  running=$((running + 1))
  if [ $running -ge "$jobs" ]; then
    wait -n || failed=1
    running=$((running - 1))
  fi
done
while [ $running -gt 0 ]; do
  wait -n || failed=1
  running=$((running - 1))
done
echo "check: fuzzing $((SECONDS - start)) s (${seconds} s per target, $jobs at a time)"
[ $failed = 0 ] || { echo "check: a fuzz target failed"; exit 1; }
echo "check: passed"

#!/usr/bin/env bash
# The test command: installs, builds, runs the whole suite through ctest, then the numeric tests
# (label "numeric": kernels against float64 references, the model against PyTorch and against
# itself) again where rounding differs, as it would on another machine:
#   - with BLIS, then with the reference BLAS, in place of OpenBLAS for every fp32 and float64
#     product (LD_PRELOAD, as Debian's BLAS alternatives swap the library; XSA_GEMM=blas sends the
#     model's products there too, not to oneDNN);
#   - at each kernel level below this CPU's (XSA_CPU=avx2, avx512, ...).
# Extra arguments go to every ctest run (e.g. -R Golden). The sanitizer build and fuzzing are
# scripts/check.sh (CI runs it after this, .ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
bash scripts/build.sh
bash scripts/get_data.sh               # GPT-2's vocabulary (the tokenizer tests) and the default
                                      # corpus (the README's pin of the main job)
bash scripts/get_data.sh --browser-test # playwright-core, for the board in Chromium
jobs=$(nproc)
ctest --test-dir build --output-on-failure -j "$jobs" "$@"

libs=/usr/lib/$(gcc -dumpmachine)
for blas in "BLIS:$libs/blis-openmp/libblis.so.4" \
  "the reference BLAS (plain loops, no FMA):$libs/blas/libblas.so.3"; do
  echo "test: the numeric tests again with ${blas%%:*} (${blas##*:}) running every product"
  LD_PRELOAD=${blas##*:} XSA_GEMM=blas ctest --test-dir build --output-on-failure -j "$jobs" \
    -L numeric "$@"
done

# The levels this CPU has: XSA_CPU refuses a level above them.
levels=()
for level in avx2 avx512 avx512_bf16 amx; do
  XSA_CPU=$level ./build/xsa --version >/dev/null 2>&1 && levels+=("$level")
done
[ ${#levels[@]} -gt 0 ] && unset 'levels[${#levels[@]}-1]'  # the CPU's own: the first run above
for level in "${levels[@]}"; do
  echo "test: the numeric tests again at the $level kernel level (XSA_CPU=$level)"
  XSA_CPU=$level ctest --test-dir build --output-on-failure -j "$jobs" -L numeric "$@"
done

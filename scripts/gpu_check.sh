#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: builds xsa and its CUDA module for that GPU with every core,
# runs the GPU tests (tests/cuda_test.cpp: every kernel and the training step against the CPU,
# resume, checkpoints across devices) and the GPU benchmarks (xsa bench --device cuda), and writes
# logs and JSON into OUT. Meant to finish in under 8 minutes on one H200; each phase has its own
# time limit (about 12 minutes in all at worst) so a hang in one still leaves the others' results.
#
#   scripts/gpu_check.sh OUT
#
# Where the system lacks the libraries the build needs (a bare GPU image without network), it
# unpacks the Debian packages that scripts/gpu_deps.sh downloaded into .gpu-deps/ under
# /tmp/xsa-deps (never into /) and points the build there.
set -uo pipefail
out=${1:?usage: scripts/gpu_check.sh OUT_DIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."
t0=$SECONDS
# XSA_PACK=FILE.tgz: the results packed there after every line of the summary, so a caller that
# can only take a few files back (or is cut off) still gets everything done so far.
pack() { [ -z "${XSA_PACK:-}" ] || tar czf "$XSA_PACK" -C "$(dirname "$out")" "$(basename "$out")" 2>/dev/null || true; }
say() { echo "[gpu_check +$((SECONDS - t0))s] $*" | tee -a "$out/summary.txt"; pack; }

nvidia-smi >"$out/nvidia-smi.txt" 2>&1 && say "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null)" || say "nvidia-smi failed (see nvidia-smi.txt)"

# XSA_CUDA_ARCH overrides the GPU's own architecture (to try the script where there is no GPU);
# XSA_GPU_DEPS=1 uses .gpu-deps/ even where the system has the libraries.
args=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="${XSA_CUDA_ARCH:-native}" -DXSA_MPI=OFF
      -DXSA_DNNL=OFF)
nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc /usr/local/cuda-*/bin/nvcc 2>/dev/null | head -1)
[ -n "$nvcc" ] && args+=(-DCMAKE_CUDA_COMPILER="$nvcc")
command -v ninja >/dev/null && args+=(-G Ninja)
if [ "${XSA_GPU_DEPS:-0}" = 1 ] || ! [ -e /usr/include/x86_64-linux-gnu/openblas-openmp/cblas.h ] ||
   ! [ -e /usr/include/CLI/CLI.hpp ]; then
  if compgen -G ".gpu-deps/*.deb" >/dev/null; then
    deps=/tmp/xsa-deps
    mkdir -p $deps
    for f in .gpu-deps/*.deb; do dpkg -x "$f" $deps; done
    lib=$deps/usr/lib/x86_64-linux-gnu
    # (no pkg-config: it would find the unpacked .pc files through CMAKE_PREFIX_PATH, whose
    # prefix=/usr names system folders that lack the headers)
    args+=(-DCMAKE_PREFIX_PATH=$deps/usr -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON
           -DOPENBLAS_INCLUDE_DIR=$deps/usr/include/x86_64-linux-gnu/openblas-openmp
           -DOPENBLAS_LIBRARY=$lib/openblas-openmp/libopenblas.so
           -DPCRE2_INCLUDE_DIR=$deps/usr/include -DPCRE2_LIBRARY=$lib/libpcre2-8.so)
    export LD_LIBRARY_PATH=$lib:$lib/openblas-openmp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    say "libraries: unpacked $(ls .gpu-deps/*.deb | wc -l) packages from .gpu-deps/ into $deps"
  else
    say "libraries: the system lacks OpenBLAS or CLI11 and .gpu-deps/ is empty (run scripts/gpu_deps.sh where apt works)"
  fi
fi

say "configure: cmake ${args[*]}"
timeout 90 cmake -S . -B build-gpu "${args[@]}" >"$out/configure.log" 2>&1 || { say "configure FAILED (configure.log)"; tail -30 "$out/configure.log"; exit 1; }
grep -E "^-- (CUDA|OpenBLAS|oneDNN|MPI)" "$out/configure.log" | tee -a "$out/summary.txt"
timeout 200 cmake --build build-gpu -j "$(nproc)" --target xsa xsa_cuda cuda_test >"$out/build.log" 2>&1 || { say "build FAILED (build.log)"; grep -E "error|Error" "$out/build.log" | head -40; exit 1; }
say "build: done"

# The GPU tests (ctest runs each gtest case on its own; the summary counts skips apart).
timeout 150 ctest --test-dir build-gpu -R '^(Cuda|Variants/CudaAttention)' -j 4 --timeout 120 \
  --output-on-failure --output-junit "$out/ctest.xml" >"$out/ctest.log" 2>&1
say "tests: $(grep -E 'tests passed|tests failed' "$out/ctest.log" | tail -1); $(grep -c '\*\*\*Skipped' "$out/ctest.log") skipped"
grep -E "\*\*\*(Failed|Skipped|Timeout)|Exception" "$out/ctest.log" | head -40 | tee -a "$out/summary.txt"

# Memory errors and races in the kernels on small cases (compute-sanitizer, where it works).
if command -v compute-sanitizer >/dev/null; then
  timeout 45 compute-sanitizer --tool memcheck --error-exitcode 3 ./build-gpu/cuda_test \
    --gtest_filter='Cuda.ElementwiseOps:Cuda.CrossEntropySumsAndAdamW:Variants/CudaAttention.*B2_T37*:Variants/CudaAttention.*B2_T77*' \
    >"$out/memcheck.log" 2>&1
  say "memcheck: exit $? ($(grep -c 'Invalid' "$out/memcheck.log") invalid accesses; memcheck.log)"
  # Shared-memory races: the bf16 backward's dS exchange and the fp32 tiles.
  timeout 45 compute-sanitizer --tool racecheck --error-exitcode 3 ./build-gpu/cuda_test \
    --gtest_filter='Variants/CudaAttention.Bf16*B2_T77*:Variants/CudaAttention.Fp32*B1_T200*' \
    >"$out/racecheck.log" 2>&1
  say "racecheck: exit $? (racecheck.log)"
fi

# Benchmarks: the step table (bf16, every configuration, gpt2 at T 1024) and attention alone.
timeout 120 ./build-gpu/xsa bench --device cuda --precision bf16 --config all --steps 6 --warmup 2 \
  --json "$out/bench_bf16.json" >"$out/bench_bf16.md" 2>&1
say "bench bf16: exit $?"
grep -E "^\| (gpt2|small) .*(sa|xsa|XSA/SA)|^\| (64|128) \| (4096|16384) \| fwdbwd" "$out/bench_bf16.md" | tee -a "$out/summary.txt"
# The reference in the same run: PyTorch's fused attention (flash-attention 2, cuDNN) at the same
# shapes, where the machine's python3 has torch with CUDA.
timeout 60 python3 bench/torch_gpu_attention.py --json "$out/torch_attention.json" \
  >"$out/torch_attention.md" 2>&1
say "torch attention: exit $?"
grep -E "^\| (flash|cudnn) \| (sa|xsa) \| 128 \| (4096|16384) \| fwdbwd" "$out/torch_attention.md" | tee -a "$out/summary.txt"
timeout 30 ./build-gpu/xsa bench --device cuda --precision fp32 --tf32 --config gpt2 --no-attention \
  --steps 4 --warmup 1 --json "$out/bench_tf32.json" >"$out/bench_tf32.md" 2>&1
say "bench tf32: exit $?"
say "done in $((SECONDS - t0)) s"

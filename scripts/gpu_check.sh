#!/usr/bin/env bash
# The GPU check, one shot: on a machine with an NVIDIA GPU, builds xsa and its CUDA module for that
# GPU, measures, tests, and writes what a reader needs into OUT, in at most 540 s and at most six
# files (docs/gpus.md, "Checking it on a GPU"):
#   OUT/summary.txt    preflight, each phase's result and time, every table and test name
#   OUT/summary.json   the same as data (tests, the benchmarks' records, PyTorch's rows)
#   OUT/logs.tar.gz    every log, packed again after each phase (so a cut-off run keeps them)
#
#   bash scripts/gpu_deps.sh            # once, where apt works: .gpu-deps/ (the libraries)
#   bash scripts/gpu_check.sh OUT       # on the GPU machine, .gpu-deps/ carried along
#
# Phases in order of value, each with its own budget; a failed phase never stops the later ones:
#   preflight (GPU, driver, compilers, libraries; no GPU: say so and stop, exit 2)
#   build 200 s (xsa and the module; the tests only where GoogleTest is), benchmarks 130 s,
#   tests 140 s (failures rerun once with CUDA_LAUNCH_BLOCKING=1), sanitizers 60 s.
# Exit 0 when every phase passed, 1 when one failed, 2 without a GPU, 3 when libraries are missing.
set -uo pipefail
out=${1:?usage: scripts/gpu_check.sh OUT_DIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."
root=$(pwd)
t0=$SECONDS
logs=$(mktemp -d /tmp/xsa-gpu-check.XXXXXX)
summary=$out/summary.txt
: >"$summary"
failed=0
say() { echo "$*" | tee -a "$summary"; }
pack() { tar czf "$out/logs.tar.gz" -C "$logs" . 2>/dev/null || true; }
left() { echo $(($1 - SECONDS)); }  # seconds to a deadline, for timeout
export PYTHONUNBUFFERED=1

# ---- the libraries: the system's, else the Debian packages of .gpu-deps/ unpacked under /tmp ----
args=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="${XSA_CUDA_ARCH:-native}" -DXSA_MPI=OFF
      -DXSA_DNNL=OFF -DXSA_FUZZ=OFF)
deps_note="the system's"
if [ "${XSA_GPU_DEPS:-0}" = 1 ] || ! [ -e /usr/include/x86_64-linux-gnu/openblas-openmp/cblas.h ] ||
   ! [ -e /usr/include/CLI/CLI.hpp ] || ! [ -e /usr/include/boost/math/distributions/students_t.hpp ]; then
  if ! compgen -G ".gpu-deps/*.deb" >/dev/null; then
    echo "gpu_check: this machine lacks OpenBLAS, CLI11 or Boost and .gpu-deps/ is missing: run 'bash scripts/gpu_deps.sh' where apt works and bring .gpu-deps/ along" | tee -a "$summary" >&2
    exit 3
  fi
  deps=/tmp/xsa-deps
  mkdir -p $deps
  for f in .gpu-deps/*.deb; do dpkg -x "$f" $deps; done
  lib=$deps/usr/lib/x86_64-linux-gnu
  # (no pkg-config: it would find the unpacked .pc files, whose prefix=/usr lacks the headers)
  args+=(-DCMAKE_PREFIX_PATH=$deps/usr -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON
         -DOPENBLAS_INCLUDE_DIR=$deps/usr/include/x86_64-linux-gnu/openblas-openmp
         -DOPENBLAS_LIBRARY=$lib/openblas-openmp/libopenblas.so
         -DPCRE2_INCLUDE_DIR=$deps/usr/include -DPCRE2_LIBRARY=$lib/libpcre2-8.so
         -DBOOST_MATH_INCLUDE_DIR=$deps/usr/include)
  export LD_LIBRARY_PATH=$lib:$lib/openblas-openmp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  deps_note="$(ls .gpu-deps/*.deb | wc -l) packages from .gpu-deps/ unpacked into $deps"
fi
gtest=no
{ [ -e /usr/include/gtest/gtest.h ] || [ -e "${deps:-/nonexistent}/usr/include/gtest/gtest.h" ]; } && gtest=yes

# ---- preflight ----
version() { "$@" 2>/dev/null | grep -m1 -E '[0-9]+\.[0-9]+' || echo "not found"; }
nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc /usr/local/cuda-*/bin/nvcc 2>/dev/null | head -1)
cuda_root=$(dirname "$(dirname "${nvcc:-/usr/local/cuda/bin/nvcc}")")
sanitizer=$(command -v compute-sanitizer || ls "$cuda_root"/bin/compute-sanitizer 2>/dev/null | head -1)
cublaslt=$(ls "$cuda_root"/lib64/libcublasLt.so* "$cuda_root"/targets/*/lib/libcublasLt.so* 2>/dev/null | head -1)
nccl=$(ls "$cuda_root"/lib64/libnccl.so* "$cuda_root"/lib/libnccl.so* /opt/*/.venv/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so* 2>/dev/null | head -1)
gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>"$logs/nvidia-smi.err")
nvidia-smi >"$logs/nvidia-smi.txt" 2>&1
say "# xsa GPU check, $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
say ""
say "## Preflight"
say "- GPU: ${gpu:-none found ($(head -1 "$logs/nvidia-smi.err" 2>/dev/null || echo 'nvidia-smi failed'))}"
say "- nvcc: ${nvcc:-not found} ($(version "${nvcc:-nvcc}" --version | sed 's/.*release //'))"
say "- g++: $(version g++ --version); cmake: $(version cmake --version); ninja: $(command -v ninja >/dev/null && echo yes || echo no)"
say "- cuBLASLt: ${cublaslt:-not found}; NCCL: ${nccl:-not found (the module builds without; --comm nccl refused)}"
say "- compute-sanitizer: ${sanitizer:-not found, skipped}"
say "- libraries: $deps_note; GoogleTest: $gtest"
say "- python3 torch: $(python3 -c 'import torch; print(torch.__version__, "cuda", torch.cuda.is_available())' 2>/dev/null || echo 'not found (the PyTorch rows are skipped)')"
say "- cores: $(nproc)"

json_out() {  # summary.json from what exists so far
  python3 - "$out" "$logs" "$failed" <<'PY' 2>>"$logs/json.err" || true
import json, os, sys, glob, xml.etree.ElementTree as ET
out, logs, failed = sys.argv[1], sys.argv[2], int(sys.argv[3])
def load(name):
    try:
        return json.load(open(os.path.join(logs, name)))
    except Exception:
        return None
tests = None
if os.path.exists(os.path.join(logs, "ctest.xml")):
    tests = {"passed": [], "failed": [], "skipped": []}
    for case in ET.parse(os.path.join(logs, "ctest.xml")).getroot().iter("testcase"):
        status = case.get("status", "run")
        kind = "skipped" if status in ("notrun", "disabled") or case.find("skipped") is not None else \
               "failed" if status == "fail" or case.find("failure") is not None else "passed"
        tests[kind].append(case.get("name"))
phases = [line.split("\t") for line in open(os.path.join(logs, "phases.tsv"))] \
    if os.path.exists(os.path.join(logs, "phases.tsv")) else []
json.dump({"summary": open(os.path.join(out, "summary.txt")).read().splitlines()[:12],
           "phases": [{"phase": p[0], "result": p[1], "seconds": int(p[2])} for p in phases],
           "failed_phases": failed, "tests": tests,
           "bench_bf16": load("bench_bf16.json"), "bench_tf32": load("bench_tf32.json"),
           "torch_attention": load("torch_attention.json")},
          open(os.path.join(out, "summary.json"), "w"), indent=1)
PY
}
phase_end() {  # name, result; then the logs packed and the JSON refreshed
  say "- phase $1: $2 ($(($SECONDS - phase_t0)) s; $((SECONDS - t0)) s in all)"
  printf '%s\t%s\t%s\n' "$1" "$2" "$((SECONDS - phase_t0))" >>"$logs/phases.tsv"
  case $2 in passed | skipped*) ;; *) failed=$((failed + 1)) ;; esac
  pack
  json_out
}
if [ -z "$gpu" ]; then
  say ""
  say "No GPU found: nvidia-smi sees none, so nothing was built or measured. Run this on a machine with an NVIDIA GPU."
  pack
  json_out
  exit 2
fi
export XSA_CUDA_CHECK=0  # (the benchmarks run unchecked; the tests and sanitizers set it)

# ---- build: xsa and the module first, then (in the tests phase) the test binaries ----
say ""
say "## Build"
phase_t0=$SECONDS
deadline=$((SECONDS + 200))
[ -n "$nvcc" ] && args+=(-DCMAKE_CUDA_COMPILER="$nvcc")
command -v ninja >/dev/null && args+=(-G Ninja)
[ $gtest = yes ] || args+=(-DXSA_TESTS=OFF)
say "- configure: cmake ${args[*]}"
if timeout "$(left $deadline)" cmake -S . -B build-gpu "${args[@]}" >"$logs/configure.log" 2>&1; then
  grep -E "^-- (CUDA|NCCL|OpenBLAS)" "$logs/configure.log" | sed 's/^-- /- /' | tee -a "$summary"
  timeout "$(left $deadline)" cmake --build build-gpu -j "$(nproc)" --target xsa xsa_cuda \
    >"$logs/build.log" 2>&1
  rc=$?
  if [ $rc = 0 ]; then
    phase_end build passed
  elif [ $rc = 124 ]; then
    phase_end build "FAILED: out of its time (build.log)"
  else
    grep -E "error:|Error [0-9]" "$logs/build.log" | head -20 | tee -a "$summary"
    phase_end build "FAILED (build.log)"
  fi
else
  tail -20 "$logs/configure.log" | tee -a "$summary"
  phase_end build "FAILED at configure (configure.log)"
fi

# ---- benchmarks: the step table, attention alone, PyTorch's fused attention, TF32 ----
say ""
say "## Benchmarks"
phase_t0=$SECONDS
deadline=$((SECONDS + 130))
bench_result=passed
tables() { grep -E '^(#|\|)' "$1" | tee -a "$summary"; }
if [ -x build-gpu/xsa ]; then
  timeout "$(left $((deadline - 45)))" ./build-gpu/xsa bench --device cuda --precision bf16 \
    --model all --steps 6 --warmup 2 --json "$logs/bench_bf16.json" >"$logs/bench_bf16.md" 2>&1 ||
    bench_result="FAILED (bench_bf16.md: exit $?)"
  tables "$logs/bench_bf16.md"
  timeout "$(left $((deadline - 15)))" python3 benchmarks/torch_gpu_attention.py \
    --json "$logs/torch_attention.json" >"$logs/torch_attention.md" 2>&1 ||
    say "- PyTorch attention: exit $? (torch_attention.md)"
  tables "$logs/torch_attention.md"
  timeout "$(left $deadline)" ./build-gpu/xsa bench --device cuda --precision fp32 --tf32 \
    --model gpt2 --no-attention --steps 4 --warmup 1 --json "$logs/bench_tf32.json" \
    >"$logs/bench_tf32.md" 2>&1 || bench_result="FAILED (bench_tf32.md: exit $?)"
  tables "$logs/bench_tf32.md"
  phase_end benchmarks "$bench_result"
else
  phase_end benchmarks "skipped: no xsa binary"
fi

# ---- tests: the GPU tests and the op table's GPU rows, failures rerun with blocking launches ----
say ""
say "## Tests"
phase_t0=$SECONDS
deadline=$((SECONDS + 140))
export XSA_CUDA_CHECK=1
filter='^(Cuda|Variants/CudaAttention|Table/BackendOps.*_on_cuda)'
if [ $gtest = no ]; then
  phase_end tests "skipped: GoogleTest not found"
elif ! timeout "$(left $((deadline - 60)))" cmake --build build-gpu -j "$(nproc)" \
    --target cuda_test backend_ops_test device_comm_test >"$logs/build_tests.log" 2>&1; then
  grep -E "error" "$logs/build_tests.log" | head -20 | tee -a "$summary"
  phase_end tests "FAILED to build (build_tests.log)"
else
  timeout "$(left $((deadline - 25)))" ctest --test-dir build-gpu -R "$filter|^DeviceComm|^GpuPeaks" \
    -j 4 --timeout 100 --output-on-failure --output-junit "$logs/ctest.xml" >"$logs/ctest.log" 2>&1
  skipped=$(grep -E '\*\*\*Skipped|Not Run' "$logs/ctest.log" | sed -E 's/.*Test +#[0-9]+: ([^ ]+).*/\1/' | sort -u)
  failing=$(sed -n '/The following tests FAILED/,$p' "$logs/ctest.log" | grep -E '^\s+[0-9]+ - ' | sed -E 's/^\s+[0-9]+ - ([^ ]+).*/\1/')
  total=$(grep -oE 'out of [0-9]+' "$logs/ctest.log" | tail -1 | grep -oE '[0-9]+')
  n_skipped=$(echo "$skipped" | grep -c .)
  n_failed=$(echo "$failing" | grep -c .)
  say "- tests: $((${total:-0} - n_skipped - n_failed)) passed, $n_failed failed, $n_skipped skipped, of ${total:-none run} (ctest counts a skip as passed; summary.json lists every name)"
  say "- skipped: $(echo $skipped | head -c 4000)"
  if [ -n "$failing" ]; then
    say "- failed: $(echo $failing)"
    # Once more with blocking launches: a fault then surfaces in the call that made it.
    for t in $(echo "$failing" | head -12); do
      [ "$(left $deadline)" -gt 5 ] || break
      CUDA_LAUNCH_BLOCKING=1 timeout "$(left $deadline)" ctest --test-dir build-gpu -R "^${t}\$" \
        --output-on-failure >"$logs/rerun_${t//\//_}.log" 2>&1
      say "  - rerun $t with CUDA_LAUNCH_BLOCKING=1: exit $?"
      grep -vE '^\s*$' "$logs/rerun_${t//\//_}.log" | tail -8 | sed 's/^/      /' | tee -a "$summary"
    done
    phase_end tests FAILED
  elif grep -q "tests passed" "$logs/ctest.log"; then
    phase_end tests passed
  else
    phase_end tests "FAILED (ctest.log: no result, a timeout?)"
  fi
fi

# ---- sanitizers: memory errors and shared-memory races on small cases ----
say ""
say "## Sanitizers"
phase_t0=$SECONDS
deadline=$((SECONDS + 60))
if [ -z "$sanitizer" ]; then
  phase_end sanitizers "skipped: compute-sanitizer not found"
elif ! [ -x build-gpu/cuda_test ]; then
  phase_end sanitizers "skipped: no cuda_test"
else
  timeout "$(left $((deadline - 25)))" "$sanitizer" --tool memcheck --error-exitcode 3 \
    ./build-gpu/cuda_test --gtest_filter='Cuda.ElementwiseOps:Cuda.CrossEntropySumsAndAdamW:Variants/CudaAttention.*B2_T37*:Variants/CudaAttention.*B2_T77*' \
    >"$logs/memcheck.log" 2>&1
  memcheck=$?
  say "- memcheck: exit $memcheck, $(grep -c 'Invalid' "$logs/memcheck.log") invalid accesses"
  timeout "$(left $deadline)" "$sanitizer" --tool racecheck --error-exitcode 3 ./build-gpu/cuda_test \
    --gtest_filter='Variants/CudaAttention.Bf16*B2_T77*:Variants/CudaAttention.Fp32*B1_T200*' \
    >"$logs/racecheck.log" 2>&1
  racecheck=$?
  say "- racecheck: exit $racecheck, $(grep -cE 'RACE|hazard' "$logs/racecheck.log") hazard lines"
  [ $memcheck = 0 ] && [ $racecheck = 0 ] && phase_end sanitizers passed ||
    phase_end sanitizers "FAILED (memcheck.log, racecheck.log)"
fi

say ""
say "Done in $((SECONDS - t0)) s: $failed phase(s) failed."
pack
json_out
[ $failed = 0 ]

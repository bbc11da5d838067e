#!/usr/bin/env bash
# Configures and builds xsa (Release) into build/: the portable build (any x86-64 with AVX2, its
# kernels also compiled for AVX-512 and picked at run time); XSA_NATIVE=1 in the environment builds
# for this machine's CPU only (-march=native). Installs the build packages first. Idempotent.
# Usage: scripts/build.sh [TARGET...]   (no target: everything, the tests, benchmarks, examples
#        and the CUDA module included; `scripts/build.sh xsa`: the program and its libraries only,
#        what the main job runs)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh build
bash scripts/get_data.sh --web   # the board's chart library, embedded by the build
native=OFF
[ "${XSA_NATIVE:-0}" != 0 ] && native=ON
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DXSA_NATIVE=$native >/dev/null
targets=()
for target in "$@"; do targets+=(--target "$target"); done
cmake --build build -j "$(nproc)" "${targets[@]}"

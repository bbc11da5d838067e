#!/usr/bin/env bash
# Downloads, on a machine with apt, the Debian packages that building xsa needs besides CUDA, into
# .gpu-deps/ (ignored by git): for a GPU machine that has CUDA, a compiler and CMake but no network
# and none of these libraries. scripts/gpu_check.sh unpacks them there (never into /) when its own
# system lacks them. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(libopenblas0-openmp libopenblas-openmp-dev libgfortran5 libquadmath0 libfmt9 libfmt-dev
          libcli11-dev nlohmann-json3-dev libpcre2-8-0 libpcre2-dev libgtest-dev
          libboost1.74-dev libsimdjson14 libsimdjson-dev libxxhash-dev)
mkdir -p .gpu-deps
cd .gpu-deps
missing=()
for p in "${packages[@]}"; do
  compgen -G "${p}_*.deb" >/dev/null || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  # (as root, apt's download user cannot write here: it warns and downloads as root)
  apt-get download "${missing[@]}" 2>&1 | grep -v "unsandboxed as root" || true
fi
for p in "${packages[@]}"; do
  compgen -G "${p}_*.deb" >/dev/null || { echo "gpu_deps: $p was not downloaded" >&2; exit 1; }
done
echo "gpu_deps: $(ls ./*.deb | wc -l) packages, $(du -sh . | cut -f1) in .gpu-deps/"

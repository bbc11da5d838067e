#!/usr/bin/env bash
# Installs what xsa needs to build and test from Debian packages. Idempotent: does nothing
# when everything is already there.
set -euo pipefail
packages=(build-essential cmake pkg-config libopenblas-openmp-dev libomp-dev libgtest-dev
          libbenchmark-dev libcli11-dev nlohmann-json3-dev libfmt-dev libpcre2-dev librsvg2-bin
          openmpi-bin libopenmpi-dev libdnnl-dev python3-torch libtorch-dev python3-dev
          pybind11-dev clang libclang-rt-14-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi

#!/usr/bin/env bash
# Installs from Debian packages what xsa needs, by what it is for. Idempotent: installs only what
# is missing, and nothing when everything is there.
# Usage: scripts/setup.sh [GROUP...]   (the build group always)
#        scripts/setup.sh --only GROUP...   (those groups alone)
#   build  compile, train, compare, evaluate, sample (the main job needs only this), with data
#   data   curl and Node.js for the default data (scripts/get_data.sh)
#   test   the test suite's extras: qemu-user (the binary on emulated CPUs), BLIS and the reference
#          BLAS (BLAS libraries whose sums are ordered otherwise), Chromium (the board's page in a
#          real browser), iproute2 and Slurm's daemons (two network stacks and a one-node cluster:
#          tests/cluster/); with it, the torch group
#   torch  the PyTorch operator (python/xsa_torch, about a gigabyte of packages)
#   check  the sanitizer and fuzzing build (scripts/check.sh): clang, its runtimes and OpenMP
set -euo pipefail
data=(curl ca-certificates nodejs)
build=(build-essential cmake pkg-config libopenblas-openmp-dev libgtest-dev libbenchmark-dev
       libcli11-dev nlohmann-json3-dev libfmt-dev libpcre2-dev librsvg2-bin openmpi-bin
       libopenmpi-dev libdnnl-dev libcpp-httplib-dev libsentencepiece-dev libboost-dev
       zlib1g-dev libzstd-dev libsimdjson-dev libxxhash-dev "${data[@]}")
torch=(python3-torch libtorch-dev python3-dev pybind11-dev)
test=(qemu-user libblis4-openmp libblas3 chromium sentencepiece iproute2 slurmctld slurmd
      slurm-client "${torch[@]}")
check=(clang libclang-rt-14-dev libomp-dev)
packages=("${build[@]}")
if [ "${1:-}" = --only ]; then
  packages=()
  shift
fi
for group in "$@"; do
  case $group in
    build) packages+=("${build[@]}") ;;
    data) packages+=("${data[@]}") ;;
    test) packages+=("${test[@]}") ;;
    torch) packages+=("${torch[@]}") ;;
    check) packages+=("${check[@]}") ;;
    *) echo "setup: unknown group $group (build, data, test, torch or check)" >&2; exit 2 ;;
  esac
done
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

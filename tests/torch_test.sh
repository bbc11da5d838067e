#!/usr/bin/env bash
# The PyTorch operator (python/xsa_torch): builds the extension against BUILD_DIR into
# BUILD_DIR/torch/xsa_torch, then runs tests/python/test_xsa_torch.py. Fails on any step; exits 77,
# which ctest reports as SKIPPED, when no python3 can import torch.
# Usage: torch_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd) source=$(cd "$2" && pwd)

python=""
for candidate in ${PYTHON:-} /usr/bin/python3 python3; do
  # The interpreter itself, not a shim that may pick another one in another folder.
  if found=$("$candidate" -c "import torch, sys; print(sys.executable)" 2>/dev/null); then
    python=$found
    break
  fi
done
if [ -z "$python" ]; then
  echo "torch_test: skipped: no python3 can import torch" \
    "(apt-get install python3-torch libtorch-dev python3-dev pybind11-dev)"
  exit 77
fi

out=$build/torch
mkdir -p "$out"
if ! PYTHON=$python bash "$source/python/build.sh" "$build" "$out" >"$out/build.log" 2>&1; then
  tail -n 40 "$out/build.log"
  echo "torch_test: building the extension failed (log: $out/build.log)"
  exit 1
fi
PYTHONPATH=$out PYTHONPYCACHEPREFIX=$out/pycache XSA_BINARY=$build/xsa \
  "$python" -m unittest discover -s "$source/tests/python" -v

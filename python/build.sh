#!/usr/bin/env bash
# Builds the xsa_torch extension against an xsa build folder (after `bash scripts/build.sh`).
# Usage: python/build.sh [XSA_BUILD_DIR [OUT_DIR]]
#   XSA_BUILD_DIR  the xsa build folder (default: $XSA_BUILD_DIR, else build/ of this checkout)
#   OUT_DIR        where to write a complete, importable xsa_torch package (OUT_DIR/xsa_torch);
#                  without it the extension is built in place, next to python/xsa_torch/__init__.py
# The interpreter is $PYTHON, else the first of python3 and /usr/bin/python3 that imports torch
# (Debian's python3-torch lives in the system interpreter, which a pyenv python3 may shadow).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
xsa_build=$(cd "${1:-${XSA_BUILD_DIR:-$here/../build}}" && pwd)
out=${2:-}

if [ -z "${PYTHON:-}" ]; then
  for candidate in /usr/bin/python3 python3; do
    # The interpreter itself, not a shim that may pick another one in another folder.
    if found=$("$candidate" -c "import torch, sys; print(sys.executable)" 2>/dev/null); then
      PYTHON=$found
      break
    fi
  done
fi
if [ -z "${PYTHON:-}" ] && bash "$here/../scripts/setup.sh" torch &&
  found=$(/usr/bin/python3 -c "import torch, sys; print(sys.executable)" 2>/dev/null); then
  PYTHON=$found  # Debian's python3-torch, just installed
fi
if [ -z "${PYTHON:-}" ]; then
  echo "build.sh: no python3 that can import torch (apt-get install python3-torch)" >&2
  exit 2
fi

cd "$here"
if [ -z "$out" ]; then
  # Intermediate files go to the xsa build folder, not into the source tree.
  XSA_BUILD_DIR=$xsa_build "$PYTHON" setup.py -q build_ext --inplace \
    --build-temp "$xsa_build/xsa_torch_tmp" --build-lib "$xsa_build/xsa_torch_tmp/lib"
  echo "built $(ls "$here"/xsa_torch/_C*.so) (import with PYTHONPATH=$here)"
else
  mkdir -p "$out"
  out=$(cd "$out" && pwd)
  XSA_BUILD_DIR=$xsa_build "$PYTHON" setup.py -q build_py --build-lib "$out" \
    build_ext --build-lib "$out" --build-temp "$out/tmp"
  echo "built $(ls "$out"/xsa_torch/_C*.so) (import with PYTHONPATH=$out)"
fi

#!/usr/bin/env bash
# The test command: installs, builds, runs the whole suite through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)" "$@"

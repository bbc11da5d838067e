#!/usr/bin/env bash
# The test command: installs, builds, runs the whole suite through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
bash scripts/get_data.sh --vocab-only   # GPT-2's vocabulary, for the tokenizer tests
ctest --test-dir build --output-on-failure -j "$(nproc)" "$@"

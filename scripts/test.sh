#!/usr/bin/env bash
# The test command: installs, builds, runs the whole suite through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
bash scripts/get_data.sh --vocab-only   # GPT-2's vocabulary, for the tokenizer tests
ctest --test-dir build --output-on-failure -j "$(nproc)" "$@"
# Then the whole suite again under AddressSanitizer, LeakSanitizer and UBSan, and every fuzz
# target briefly (scripts/check.sh, docs/fuzzing.md). XSA_CHECK=0 leaves that out.
if [ "${XSA_CHECK:-1}" != 0 ]; then
  XSA_FUZZ_SECONDS=${XSA_FUZZ_SECONDS:-20} bash scripts/check.sh
fi

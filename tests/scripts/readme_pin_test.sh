#!/usr/bin/env bash
# README.md's example of the main job holds while what it depends on holds: the pin line in its
# comment against scripts/readme_pin.sh's now (the shards and the preset exactly, the first losses
# within 1e-5 relative: another CPU's roundings). A change that alters the main job's output fails
# here until the README's example is made again. Needs the default corpus (scripts/get_data.sh,
# which the test command runs); without it: SKIPPED (exit 77), saying so.
# Usage: tests/scripts/readme_pin_test.sh XSA_BINARY SOURCE_DIR
set -euo pipefail
xsa=$(realpath "$1")
src=$(realpath "$2")
if [ ! -d "$src/data/npm/nlp-corpus" ]; then
  echo "SKIPPED: the default corpus is not fetched (bash scripts/get_data.sh)"
  exit 77
fi
pinned=$(grep -o 'main-job pin: .* -->' "$src/README.md" | sed 's/ -->$//') ||
  { echo "FAIL: README.md has no main-job pin comment"; exit 1; }
now=$(bash "$src/scripts/readme_pin.sh" "$xsa")
python3 - "$pinned" "$now" <<'PY'
import re, sys
pinned, now = sys.argv[1], sys.argv[2]
def parts(line):
    head, losses = line.split("first losses (seeds 1-3, sa / xsa): ")
    return head, [float(x) for x in losses.replace("/", " ").split()]
(ph, pl), (nh, nl) = parts(pinned), parts(now)
if ph != nh:
    sys.exit(f"FAIL: the main job's data or preset changed; make the README's example again "
             f"(bash scripts/run.sh) and its pin (bash scripts/readme_pin.sh)\n  README: {ph}\n  now:    {nh}")
bad = [(a, b) for a, b in zip(pl, nl) if abs(a - b) > 1e-5 * abs(a)]
if len(pl) != 6 or len(nl) != 6 or bad:
    sys.exit(f"FAIL: the main job's first losses changed {bad or (pl, nl)}; make the README's "
             f"example again (bash scripts/run.sh) and its pin (bash scripts/readme_pin.sh)")
print("the README's example of the main job is pinned to what it depends on today")
PY

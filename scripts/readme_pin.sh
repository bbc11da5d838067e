#!/usr/bin/env bash
# What the README's example of the main job depends on, as one line: the default corpus prepared
# byte-level afresh (the SHA-256 of its train, val and long shards: the corpus and its split), the
# demo preset as compare resolves it (its dry run's line), and the first training loss of every
# arm of the comparison's three seeds (the data, the model, the initial weights and the batches).
# README.md carries this line in a comment above the example table; the test
# tests/scripts/readme_pin_test.sh runs this script and fails when they differ, so a change that
# alters the main job's output fails until the README's example is made again (bash scripts/run.sh)
# and this line with it.
# Usage: scripts/readme_pin.sh [XSA_BINARY]   (after scripts/get_data.sh; about 20 s)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
xsa=$(realpath "${1:-$src/build/xsa}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$src"  # prepare --default reads data/npm from here
"$xsa" prepare --default --tokenizer byte --quiet --out "$work/default-byte" >/dev/null
digest() { cat "$@" | sha256sum | cut -c1-16; }
data=$work/default-byte
shards="train $(digest "$data"/train_*.bin), val $(digest "$data"/val_*.bin), long $(digest "$data"/long/val_*.bin)"
preset=$("$xsa" compare --data "$data" --preset demo --eval-data "$data/long" --dry-run \
  --out "$work/none" | grep '^dry run' | sed "s|$work/||g")
"$xsa" compare --data "$data" --preset demo --lr 4e-3 --steps 1 --val-every 0 --val-batches 1 \
  --score-tokens 4096 --quiet --out "$work/first" >/dev/null
losses=$(python3 - "$work/first" <<'PY'
import json, sys
out = []
for variant in ("sa", "xsa"):
    for seed in (1, 2, 3):
        with open(f"{sys.argv[1]}/arms/{variant}-seed{seed}/metrics.jsonl") as f:
            first = next(json.loads(l) for l in f if '"split"' not in l)
        out.append(f"{first['loss']:.6f}")
print(" ".join(out[:3]) + " / " + " ".join(out[3:]))
PY
)
echo "main-job pin: shards: $shards; preset: $preset; first losses (seeds 1-3, sa / xsa): $losses"

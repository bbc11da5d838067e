#!/usr/bin/env bash
# xsa board and report.html in a real browser (Debian's Chromium, driven by playwright-core from
# npm): a folder with a finished run, a comparison and a run still training; board_test.mjs
# checks the page's DOM and charts, sees the training run advance without a reload, and opens the
# comparison's and a sweep's report.html from disk. Screenshots go to OUT (docs/board.png is one of them).
# Usage: board_test.sh XSA_BINARY SOURCE_DIR OUT. Exit 77 (SKIPPED) with the reason when there is no
# browser to run.
set -euo pipefail
xsa=$1 src=$2 out=$3
playwright=$src/data/npm/playwright-core
skip() { echo "SKIPPED: $1"; exit 77; }
command -v chromium >/dev/null || skip "no Chromium (apt install chromium; scripts/test.sh installs it)"
command -v node >/dev/null || skip "no Node.js (apt install nodejs)"
[ -f "$playwright/index.mjs" ] || skip "no playwright-core (bash scripts/get_data.sh --browser-test)"
"$xsa" board --help >/dev/null

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$out" "$work/runs"
python3 -c "
line = 'It was the best of times, it was the worst of times, it was the age of wisdom.\n'
open('$work/text.txt', 'w').write(line * 4000)"
cd "$work"
tiny=(--data text.txt --layers 2 --heads 2 --embd 32 --seq-len 32 --batch 4 --threads 1 --quiet)
"$xsa" train "${tiny[@]}" --steps 40 --val-every 10 --val-batches 2 --out runs/finished
"$xsa" compare --data text.txt --preset tiny --steps 30 --val-every 10 --seeds 2 --threads 1 \
  --quiet --out runs/compare
"$xsa" sweep --param seq-len=32,64 --data text.txt --preset tiny --steps 10 --val-every 5 \
  --seeds 1 --threads 1 --quiet --out sweep
# Trains for minutes unless stopped: the test ends it.
"$xsa" train "${tiny[@]}" --embd 64 --seq-len 64 --steps 1000000 --val-every 200 \
  --val-batches 1 --out runs/training &
pids+=($!)
for _ in $(seq 100); do [ -s runs/training/metrics.jsonl ] && break; sleep 0.1; done

"$xsa" board runs --port 0 >board.log 2>&1 &
pids+=($!)
for _ in $(seq 100); do grep -q "http://" board.log && break; sleep 0.1; done
url=$(grep -o "http://[^ ]*" board.log) || { cat board.log; exit 1; }
echo "board at $url"
node "$src/tests/browser/board_test.mjs" "$playwright/index.mjs" "$url" \
  "$work/runs/compare/report.html" "$work/sweep/report.html" "$out"

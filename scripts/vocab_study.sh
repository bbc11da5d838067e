#!/usr/bin/env bash
# Bytes, a 4 096-piece SentencePiece BPE and GPT-2's 50 257 pieces on the default corpus, each
# trained for the same wall-clock (default 180 s) with the demo's model (4 layers x 128, context
# 256, batch 16, peak lr 2e-3, XSA): then each one's validation bits per byte (xsa eval) and a
# sample after the same prompt. Writes runs/vocab/<name>/ and prints a table.
# Usage: bash scripts/vocab_study.sh [SECONDS]   (after bash scripts/run.sh has fetched the corpus)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-180}
xsa=./build/xsa
[ -d data/spm-4096 ] || $xsa tokenizer train --default --vocab 4096 --out data/spm-4096 --quiet
[ -d data/default-spm-4096 ] || $xsa prepare --default --tokenizer spm:data/spm-4096 --quiet
model=(--layers 4 --heads 4 --embd 128 --seq-len 256 --batch 16 --lr 2e-3 --attn xsa)
printf '| vocabulary | steps in %s s | ms/step | val loss (nats/token) | val bits per byte |\n' "$seconds"
printf '|---|---|---|---|---|\n'
for pair in byte:data/default-byte spm-4096:data/default-spm-4096 gpt2:data/default; do
  name=${pair%%:*} data=${pair#*:}
  # ms per step from 10 steps, then as many steps as fit in the time.
  $xsa train --data "$data" "${model[@]}" --steps 10 --val-every 0 --val-batches 0 --quiet \
    --force --out "runs/vocab/$name-probe" >/dev/null
  ms=$(python3 -c "
import json
r=[json.loads(l) for l in open('runs/vocab/$name-probe/metrics.jsonl') if '\"ms\"' in l]
print(sorted(x['ms'] for x in r[2:])[len(r[2:])//2])")
  steps=$(python3 -c "print(max(10, int($seconds * 1000 / $ms)))")
  $xsa train --data "$data" "${model[@]}" --steps "$steps" --val-every 0 --val-batches 8 --quiet \
    --force --out "runs/vocab/$name" >/dev/null
  $xsa eval --ckpt "runs/vocab/$name" --data "$data" --json "runs/vocab/$name/eval.json" \
    >/dev/null
  read -r loss bpb < <(python3 -c "
import json
e=json.load(open('runs/vocab/$name/eval.json')); e=e[0] if isinstance(e,list) else e
print(e['val_loss'], e['bpb'])")
  printf '| %s | %s | %.0f | %.4f | %.4f |\n' "$name" "$steps" "$ms" "$loss" "$bpb"
  $xsa sample --ckpt "runs/vocab/$name" --prompt "The history of" --max-new-tokens 60 --seed 1 \
    2>/dev/null >"runs/vocab/$name/sample.txt"
done
for name in byte spm-4096 gpt2; do
  printf '\n%s: ' "$name"; cat "runs/vocab/$name/sample.txt"
done

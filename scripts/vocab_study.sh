#!/usr/bin/env bash
# Bytes, a 4 096-piece SentencePiece BPE and GPT-2's 50 257 pieces on the default corpus, each
# trained for the same wall-clock (default 180 s) with the demo's model (4 layers x 128, context
# 256, batch 16, peak lr 2e-3, XSA), once per seed (default 1): then each one's validation bits per
# byte (xsa eval on all of its validation split) and a sample after the same prompt. Writes
# runs/vocab/<name>-seed<N>/ and prints a table: the mean over seeds, ± their standard deviation.
# Usage: bash scripts/vocab_study.sh [SECONDS] [SEEDS]   (after bash scripts/run.sh has fetched the
# corpus)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-180}
seeds=${2:-1}
xsa=./build/xsa
[ -d data/spm-4096 ] || $xsa tokenizer train --default --vocab 4096 --out data/spm-4096 --quiet
[ -f data/default-spm-4096/long/meta.json ] || $xsa prepare --default --tokenizer spm:data/spm-4096 --quiet --force
model=(--layers 4 --heads 4 --embd 128 --seq-len 256 --batch 16 --lr 2e-3 --attn xsa)
# One tokenizer, one seed: ms per step from 10 steps, then as many steps as fit in the time; prints
# "steps ms loss bpb".
train_one() {
  local name=$1 data=$2 seed=$3 out=runs/vocab/$1-seed$3
  $xsa train --data "$data" "${model[@]}" --seed "$seed" --steps 10 --val-every 0 \
    --val-batches 0 --quiet --force --out "$out-probe" >/dev/null
  local ms steps
  ms=$(python3 -c "
import json
r=[json.loads(l) for l in open('$out-probe/metrics.jsonl') if '\"ms\"' in l]
print(sorted(x['ms'] for x in r[2:])[len(r[2:])//2])")
  steps=$(python3 -c "print(max(10, int($seconds * 1000 / $ms)))")
  $xsa train --data "$data" "${model[@]}" --seed "$seed" --steps "$steps" --val-every 0 \
    --val-batches 8 --quiet --force --out "$out" >/dev/null
  $xsa eval --ckpt "$out" --data "$data" --json "$out/eval.json" >/dev/null
  $xsa sample --ckpt "$out" --prompt "The history of" --max-new-tokens 60 --seed 1 \
    2>/dev/null >"$out/sample.txt"
  python3 -c "
import json
e=json.load(open('$out/eval.json')); e=e[0] if isinstance(e,list) else e
print($steps, $ms, e['val_loss'], e['bpb'])"
}
printf '| vocabulary | steps in %s s | ms/step | val loss (nats/token) | val bits per byte | per seed |\n' \
  "$seconds"
printf '|---|---|---|---|---|---|\n'
for pair in byte:data/default-byte spm-4096:data/default-spm-4096 gpt2:data/default; do
  name=${pair%%:*} data=${pair#*:}
  rows=$(for seed in $(seq 1 "$seeds"); do train_one "$name" "$data" "$seed"; done)
  python3 -c "
import statistics as st, sys
rows=[list(map(float, l.split())) for l in sys.argv[2].splitlines()]
col=lambda i: [r[i] for r in rows]
sd=lambda xs: ' ± %.4f' % st.stdev(xs) if len(xs) > 1 else ''
print('| %s | %.0f | %.0f | %.4f%s | %.4f%s | %s |' % (sys.argv[1], st.mean(col(0)), st.mean(col(1)),
      st.mean(col(2)), sd(col(2)), st.mean(col(3)), sd(col(3)), ', '.join('%.4f' % b for b in col(3))))
" "$name" "$rows"
done
for name in byte spm-4096 gpt2; do
  printf '\n%s (seed 1): ' "$name"; cat "runs/vocab/$name-seed1/sample.txt"
done
echo

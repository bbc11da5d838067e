#!/usr/bin/env bash
# The study of docs/study.md: SA, XSA and XSA's rivals at context 256, 1024 and 4096 with the same
# tokens in every step (4 096), each variant at its own tuned learning rate, on the byte-level
# default corpus (sentences, the Brown texts and the State of the Union addresses), validated on
# windows drawn across the whole validation split and scored at the end on the held-out long
# documents (data/default-byte/long), loss by position included; then the same at context 256 on
# the 4 096-piece SentencePiece vocabulary of the default corpus.
#
# Installs and builds what is missing (as the main job), then runs `xsa sweep` into runs/study and
# `xsa compare` into runs/study-spm-256. Resumable: run it again after an interruption and every
# finished seed of the tuning and of the comparisons (their seed-*.json) is taken, not retrained.
# About 7 hours on this project's 2-core machine (docs/study.md: what each part costs). Extra
# arguments go to both commands (for example --seeds 10 to extend the comparisons with 5 more
# seeds; the tuning is kept).
#   bash scripts/study.sh              # the whole study (byte and spm)
#   bash scripts/study.sh byte|spm     # one part
#   bash scripts/study.sh confirm      # the confirmation at T 4 096 (docs/study.md): 20 seeds of
#                                      # SA and XSA at 2e-3 and 4e-3, about 4 hours; resumable, and
#                                      # --seeds N runs its first N seeds (the same seeds either way)
#   bash scripts/study.sh recipe       # docs/comparing.md's answer in the recipe: the pilots
#   bash scripts/study.sh recipe-confirm --seeds N   # then its confirmation
# The byte and spm parts ran on 2026-12-05/06 with the binary of that day, whose final losses read
# --eval-batches windows; today's compare scores every window (--score-tokens), so rerunning them
# gives other final figures than docs/study.md's (git checkout 0b84c5a for that binary).
set -euo pipefail
cd "$(dirname "$0")/.."
part=all
case "${1:-}" in byte | spm | confirm | recipe | recipe-confirm) part=$1; shift ;; esac
bash scripts/build.sh
bash scripts/get_data.sh
prepared() { [ -f "$1/meta.json" ] && [ -f "$1/long/meta.json" ]; }
prepared data/default-byte || ./build/xsa prepare --default --tokenizer byte --force
# A user's machine pins no BLAS kernels; a pinned environment would make the wall-clock views slow.
run() { env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE ./build/xsa "$@"; }
# What every arm shares: 4 layers × 128 (4 heads of 32), 480 steps of 4 096 tokens, AdamW with
# 24 warm-up steps (the default 5 %) and cosine decay; validation every 40 steps on 8 steps' worth
# of windows; the long documents read 16 steps' worth at the end; the learning rate tuned per
# variant over four rates on tuning seed 1001, then 5 fresh seeds (1-5) at the chosen rates.
common=(--layers 4 --heads 4 --embd 128 --steps 480 --val-every 40 --val-batches 8
        --tune-lr 1e-3,2e-3,4e-3,8e-3 --tune-seeds 1 --seeds 5
        --variants sa,xsa,gated-attn,value-residual,no-self,xsa+gated-attn)
if [ "$part" = confirm ]; then
  # The plan (docs/study.md, "The confirmation at T = 4 096"): the T 4 096 part's model and step,
  # SA and XSA each at 2e-3 and 4e-3 (SA's and XSA's tuned rates), 20 fresh seeds (101-120),
  # every window of the validation split and of the long documents scored at the end.
  # Each finished seed's record is kept in the tree (docs/study-data/confirm-4096, about 45 KB a
  # seed; runs/ is not) and put back before the comparison starts, which takes a seed whose
  # record carries the same identity instead of training it: the study continues on another
  # machine or a fresh clone. Commit the folder after each part.
  kept=docs/study-data/confirm-4096
  mkdir -p runs/confirm-4096 $kept
  for f in $kept/seed-*.json; do [ -e "$f" ] && cp -n "$f" runs/confirm-4096/; done
  keep() { cp runs/confirm-4096/seed-*.json $kept/ 2>/dev/null || true; }
  trap keep EXIT
  run compare --data data/default-byte --seq-len 4096 --batch 1 --layers 4 --heads 4 --embd 128 \
    --steps 480 --val-every 40 --val-batches 8 --lr 2e-3 \
    --variants sa@2e-3,sa@4e-3,xsa@4e-3,xsa@2e-3 --seed 101 --seeds 20 \
    --eval-data data/default-byte/long --score-tokens 0 --out runs/confirm-4096 "$@"
  exit 0
fi
if [ "$part" = recipe ]; then
  # docs/comparing.md, "The answer in the recipe": the pilots, each recipe's rates tuned on one
  # tuning seed and then 3 seeds from 201 (which size the confirmation).
  for preset in recipe demo; do
    run compare --data data/default-byte --preset $preset --variants sa,xsa,xsa-gated --seed 201 \
      --eval-data data/default-byte/long --out runs/$preset-pilot "$@"
  done
  exit 0
fi
if [ "$part" = recipe-confirm ]; then
  # Then each recipe's confirmation: every variant at the rate its pilot chose, over the seeds the
  # pilots' power asks for (--seeds N, required), from 301.
  for preset in recipe demo; do
    rates=$(python3 - runs/$preset-pilot/report.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t = r["lr_tuning"]
print(",".join(f"{v}@{lr:g}" for v, lr in zip(r["variants"], t["chosen"])))
PY
)
    run compare --data data/default-byte --preset $preset --variants "$rates" --seed 301 \
      --eval-data data/default-byte/long --out runs/$preset-confirm "$@"
  done
  exit 0
fi
if [ "$part" != spm ]; then
  run sweep --data data/default-byte --param seq-len=256,1024,4096 --tokens-per-step 4096 \
    --batch 16 --eval-data data/default-byte/long "${common[@]}" --out runs/study "$@"
fi
if [ "$part" != byte ]; then
  [ -f data/spm-4096/tokenizer.json ] ||
    ./build/xsa tokenizer train --default --vocab 4096 --model bpe --out data/spm-4096
  prepared data/default-spm-4096 ||
    ./build/xsa prepare --default --tokenizer spm:data/spm-4096 --force
  run compare --data data/default-spm-4096 --seq-len 256 --batch 16 \
    --eval-data data/default-spm-4096/long "${common[@]}" --out runs/study-spm-256 "$@"
fi

#!/usr/bin/env bash
# The study of docs/study.md: SA, XSA and XSA's rivals at context 256, 1024 and 4096 with the same
# tokens in every step, 5 seeds each, on the byte-level default corpus. Installs and builds what is
# missing (as the main job), then runs `xsa sweep` into runs/study and two longer SA/XSA
# comparisons into runs/study-long-1024 and runs/study-long-4096. Resumable: run it again after an
# interruption and every finished seed (its seed-*.json) is taken, not retrained.
# About 100 minutes on this project's 2-core machine; extra arguments go to `xsa sweep` alone (for
# example --seeds 10 to extend it, or --steps 480 --out runs/study-long for a longer one) and skip
# the follow-ups.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
bash scripts/get_data.sh
[ -f data/default-byte/meta.json ] || ./build/xsa prepare --default --tokenizer byte
# A user's machine pins no BLAS kernels; a pinned environment would make the wall-clock views slow.
run() { env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE ./build/xsa "$@"; }
run sweep \
  --data data/default-byte --param seq-len=256,1024,4096 --tokens-per-step 4096 --batch 16 \
  --layers 4 --heads 4 --embd 128 --steps 120 --lr 2e-3 --val-every 10 --val-batches 4 \
  --variants sa,xsa,gated-attn,value-residual,no-self,xsa+gated-attn --seeds 5 \
  --out runs/study "$@"
# The follow-ups: SA and XSA at T = 1024 and 4096 trained four times as long, to see whether SA's
# lead at the end of the 120-step runs at these lengths lasts (about 15 and 22 minutes).
[ $# -eq 0 ] || exit 0
for t in 1024 4096; do
  run compare \
    --data data/default-byte --seq-len $t --batch $((4096 / t)) \
    --layers 4 --heads 4 --embd 128 --steps 480 --lr 2e-3 --val-every 20 --val-batches 4 \
    --variants sa,xsa --seeds $([ $t = 1024 ] && echo 5 || echo 3) --out runs/study-long-$t
done

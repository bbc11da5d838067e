# Sourced by the evaluation benchmarks: a temporary folder $out (removed on exit) holding a `small`
# checkpoint ($out/small: docs/SPEC.md §4, GPT-2 tokens of data/default, random weights after one
# step; scoring speed does not depend on the weights).
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
./build/xsa train --data data/default --layers 6 --heads 6 --embd 384 --seq-len 256 --batch 1 \
  --steps 1 --out "$out/small" --quiet

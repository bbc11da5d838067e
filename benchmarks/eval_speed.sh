#!/usr/bin/env bash
# How fast `xsa eval` scores a HellaSwag-shaped task on the `small` configuration (docs/SPEC.md
# §4; GPT-2 tokens, random weights after one training step: speed does not depend on them), and
# what sharing each question's context across its four endings is worth: the same questions split
# into one question per ending (choices: that ending and a one-letter dummy), so that the context
# runs once per ending, as scoring each choice with its own forward pass does (plus one token of
# head work per ending for the dummy). Needs the default corpus (bash scripts/get_data.sh) and
# python3. Usage: bash benchmarks/eval_speed.sh [examples, default 200]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-200}
source benchmarks/small_checkpoint.sh  # $out/small
# Questions of 45 words of the corpus (≈ 60 tokens) and four endings of 12–25 words, as HellaSwag's.
python3 - "$out" "$n" <<'PY'
import json, random, sys
out, n = sys.argv[1], int(sys.argv[2])
random.seed(1)
words = open("data/nlp-corpus.txt", encoding="utf-8", errors="replace").read().split()
with open(f"{out}/hellaswag.jsonl", "w") as hs, open(f"{out}/per_ending.jsonl", "w") as per:
    for _ in range(n):
        a = random.randrange(len(words) - 100)
        ctx = " ".join(words[a:a + 45])
        ends = []
        for _ in range(4):
            b = random.randrange(len(words) - 30)
            ends.append(" ".join(words[b:b + random.randint(12, 25)]))
        hs.write(json.dumps({"ctx": ctx, "endings": ends, "label": random.randrange(4)}) + "\n")
        for e in ends:
            per.write(json.dumps({"context": ctx, "choices": [e, "x"], "label": 0}) + "\n")
PY
for task in "hellaswag $out/hellaswag.jsonl questions (context once, endings side by side)" \
  "mc $out/per_ending.jsonl questions (one per ending: the context once per ending)"; do
  set -- $task
  if ! ./build/xsa eval --ckpt "$out/small" --task "$1" --file "$2" --json "$out/$1.json" \
    >/dev/null 2>"$out/stderr"; then
    cat "$out/stderr" >&2
    exit 1
  fi
  python3 -c "import json,sys; r=json.load(open(sys.argv[1]))[0]; \
print(f\"{sys.argv[2]}: {r['n']} {sys.argv[3]} in {r['seconds']:.1f} s\")" \
    "$out/$1.json" "$1" "${*:3}"
done

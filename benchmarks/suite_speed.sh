#!/usr/bin/env bash
# How fast `xsa eval --suite paper` scores each of the paper's eight tasks on the `small`
# configuration (docs/SPEC.md §4; GPT-2 tokens, random weights after one training step: speed does
# not depend on them), on synthetic questions of each task's typical size drawn from the default
# corpus (ARC: a 22-word question and 4 answers of 4 words; BoolQ: a 108-word passage and a 9-word
# question; HellaSwag: 45 words and 4 endings of 12-25; LAMBADA: 75 words; OpenBookQA: 11 words and
# 4 answers of 3; PIQA: an 8-word goal and 2 solutions of 20; SocialIQA: 21 words and 3 answers of
# 4; WinoGrande: a 22-word sentence with a one-word blank). Needs the default corpus
# (bash scripts/get_data.sh; xsa prepare --default --tokenizer gpt2) and python3.
# Usage: bash benchmarks/suite_speed.sh [questions per task, default 200]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-200}
source benchmarks/small_checkpoint.sh  # $out/small
mkdir -p "$out/tasks"
python3 - "$out/tasks" "$n" <<'PY'
import json, random, sys
out, n = sys.argv[1], int(sys.argv[2])
random.seed(1)
words = open("data/nlp-corpus.txt", encoding="utf-8", errors="replace").read().split()
def text(k):
    a = random.randrange(len(words) - k)
    return " ".join(words[a:a + k])
def write(name, rows):
    with open(f"{out}/{name}", "w") as f:
        for r in rows: f.write(json.dumps(r) + "\n")
labels = ["A", "B", "C", "D"]
write("arc_easy_test.jsonl", [{"question": text(22), "choices": {"text": [text(4) for _ in labels], "label": labels}, "answerKey": random.choice(labels)} for _ in range(n)])
write("boolq_validation.jsonl", [{"passage": text(108), "question": text(9), "label": random.randrange(2)} for _ in range(n)])
write("hellaswag_validation.jsonl", [{"ctx": text(45), "endings": [text(random.randint(12, 25)) for _ in range(4)], "label": random.randrange(4)} for _ in range(n)])
write("lambada_test.jsonl", [{"text": text(75)} for _ in range(n)])
write("openbookqa_test.jsonl", [{"question_stem": text(11), "choices": {"text": [text(3) for _ in labels], "label": labels}, "answerKey": random.choice(labels)} for _ in range(n)])
write("piqa_validation.jsonl", [{"goal": text(8), "sol1": text(20), "sol2": text(20), "label": random.randrange(2)} for _ in range(n)])
write("siqa_validation.jsonl", [{"context": text(15), "question": text(6), "answerA": text(4), "answerB": text(4), "answerC": text(4), "label": str(random.randint(1, 3))} for _ in range(n)])
def wino():
    s = text(22).split(); s[random.randrange(3, 18)] = "_"
    return {"sentence": " ".join(s), "option1": text(1), "option2": text(1), "answer": random.choice("12")}
write("winogrande_validation.jsonl", [wino() for _ in range(n)])
PY
./build/xsa eval --ckpt "$out/small" --suite paper --dir "$out/tasks" --json "$out/r.json" \
  >/dev/null 2>"$out/stderr" || { cat "$out/stderr" >&2; exit 1; }
python3 - "$out/r.json" <<'PY'
import json, sys
print("| task | questions | seconds | questions/s |\n|---|---|---|---|")
for r in json.load(open(sys.argv[1])):
    if "seconds" in r and r["task"] != "val":
        print(f"| {r['task']} | {r['n']} | {r['seconds']:.1f} | {r['n'] / r['seconds']:.1f} |")
PY

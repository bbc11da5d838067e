#!/usr/bin/env python3
"""Runs the command blocks of README.md and docs/*.md as a reader would, and checks what they show.

Each page runs in a scratch folder of its own, its ```sh and ```bash blocks in order, every command
as written (continuation lines joined), with XSA_SMOKE_TEST=1 so that each command runs whole at
the smallest size (docs/testing.md). The folder holds what the pages take as given, made small:
`./build` (this build), GPT-2's vocabulary in data/gpt2, token shards in data/default and
data/default-byte (each with a long-document set in long/), a text file FILE.txt, corpus/ and more.jsonl, prompt.txt, the paper's task files
in tasks/ and copies of three of them where the pages name them.

A comment right before a block tells the test more (`<!-- doc-test: ... -->`):
  setup: CMD              run CMD first (state another page's commands would have made)
  skip: REASON            the block is not run (a GPU, another machine, the network, hours)
  skip N,M: REASON        its commands N and M (1-based) are not run
  comments are output     each command's trailing `# text` is exactly what it prints
  output                  this plain block is exactly what the last command printed
  output header N of: CMD the first N lines of this plain block appear, in order, in what CMD
                          prints (the rest is an example whose numbers differ run to run)
  not output: REASON      this plain block shows no command's output (a file tree, a diagram)
  output measured: REASON a dated measurement (its numbers are the record of a run)
A plain block without one of the last four fails the test: shown output is checked or says why not.

Usage: docs_test.py SOURCE_DIR BUILD_DIR   (DOCS_TEST_PAGE=training.md: that page alone; ctest runs
each page as a test of its own, Docs.CommandsRunAsShown.<page>)
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

DIRECTIVE = re.compile(r"<!--\s*doc-test:\s*(.*?)\s*-->", re.S)
FENCE = re.compile(r"^```(\w*)\s*$")
TIMEOUT_S = 600

TASKS = {
    "ARC-Easy-test.jsonl": '{"id": "q1", "question": "What do plants need to grow?", "choices": '
    '{"text": ["sunlight", "sand", "plastic"], "label": ["A", "B", "C"]}, "answerKey": "A"}\n',
    "boolq_validation.jsonl": '{"question": "is water wet", "passage": "Water makes things wet.", '
    '"label": 1}\n',
    "hellaswag_val.jsonl": '{"ind": 1, "activity_label": "Baking", "ctx_a": "A woman mixes flour.",'
    ' "ctx_b": "she", "endings": ["bakes a cake.", "swims.", "sleeps on it.", "sings."], '
    '"label": "0"}\n',
    "lambada_test.jsonl": '{"text": "the history of the city is the history of its people"}\n',
    "openbookqa_test.jsonl": '{"id": "1", "question_stem": "Ice is", "choices": {"text": '
    '["cold", "hot", "loud", "round"], "label": ["A", "B", "C", "D"]}, "answerKey": "A"}\n',
    "piqa_validation.jsonl": '{"goal": "To cut bread", "sol1": "use a knife", "sol2": '
    '"use a spoon", "label": 0}\n',
    "siqa_dev.jsonl": '{"context": "Kim helped a friend.", "question": "How did the friend feel?",'
    ' "answerA": "grateful", "answerB": "angry", "answerC": "bored", "label": "1"}\n',
    "winogrande_dev.jsonl": '{"sentence": "The cup fell off the table because the _ was tilted.",'
    ' "option1": "cup", "option2": "table", "answer": "2"}\n',
}


def run(cmd, cwd, env):
    return subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, capture_output=True, text=True,
                          errors="replace",
                          timeout=TIMEOUT_S)


def make_fixtures(root, source, build, env):
    os.symlink(build, os.path.join(root, "build"))
    os.makedirs(os.path.join(root, "data"))
    vocab = os.path.join(source, "data", "gpt2")
    if os.path.isdir(vocab):
        os.symlink(vocab, os.path.join(root, "data", "gpt2"))
    pages = sorted(glob.glob(os.path.join(source, "docs", "*.md"))) + [
        os.path.join(source, "README.md")]
    text = "".join(open(p, encoding="utf-8").read() for p in pages)
    os.makedirs(os.path.join(root, "corpus", "part"))
    with open(os.path.join(root, "FILE.txt"), "w", encoding="utf-8") as f:
        f.write(text)
    # Each paragraph a document of its own: enough of them to hold some out.
    sections = [s for s in text.split("\n\n") if s.strip()]
    for i, s in enumerate(sections):
        with open(os.path.join(root, "corpus", "part" if i % 2 else "", f"doc{i}.txt"), "w",
                  encoding="utf-8") as f:
            f.write(s)
    with open(os.path.join(root, "more.jsonl"), "w", encoding="utf-8") as f:
        f.write('{"text": "One more document, as JSON lines."}\n')
    with open(os.path.join(root, "prompt.txt"), "w", encoding="utf-8") as f:
        f.write("The history of")
    os.makedirs(os.path.join(root, "tasks"))
    for name, lines in TASKS.items():
        with open(os.path.join(root, "tasks", name), "w", encoding="utf-8") as f:
            f.write(lines)
    for name in ("ARC-Easy-test.jsonl", "hellaswag_val.jsonl", "lambada_test.jsonl"):
        shutil.copy(os.path.join(root, "tasks", name), os.path.join(root, name))
    # With a long-document set (long/) of the longer paragraphs, as prepare --default writes one.
    for out, tokenizer, long_tokens in (("default-byte", "byte", 300), ("default", "gpt2", 80),
                                        ("other-domain", "byte", 0)):
        r = run(f"./build/xsa prepare --input corpus --tokenizer {tokenizer} --val-fraction 0.3 "
                f"--long-min-tokens {long_tokens} --long-fraction 0.3 --out data/{out} --quiet",
                root, env)
        if r.returncode:
            raise SystemExit(f"docs_test: fixture data/{out}: {r.stderr.strip()}")


def blocks_of(path):
    """(language, lines, directives, line number) of each fenced block, in order."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out, pending, i = [], [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            pending += DIRECTIVE.findall(lines[i])
            if lines[i].strip() and not DIRECTIVE.search(lines[i]):
                pending = [d for d in pending if d.startswith("setup:")]
            i += 1
            continue
        start, body = i + 1, []
        i += 1
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        out.append((m.group(1), body, pending, start))
        pending, i = [], i + 1
    return out


def commands_of(body):
    """Each command of a shell block: continuation lines joined; comment-only lines dropped."""
    cmds, current = [], ""
    for line in body:
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        current += line[:-1] + " " if line.endswith("\\") else line
        if not line.endswith("\\"):
            cmds.append(current)
            current = ""
    return cmds


def trailing_comment(cmd):
    """The text after an unquoted ` # ` (None when there is none)."""
    quote = None
    for k, c in enumerate(cmd):
        if quote:
            quote = None if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == "#" and k > 0 and cmd[k - 1] == " ":
            return cmd[k + 1:].strip()
    return None


def check_page(page, source, build, env, report):
    failures = []
    root = tempfile.mkdtemp(prefix="xsa-docs-")
    made = []

    def in_root(cmd):  # the fixtures are made before the page's first command (most pages run none)
        if not made:
            make_fixtures(root, source, build, env)
            made.append(True)
        return run(cmd, root, env)

    try:
        last_out = ""
        name = os.path.relpath(page, source)
        for lang, body, directives, line in blocks_of(page):
            where = f"{name}:{line}"
            for d in directives:
                if d.startswith("setup:"):
                    r = in_root(d[6:].strip())
                    if r.returncode:
                        failures.append(f"{where}: setup `{d[6:].strip()}` failed: "
                                        f"{r.stderr.strip()[-400:]}")
            kinds = [d for d in directives if not d.startswith("setup:")]
            if lang in ("sh", "bash"):
                skip_all = [d for d in kinds if re.match(r"skip:", d)]
                if skip_all:
                    report.append(f"skipped {where}: {skip_all[0][5:].strip()}")
                    continue
                skipped = set()
                for d in kinds:
                    m = re.match(r"skip ([\d,]+):\s*(.*)", d, re.S)
                    if m:
                        skipped |= {int(n) for n in m.group(1).split(",")}
                        report.append(f"skipped {where} command(s) {m.group(1)}: {m.group(2)}")
                comments_out = "comments are output" in kinds
                for n, cmd in enumerate(commands_of(body), 1):
                    if n in skipped:
                        continue
                    t0 = time.monotonic()
                    r = in_root(cmd)
                    report.append(f"ran {where} ({time.monotonic() - t0:.1f} s): {cmd[:100]}")
                    if r.returncode:
                        failures.append(f"{where}: `{cmd}` exited {r.returncode}: "
                                        f"{(r.stderr or r.stdout).strip()[-600:]}")
                        continue
                    last_out = r.stdout
                    shown = trailing_comment(cmd) if comments_out else None
                    if shown is not None and r.stdout.strip() != shown:
                        failures.append(f"{where}: `{cmd}` printed {r.stdout.strip()!r}, the page "
                                        f"shows {shown!r}")
            elif lang == "":
                shown = [x.rstrip() for x in body]
                if "output" in kinds:
                    printed = [x.rstrip() for x in last_out.rstrip("\n").split("\n")]
                    if printed != shown:
                        failures.append(f"{where}: the block is not what the command printed:\n"
                                        + "\n".join(printed))
                    continue
                header = [d for d in kinds if d.startswith("output header")]
                if header:
                    m = re.match(r"output header (\d+) of:\s*(.*)", header[0], re.S)
                    r = in_root(m.group(2))
                    want = shown[:int(m.group(1))]
                    printed = [x.rstrip() for x in r.stdout.split("\n")]
                    found = any(printed[k:k + len(want)] == want for k in range(len(printed)))
                    if r.returncode or not found:
                        failures.append(f"{where}: `{m.group(2)}` (exit {r.returncode}) does not "
                                        f"print {want}:\n{r.stdout}{r.stderr[-400:]}")
                    else:
                        report.append(f"compared {where}: {len(want)} line(s) of its output")
                    continue
                if not any(d.startswith(("not output:", "output measured:")) for d in kinds):
                    failures.append(f"{where}: a plain block without `<!-- doc-test: output -->`, "
                                    "`output header N of: CMD`, `not output: WHY` or "
                                    "`output measured: WHY` before it")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return failures


def main():
    source, build = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    env = dict(os.environ, XSA_SMOKE_TEST="1", OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1")
    env.pop("XSA_CPU", None)
    pages = [os.path.join(source, "README.md")] + sorted(
        p for p in glob.glob(os.path.join(source, "docs", "*.md"))
        if os.path.basename(p) not in ("perf-log.md",))
    only = os.environ.get("DOCS_TEST_PAGE")
    if only:
        pages = [p for p in pages if os.path.basename(p) == only]
        if not pages:
            print(f"docs_test: DOCS_TEST_PAGE={only}: no such page in README.md or docs/")
            return 1
    failures, report = [], []
    for page in pages:
        failures += check_page(page, source, build, env, report)
    print("\n".join(report))
    ran = sum(1 for x in report if x.startswith("ran "))
    skipped = sum(1 for x in report if x.startswith("skipped "))
    print(f"docs_test: {ran} commands ran, {skipped} blocks or commands skipped with their reason, "
          f"{len(failures)} failure(s)")
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

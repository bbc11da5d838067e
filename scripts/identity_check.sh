#!/usr/bin/env bash
# Bit identity across a refactor: two short comparisons whose report.json must not change (all but
# timings, memory, folders and the machine's description). Run `save` on the commit before the
# change and `check` after each step of it.
#   bash scripts/identity_check.sh save  /tmp/identity-before
#   bash scripts/identity_check.sh check /tmp/identity-before
# The second comparison holds bf16 arms: it needs a CPU with AVX512_BF16 or AMX (else it is left
# out, and the script says so).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:?save or check}
dir=${2:?a folder}
data=data/default-byte
[ -f $data/long/meta.json ] || { echo "identity_check: prepare $data first (bash scripts/run.sh)"; exit 1; }
run_into() {
  local out=$1
  rm -rf "$out"
  mkdir -p "$out"
  ./build/xsa compare --data $data --preset demo --steps 30 --val-every 10 --eval-data $data/long \
    --out "$out/demo" > "$out/demo.log"
  local variants=sa,xsa,xsa-gated+sink,gated-attn,value-residual,no-self
  if grep -q avx512_bf16 /proc/cpuinfo; then
    variants+=,sa@bf16,xsa@bf16
  else
    echo "identity_check: no AVX512_BF16 here, the bf16 arms left out"
  fi
  ./build/xsa compare --data $data --variants $variants --kv-heads 2 --layers 2 --heads 4 --embd 64 \
    --seq-len 64 --batch 4 --steps 12 --val-every 6 --out "$out/variants" > "$out/variants.log"
}
# report.json without what a run's machine and moment change.
stable() {
  python3 - "$1" <<'PY'
import json, sys
drop = {"seconds", "wall_seconds", "time", "timing", "timings", "memory", "peak_rss", "folder",
        "out", "path", "machine", "describe", "device", "ms_per_step", "tokens_per_second", "date",
        "started", "finished", "elapsed", "report_folder", "host"}
def clean(x):
    if isinstance(x, dict):
        return {k: clean(v) for k, v in sorted(x.items())
                if k not in drop and "second" not in k and "time" not in k and "memory" not in k
                and "mib" not in k.lower() and "folder" not in k and "path" not in k
                and "per_s" not in k and not k.endswith("_mb") and "overhead" not in k
                and "wall" not in k}
    if isinstance(x, list):
        return [clean(v) for v in x]
    return x
print(json.dumps(clean(json.load(open(sys.argv[1]))), indent=1, sort_keys=True))
PY
}
case $mode in
  save) run_into "$dir"
        for c in demo variants; do stable "$dir/$c/report.json" > "$dir/$c.stable.json"; done
        echo "identity_check: saved into $dir" ;;
  check) run_into "$dir.now"
         status=0
         for c in demo variants; do
           stable "$dir/$c/report.json" > "$dir/$c.stable.json"
           stable "$dir.now/$c/report.json" > "$dir.now/$c.stable.json"
           if diff -q "$dir/$c.stable.json" "$dir.now/$c.stable.json" > /dev/null; then
             echo "identity_check: $c identical"
           else
             echo "identity_check: $c DIFFERS"; diff "$dir/$c.stable.json" "$dir.now/$c.stable.json" | head -20
             status=1
           fi
         done
         exit $status ;;
  *) echo "identity_check: save or check, not '$mode'"; exit 1 ;;
esac

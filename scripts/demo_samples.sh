#!/usr/bin/env bash
# What the SA and XSA arms of seed 1 of a demo comparison write after the same prompt, with the
# same sampling seed (xsa sample), printed and kept in DEMO/samples.txt (xsa board shows it with
# the comparison). A missing arm or a failing sample says which and why in one line on stderr and
# exits 1, leaving samples.txt as it was.
# Usage: scripts/demo_samples.sh DEMO_FOLDER [XSA_BINARY]   (run.sh calls it after the demo)
set -euo pipefail
demo=${1:?usage: scripts/demo_samples.sh DEMO_FOLDER [XSA_BINARY]}
xsa=${2:-./build/xsa}
prompt="The history of"
tmp=$demo/samples.txt.tmp
errors=$demo/samples.err
: >"$tmp"
failed=0
for arm in sa xsa; do
  ckpt=$demo/arms/$arm-seed1
  if [ ! -d "$ckpt" ]; then
    echo "run.sh: $ckpt: no such folder, so no sample from the $arm arm (the demo keeps each" \
      "arm's final weights there; remove $demo and run again)" >&2
    failed=1
    continue
  fi
  printf '\n%s (seed 1), xsa sample --prompt "%s" --seed 1:\n' "$arm" "$prompt" >>"$tmp"
  if "$xsa" sample --ckpt "$ckpt" --prompt "$prompt" --max-new-tokens 160 --seed 1 \
    >>"$tmp" 2>"$errors"; then
    echo >>"$tmp"
  else
    status=$?
    why=$(grep -v '^$' "$errors" | tail -1)
    echo "run.sh: xsa sample --ckpt $ckpt failed (exit $status): ${why:-no message}" >&2
    failed=1
  fi
done
rm -f "$errors"
if [ $failed != 0 ]; then
  rm -f "$tmp"
  exit 1
fi
mv "$tmp" "$demo/samples.txt"
cat "$demo/samples.txt"

#!/usr/bin/env bash
# xsa vs PyTorch on the same training step (docs/SPEC.md §4 configurations), back to back on
# this machine: `xsa bench` (SA and XSA interleaved) and benchmarks/torch_step.py for each arm, at
# PyTorch's fastest settings. Needs Debian's python3-torch. Usage: bash benchmarks/compare_torch.sh [small gpt2]
set -euo pipefail
cd "$(dirname "$0")/.."
configs=("${@:-small gpt2}")
out=$(mktemp -d)
for cfg in ${configs[@]}; do
  ./build/xsa bench --model "$cfg" --no-attention --json "$out/xsa_$cfg.json" >/dev/null
  for attn in sa xsa; do
    OMP_WAIT_POLICY=passive ATEN_CPU_CAPABILITY=avx512 /usr/bin/python3 benchmarks/torch_step.py \
      --config "$cfg" --attn "$attn" > "$out/torch_${cfg}_$attn.json"
  done
done
/usr/bin/python3 - "$out" ${configs[@]} <<'PY'
import json, sys
out, configs = sys.argv[1], sys.argv[2:]
print("| config | attn | xsa ms | PyTorch ms | xsa tokens/s | PyTorch tokens/s | speed-up | xsa peak MB | PyTorch peak MB |")
print("|---|---|---|---|---|---|---|---|---|")
for cfg in configs:
    ours = {r["attn"]: r for r in json.load(open(f"{out}/xsa_{cfg}.json")) if r["kind"] == "step"}
    for attn in ("sa", "xsa"):
        t = json.loads(open(f"{out}/torch_{cfg}_{attn}.json").read())
        o = ours[attn]
        print(f"| {cfg} | {attn} | {o['ms_median']:.0f} | {t['ms_median']:.0f} | {o['tokens_per_s']:.0f} | "
              f"{t['tokens_per_s']:.0f} | {o['tokens_per_s'] / t['tokens_per_s']:.2f}x | {o['peak_mb']:.0f} | {t['peak_mb']:.0f} |")
PY

#!/usr/bin/env python3
"""Lists the functions of a binary that contain AVX-512 instructions (EVEX-encoded: first opcode
byte 0x62 after any legacy prefixes, which in 64-bit mode is always EVEX), and fails when any of
them lies outside the namespaces allowed to hold them (by default xsa::ops::avx512, the kernels
dispatched by CPU level), or when a function of that level calls one of xsa::ops's helpers compiled
for the baseline (an inline function the compiler left out of line: it runs AVX2 code inside an
AVX-512 kernel). Usage: avx512_functions.py BINARY... [--allow REGEX ...]"""
import argparse
import re
import subprocess
import sys

PREFIXES = {"66", "67", "f2", "f3", "2e", "3e", "26", "36", "64", "65", "f0"}


LEVEL = re.compile(r"^([^(]* )?xsa::ops::avx512::")
HELPER = re.compile(r"^([^(]* )?xsa::ops::")
# Functions of xsa::ops outside the kernel files, which the kernels call on purpose: oneDNN's
# products and the choice of library (ops/matmul_bf16.h).
NOT_KERNELS = re.compile(r"xsa::ops::(fp32_product_library|bf16_available|matmul_\w+_(bf16|onednn))\(")


def evex_functions(binary):
    """(AVX-512 instruction count per function, baseline xsa::ops helpers called from the level)"""
    out = subprocess.run(["objdump", "-d", "-C", "--insn-width=15", binary], check=True,
                         capture_output=True, text=True).stdout
    counts, baseline_calls, function = {}, set(), None
    for line in out.splitlines():
        m = re.match(r"^[0-9a-f]+ <(.*)>:$", line)
        if m:
            function = m.group(1)
            continue
        parts = line.split("\t")
        if function is None or len(parts) < 3:
            continue
        call = re.search(r"\bcall\s+[0-9a-f]+ <(.*)>$", parts[2])
        if call and LEVEL.search(function) and HELPER.search(call.group(1)) \
                and not LEVEL.search(call.group(1)) and not NOT_KERNELS.search(call.group(1)):
            baseline_calls.add(call.group(1))
        opcode_bytes = [b for b in parts[1].split() if re.fullmatch(r"[0-9a-f]{2}", b)]
        while opcode_bytes and opcode_bytes[0] in PREFIXES:
            opcode_bytes.pop(0)
        if opcode_bytes and opcode_bytes[0] == "62":
            counts[function] = counts.get(function, 0) + 1
    return counts, baseline_calls


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binaries", nargs="+")
    parser.add_argument("--allow", action="append", default=[LEVEL.pattern])
    args = parser.parse_args()
    allowed = [re.compile(a) for a in args.allow]
    failed = False
    for binary in args.binaries:
        counts, baseline_calls = evex_functions(binary)
        outside = {f: n for f, n in counts.items() if not any(a.search(f) for a in allowed)}
        print(f"{binary}: {len(counts)} functions with AVX-512 instructions, "
              f"{sum(counts.values())} instructions; {len(outside)} outside {args.allow}")
        for f, n in sorted(outside.items(), key=lambda kv: -kv[1])[:40]:
            print(f"  {n:6d}  {f}")
        print(f"  {len(baseline_calls)} baseline helpers of xsa::ops called from the avx512 level")
        for f in sorted(baseline_calls)[:40]:
            print(f"    {f}")
        if not counts:
            print("  no AVX-512 kernels at all: the avx512 level is missing from this binary")
        failed = failed or bool(outside or baseline_calls or not counts)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Attention alone in PyTorch: xsa's fused kernel (xsa_torch.attention, O(T) memory) against the
same math written in PyTorch 1.13 (xsa_torch.reference_attention: softmax(q kᵀ/√D + mask) v, then
the XSA projection; it materialises the [B, H, T, T] scores), SA and XSA, causal, float32.

Each case runs in its own subprocess, so its peak resident memory (getrusage ru_maxrss) is its own;
the table shows that peak and the growth over the process's resident memory just before the first
attention call (inputs, gradients and torch itself already in place). Times are the median of
--reps runs after one warm-up: forward alone (no autograd graph) and forward + backward.
On a VM where first-touch page faults are slow, the fresh T×T buffers that PyTorch allocates (and
frees) on every call cost a large share of its time: that is part of materialising them.

Needs the extension built: bash python/build.sh (after bash scripts/build.sh).
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS=2 \
      /usr/bin/python3 benchmarks/torch_attention.py
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def resident_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def run_case(impl, attn, T, D, heads, reps):
    sys.path.append(os.path.join(HERE, "..", "python"))  # after PYTHONPATH
    import torch
    import xsa_torch

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", os.cpu_count())))
    fn = xsa_torch.attention if impl == "xsa" else xsa_torch.reference_attention
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, heads, T, D, generator=g).requires_grad_() for _ in range(3))
    grad = torch.randn(1, heads, T, D, generator=g)
    for t in (q, k, v):  # gradient buffers in place before the baseline
        t.grad = torch.zeros_like(t)
    exclusive = attn == "xsa"
    baseline = resident_mb()

    def forward():
        with torch.no_grad():
            fn(q, k, v, exclusive=exclusive)

    def forward_backward():
        fn(q, k, v, exclusive=exclusive).backward(grad)

    times = {}
    for name, step in (("fwd", forward), ("fwd_bwd", forward_backward)):
        samples = []
        for i in range(reps + 1):
            t0 = time.perf_counter()
            step()
            if i:  # the first is a warm-up
                samples.append((time.perf_counter() - t0) * 1000)
        times[name] = statistics.median(samples)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"impl": impl, "attn": attn, "T": T, "D": D, "H": heads,
            "threads": torch.get_num_threads(),
            "fwd_ms": times["fwd"], "fwd_bwd_ms": times["fwd_bwd"], "peak_mb": peak,
            "growth_mb": peak - baseline}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--T", type=int, nargs="+", default=[1024, 4096])
    ap.add_argument("--D", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--reps", type=int, default=0,
                    help="timed runs per case (default: kernel 15 / 9, PyTorch 5 / 3 at T <= 1024 "
                         "/ above)")
    ap.add_argument("--case", help="internal: impl,attn,T,D of one subprocess")
    a = ap.parse_args()
    if a.case:
        impl, attn, T, D = a.case.split(",")
        print(json.dumps(run_case(impl, attn, int(T), int(D), a.heads, a.reps)))
        return

    rows = []
    for D in a.D:
        for T in a.T:
            for attn in ("sa", "xsa"):
                pair = {}
                for impl in ("xsa", "torch"):
                    # The kernel is fast: more repetitions for a steadier median.
                    reps = a.reps or (5 if T <= 1024 else 3) * (3 if impl == "xsa" else 1)
                    case = f"{impl},{attn},{T},{D}"
                    out = subprocess.run([sys.executable, __file__, "--case", case,
                                          "--heads", str(a.heads), "--reps", str(reps)],
                                         check=True, capture_output=True, text=True).stdout
                    pair[impl] = json.loads(out.strip().splitlines()[-1])
                    print(json.dumps(pair[impl]), file=sys.stderr)
                rows.append(pair)
    threads = rows[0]["xsa"]["threads"]
    print(f"B 1, H {a.heads}, causal, float32, {threads} threads; median ms; memory: peak RSS of "
          "the case's process (growth over its RSS before the first call)\n")
    print("| T | D | attn | kernel fwd | torch fwd | kernel fwd+bwd | torch fwd+bwd | speed-up |"
          " kernel peak MB (growth) | torch peak MB (growth) |")
    print("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        x, t = r["xsa"], r["torch"]
        speedup = t["fwd_bwd_ms"] / x["fwd_bwd_ms"]
        print(f"| {x['T']} | {x['D']} | {x['attn'].upper()} | {x['fwd_ms']:.1f} | "
              f"{t['fwd_ms']:.1f} | {x['fwd_bwd_ms']:.1f} | {t['fwd_bwd_ms']:.1f} | "
              f"{speedup:.2f}x | "
              f"{x['peak_mb']:.0f} (+{x['growth_mb']:.0f}) | "
              f"{t['peak_mb']:.0f} (+{t['growth_mb']:.0f}) |")


if __name__ == "__main__":
    main()

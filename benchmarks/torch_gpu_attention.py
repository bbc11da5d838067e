#!/usr/bin/env python3
"""Attention alone on a GPU in PyTorch, the reference for `xsa bench --device cuda`'s attention
table: the same shapes (C = 2048 as 32 heads of 64 or 16 of 128, B·T = 16384 tokens per call,
causal, bf16) through torch's scaled_dot_product_attention with each fused backend it has here
(flash-attention 2 and cuDNN), SA, and XSA written the plain way (the fused SA, then
z = y − (y·v̂) v̂ in PyTorch ops, autograd through both). Median of --reps timed calls after 3
warm-ups, forward and forward + backward; FLOPs as xsa bench and flash-attention count them
(forward 4·B·H·D·T²/2 causal, backward 2.5× the forward).

  python3 benchmarks/torch_gpu_attention.py --json OUT.json   (scripts/gpu_check.sh runs it)
"""
import argparse
import json
import statistics
import sys


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--T", default="1024,2048,4096,8192,16384")
    parser.add_argument("--D", default="64,128")
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--json", default="")
    args = parser.parse_args()

    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as e:
        sys.exit(f"torch_gpu_attention: PyTorch with CUDA is needed ({e})")
    if not torch.cuda.is_available():
        sys.exit("torch_gpu_attention: torch sees no GPU")

    backends = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}

    def xsa(y, v):
        u = v / v.norm(dim=-1, keepdim=True).clamp_min(1e-6)
        return y - (y * u).sum(-1, keepdim=True) * u

    def time_ms(fn):
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        samples = []
        for _ in range(args.reps):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            samples.append(start.elapsed_time(end))
        return statistics.median(samples)

    print(f"# PyTorch {torch.__version__} attention on {torch.cuda.get_device_name()}\n")
    print("| backend | attn | D | T | pass | ms | TFLOP/s |\n|---|---|---|---|---|---|---|")
    records = []
    for D in [int(d) for d in args.D.split(",")]:
        for T in [int(t) for t in args.T.split(",")]:
            H, B = 2048 // D, max(1, 16384 // T)
            g = torch.Generator(device="cuda").manual_seed(0)
            q, k, v = (torch.randn(B, H, T, D, device="cuda", dtype=torch.bfloat16, generator=g)
                       .requires_grad_() for _ in range(3))
            grad = torch.randn(B, H, T, D, device="cuda", dtype=torch.bfloat16, generator=g)
            fwd_flops = 4.0 * B * H * D * T * (T + 1) / 2
            for name, backend in backends.items():
                for attn in ("sa", "xsa"):
                    def forward():
                        with sdpa_kernel(backend):
                            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                        return xsa(y, v) if attn == "xsa" else y

                    def forward_only():
                        with torch.no_grad():
                            forward()

                    def forward_backward():
                        forward().backward(grad)

                    for pass_name, fn, flops in (("fwd", forward_only, fwd_flops),
                                                 ("fwdbwd", forward_backward, 3.5 * fwd_flops)):
                        try:
                            ms = time_ms(fn)
                        except RuntimeError as e:  # a backend that does not take this shape
                            print(f"| {name} | {attn} | {D} | {T} | {pass_name} | – | – | "
                                  f"({str(e).splitlines()[0][:60]})")
                            continue
                        tflops = flops / ms / 1e9
                        print(f"| {name} | {attn} | {D} | {T} | {pass_name} | {ms:.3f} | "
                              f"{tflops:.1f} |")
                        records.append({"kind": "torch_gpu_attention", "backend": name,
                                        "attn": attn, "D": D, "T": T, "pass": pass_name,
                                        "ms_median": ms, "tflops": tflops,
                                        "torch": torch.__version__})
            del q, k, v, grad
            torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(records, f, indent=2)


if __name__ == "__main__":
    main()

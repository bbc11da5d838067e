#!/usr/bin/env python3
"""A PyTorch reference for `xsa bench`: the same xsa-gpt model (nanoGPT with RoPE, tied head,
SA or XSA, docs/SPEC.md §1-2) and the same training step (forward, backward, clipping, AdamW)
on the docs/SPEC.md §4 configurations. Prints one JSON line per arm: ms per step (median and
range of --steps after 2 warm-up steps), tokens/s and peak resident memory of the process.

Needs Debian's python3-torch (apt-get install python3-torch); not part of the test suite.
  /usr/bin/python3 benchmarks/torch_step.py --config small --attn sa
Fastest settings seen on a 2-core AVX-512 machine:
  OMP_WAIT_POLICY=passive ATEN_CPU_CAPABILITY=avx512 /usr/bin/python3 benchmarks/torch_step.py ...
"""
import argparse
import json
import math
import os
import resource
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIGS = {  # V (padded), L, C, H, T, B
    "tiny": (256, 2, 64, 4, 64, 4),
    "small": (50304, 6, 384, 6, 256, 8),
    "gpt2": (50304, 12, 768, 12, 256, 4),
}


def rope(x, cos, sin):  # rotate-half pairing over the whole head dim
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


class Block(nn.Module):
    def __init__(self, C, H, exclusive):
        super().__init__()
        self.H, self.exclusive = H, exclusive
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.c_attn = nn.Linear(C, 3 * C, bias=False)
        self.c_proj = nn.Linear(C, C, bias=False)
        self.c_fc = nn.Linear(C, 4 * C, bias=False)
        self.mlp_proj = nn.Linear(4 * C, C, bias=False)

    def forward(self, x, cos, sin):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.H, C // self.H).transpose(1, 2) for t in (q, k, v))
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True) if hasattr(F, "scaled_dot_product_attention") \
            else self.attention(q, k, v)
        if self.exclusive:  # z = y - (y.u) u, u = v / max(|v|, 1e-6)
            u = v / v.norm(dim=-1, keepdim=True).clamp_min(1e-6)
            y = y - (y * u).sum(-1, keepdim=True) * u
        x = x + self.c_proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    @staticmethod
    def attention(q, k, v):  # PyTorch 1.13 has no fused attention: the T x T matrix is materialised
        T = q.shape[-2]
        att = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        att = att.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        return F.softmax(att, dim=-1) @ v


class Gpt(nn.Module):
    def __init__(self, V, L, C, H, T, exclusive):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.h = nn.ModuleList(Block(C, H, exclusive) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)
        D = C // H
        angle = torch.arange(T, dtype=torch.float64)[:, None] * (10000.0 ** (-2 * torch.arange(D // 2) / D))[None]
        angle = torch.cat((angle, angle), dim=-1)
        self.cos, self.sin = angle.cos().float(), angle.sin().float()
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * L) if name.endswith(("c_proj.weight", "mlp_proj.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx, targets):
        x = self.wte(idx)
        for block in self.h:
            x = block(x, self.cos, self.sin)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="small", choices=CONFIGS)
    ap.add_argument("--attn", default="sa", choices=["sa", "xsa"])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    torch.set_num_threads(a.threads or os.cpu_count())
    V, L, C, H, T, B = CONFIGS[a.config]
    torch.manual_seed(1)
    model = Gpt(V, L, C, H, T, a.attn == "xsa")
    decay = [p for p in model.parameters() if p.dim() == 2]
    other = [p for p in model.parameters() if p.dim() != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                            lr=1e-4, betas=(0.9, 0.95), eps=1e-8)
    idx = torch.randint(0, min(V, 50257), (B, T))
    targets = torch.randint(0, min(V, 50257), (B, T))
    times = []
    for i in range(2 + a.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model(idx, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if i >= 2:
            times.append((time.perf_counter() - t0) * 1000)
    med = statistics.median(times)
    print(json.dumps({"impl": "pytorch " + torch.__version__, "config": a.config, "attn": a.attn,
                      "threads": torch.get_num_threads(), "ms_median": med, "ms_min": min(times),
                      "ms_max": max(times), "tokens_per_s": B * T / (med / 1000),
                      "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


if __name__ == "__main__":
    main()

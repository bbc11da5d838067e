#!/usr/bin/env python3
"""Data-parallel scaling on paper: the fraction of each machine's time spent computing when N
machines train one model over a network of a given bandwidth, for the `small` and `gpt2` shapes.

    python3 benchmarks/scaling_model.py [--tokens-per-s-small X] [--tokens-per-s-gpt2 Y] [--speedup K]

Assumptions (say so when quoting the figures):
- Every machine computes at the speed measured here for one process (tokens/s of `xsa train`),
  times --speedup for faster machines (a 64-core server, a GPU).
- One gradient sum per optimizer step, after all micro-batches (gradient accumulation divides its
  cost by the accumulation steps; the table shows 1, the worst case).
- The sum moves 2(N-1)/N of the float32 gradients per machine (a ring, or xsa's reduce-scatter +
  all-gather, which moves the same bytes), at the link's full bandwidth, plus 2(N-1) messages of
  50 us latency each. No compression, no hierarchy, links not shared.
- Without overlap the sum follows the backward pass. With overlap (bucketed by layer, as llm.c and
  PyTorch DDP do) it runs during the backward, which is 2/3 of the compute; what is left exposed
  is the part that outlasts the backward, and at least the last bucket (1 of L+1).
"""
import argparse

SHAPES = {  # name: (parameters incl. padding, layers, tokens per machine per step)
    "small": (29_949_952, 6, 8 * 256),
    "gpt2": (123_600_384, 12, 4 * 256),
}


def efficiency(params, layers, tokens, tok_s, machines, gbit, overlap):
    compute = tokens / tok_s
    if machines == 1:
        return 1.0, compute, 0.0
    bytes_moved = 2 * (machines - 1) / machines * params * 4
    comm = bytes_moved / (gbit * 1e9 / 8) + 2 * (machines - 1) * 50e-6
    if overlap:
        backward = compute * 2 / 3
        exposed = max(comm / (layers + 1), comm - backward + backward / (layers + 1))
    else:
        exposed = comm
    return compute / (compute + exposed), compute, comm


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tokens-per-s-small", type=float, default=2200.0)
    p.add_argument("--tokens-per-s-gpt2", type=float, default=300.0)
    p.add_argument("--speedup", type=float, nargs="*", default=[1.0, 100.0])
    a = p.parse_args()
    speeds = {"small": a.tokens_per_s_small, "gpt2": a.tokens_per_s_gpt2}
    machines = [2, 4, 8, 16, 64]
    print("| shape | machine speed | network | overlap | " +
          " | ".join(f"N={n}" for n in machines) + " | compute s/step | sum s/step (N=64) |")
    print("|---" * (6 + len(machines)) + "|")
    for name, (params, layers, tokens) in SHAPES.items():
        for k in a.speedup:
            for gbit in (10, 100):
                for overlap in (False, True):
                    row = [efficiency(params, layers, tokens, speeds[name] * k, n, gbit, overlap)
                           for n in machines]
                    cells = " | ".join(f"{e * 100:.0f} %" for e, _, _ in row)
                    print(f"| {name} | {k:g}x here ({speeds[name] * k:,.0f} tok/s) | {gbit} Gb/s | "
                          f"{'yes' if overlap else 'no'} | {cells} | {row[0][1]:.3f} | {row[-1][2]:.3f} |")


if __name__ == "__main__":
    main()

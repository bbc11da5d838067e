// Softmax and cross-entropy fused, as ops/crossentropy.cpp: one block per row, normalised over the
// V real columns; the padded columns (V … Vp) are never read and get a zero gradient.
//
// Pass 1 reads the row once for an online (max, Σ exp(x − max)) per thread; the threads' pairs meet
// in a fixed tree. Pass 2 (dloss ≠ 0) writes (p − onehot)·dloss. Thread t takes the column quads
// 4t, 4t + 4·blockDim, … (one 16-byte access where the row allows, else scalar: the same columns,
// so the sums' order never depends on alignment).
#include <cmath>

#include "xsa/backend/cuda/common.cuh"
#include "xsa/backend/cuda/kernels.h"

namespace xsa::cuda {
namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / kWarp;

// Σ exp(x − max) over the columns seen so far; sum 0 means none (a real column adds at least 1).
struct SoftmaxStats {
  float max;
  float sum;
};

__device__ __forceinline__ void add_logit(SoftmaxStats& s, float x) {
  if (x > s.max) {  // a new max rescales what was summed (0 · exp(−inf) = 0 at the start)
    s.sum = s.sum * expf(s.max - x) + 1.0f;
    s.max = x;
  } else if (x != -INFINITY) {  // −inf adds exp(−inf) = 0; skipping it avoids −inf − (−inf)
    s.sum += expf(x - s.max);
  }
}

__device__ __forceinline__ SoftmaxStats merge(SoftmaxStats a, SoftmaxStats b) {
  if (b.sum == 0.0f) return a;
  if (a.sum == 0.0f) return b;
  const float m = fmaxf(a.max, b.max);
  return {m, a.sum * expf(a.max - m) + b.sum * expf(b.max - m)};
}

// Lane 0 gets the warp's stats through a fixed shuffle-down tree.
__device__ __forceinline__ SoftmaxStats warp_merge(SoftmaxStats s) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    const SoftmaxStats other{__shfl_down_sync(0xffffffffu, s.max, offset),
                             __shfl_down_sync(0xffffffffu, s.sum, offset)};
    s = merge(s, other);
  }
  return s;
}

// The block's stats (a fixed tree: warps, then warp 0 over the warps), given to every thread.
__device__ SoftmaxStats block_merge(SoftmaxStats s) {
  __shared__ float warp_max[kWarps], warp_sum[kWarps];
  __shared__ SoftmaxStats total;
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  s = warp_merge(s);
  if (lane == 0) {
    warp_max[warp] = s.max;
    warp_sum[warp] = s.sum;
  }
  __syncthreads();
  if (warp == 0) {
    SoftmaxStats t{-INFINITY, 0.0f};
    if (lane < kWarps) t = {warp_max[lane], warp_sum[lane]};
    t = warp_merge(t);
    if (lane == 0) total = t;
  }
  __syncthreads();
  return total;
}

// A logit as the loss reads it: soft-capped where cap > 0 (ops::softcap_forward).
__device__ __forceinline__ float capped(float x, float cap) {
  return cap > 0.0f ? cap * tanhf(x / cap) : x;
}

__global__ void softcap_kernel(float* logits, int V, int Vp, float cap) {
  float* row = logits + (size_t)blockIdx.x * Vp;
  for (int j = threadIdx.x; j < V; j += blockDim.x) row[j] = capped(row[j], cap);
}

__global__ void __launch_bounds__(kThreads)
    crossentropy_kernel(float* logits, float* losses, const int32_t* targets, int V, int Vp,
                        float dloss, bf16_bits* dlogits_bf16, float cap) {
  const size_t n = blockIdx.x;
  float* row = logits + n * Vp;
  bf16_bits* grad_bf16 = dlogits_bf16 ? dlogits_bf16 + n * Vp : nullptr;
  const int target = targets[n];
  if (target < 0) {  // ignored position: no loss, no gradient (the whole block leaves here)
    if (threadIdx.x == 0) losses[n] = 0.0f;
    if (dloss != 0.0f) {
      for (int j = threadIdx.x; j < Vp; j += blockDim.x) {
        if (grad_bf16)
          grad_bf16[j] = 0;
        else
          row[j] = 0.0f;
      }
    }
    return;
  }
  const bool vectorized = reinterpret_cast<uintptr_t>(row) % 16 == 0;
  const int quad_stride = 4 * blockDim.x;
  // Read before block_merge's barrier: after it, pass 2 may overwrite the row in place.
  const float target_logit = threadIdx.x == 0 ? capped(row[target], cap) : 0.0f;

  SoftmaxStats s{-INFINITY, 0.0f};
  for (int col = 4 * threadIdx.x; col < V; col += quad_stride) {
    float v[4];
    load_quad(v, row, col, V, vectorized);
    for (int k = 0; k < 4; k++)
      if (col + k < V) add_logit(s, capped(v[k], cap));
  }
  s = block_merge(s);
  if (threadIdx.x == 0) losses[n] = logf(s.sum) - (target_logit - s.max);
  if (dloss == 0.0f) return;

  // ∂loss/∂logit_j = (p_j − [j = target])·dloss, as the CPU: exp(x − max)·(dloss / sum) − dloss.
  const float scale = dloss / s.sum;
  const bool grad_vectorized =
      grad_bf16 ? reinterpret_cast<uintptr_t>(grad_bf16) % 8 == 0 : vectorized;
  for (int col = 4 * threadIdx.x; col < Vp; col += quad_stride) {
    float v[4], grad[4];
    load_quad(v, row, col, V, vectorized);
    for (int k = 0; k < 4; k++) {
      const int j = col + k;
      // __fmul_rn: no fused multiply-add with the − dloss, so the rounding is the CPU's.
      const float x = j < V ? capped(v[k], cap) : 0.0f;
      grad[k] = j < V ? __fmul_rn(expf(x - s.max), scale) - (j == target ? dloss : 0.0f) : 0.0f;
      if (cap > 0.0f && j < V) grad[k] *= 1.0f - (x / cap) * (x / cap);  // the cap's derivative
    }
    if (grad_bf16)
      store_quad(grad_bf16, grad, col, Vp, grad_vectorized);
    else
      store_quad(row, grad, col, Vp, grad_vectorized);
  }
}

}  // namespace

void crossentropy_forward_backward(const CrossEntropyArgs& a, cudaStream_t stream) {
  if (a.N <= 0) return;
  crossentropy_kernel<<<a.N, kThreads, 0, stream>>>(a.logits, a.losses, a.targets, a.V, a.Vp,
                                                    a.dloss, a.dlogits_bf16, a.softcap);
}

void softcap_forward(float* logits, int N, int V, int Vp, float cap, cudaStream_t stream) {
  if (N <= 0) return;
  softcap_kernel<<<N, kThreads, 0, stream>>>(logits, V, Vp, cap);
}

}  // namespace xsa::cuda

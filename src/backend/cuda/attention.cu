// The fused causal attention with XSA on the GPU: the contract of ops/attention.h, with the CPU
// kernels in ops/attention.cpp, ops/xsa.cpp and ops/xsa_row.h as the reference (docs/SPEC.md §2).
//
// Forward, flash-attention-2 style: a block per (query tile, head, sequence) walks the key tiles up
// to its diagonal with an online softmax in fp32, then writes y, lse and, with XSA, z from the
// row's own value (the epilogue). Two product paths:
//   - fp32 (bf16_products = false, any D ≤ 256): plain FMA loops over shared-memory tiles, a warp
//     per 8 query rows, a lane per key for the scores and per head dimension for P·V;
//   - tensor cores (bf16_products = true, D a multiple of 8 up to 128, 16-byte aligned qkv and
//     d_out): mma.sync m16n8k16 with bf16 operands and fp32 accumulators, the head padded with
//     zeros to DP = 16, 32, 64 or 128, a warp per 16 query rows, 64×64 tiles. Other shapes fall
//     back to the fp32 path.
// Backward: a prologue kernel per (token, kv head) turns ∂L/∂z into ∂L/∂y in place (XSA), adds the
// own-value gradient and writes dalpha and D_i = dy_i·y_i (the workspace); a kernel per (sequence,
// head) writes dsink; then a block per (key tile, kv head, sequence) walks its group's query heads
// and the query tiles at or below the diagonal, holding dK and dV for its keys (one += into dqkv at
// the end, so no atomics and a fixed order). dQ goes either by atomicAdd from that kernel (the
// default) or, deterministic, by a second kernel per (query tile, head, sequence) that recomputes
// its P and dS over the key tiles in order.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "xsa/backend/cuda/kernels.h"
#include "xsa/backend/cuda/launch.h"

namespace xsa::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;
// As ops/xsa_row.h: ‖v‖ ≤ 1e-6 counts as zero; the forward floors v·v at (1e-6)².
constexpr float kXsaEpsilon = 1e-6f;
constexpr float kXsaEpsilonSquared = 1e-12f;
constexpr int kMaxHead = 256;  // the fp32 kernels hold up to 8 head dimensions per lane

// ---- shapes and offsets ----

// Everything a kernel needs to find a (sequence, token, head) in the tensors of AttentionArgs.
struct Shape {
  int B, T, C, H;
  int Hk, group;  // kv heads; query head h reads kv head h / group
  int D, Ck, ld;  // head size, kv width Hk·D, qkv row width C + 2·Ck
  float scale;    // 1/√D

  __host__ __device__ size_t token(int b, int t) const { return (size_t)b * T + t; }
  __host__ __device__ size_t q_at(int b, int t, int h) const {
    return token(b, t) * ld + (size_t)h * D;
  }
  __host__ __device__ size_t k_at(int b, int t, int g) const {
    return token(b, t) * ld + C + (size_t)g * D;
  }
  __host__ __device__ size_t v_at(int b, int t, int g) const {
    return token(b, t) * ld + C + Ck + (size_t)g * D;
  }
  // y, z, d_out [B, T, C]
  __host__ __device__ size_t y_at(int b, int t, int h) const {
    return token(b, t) * C + (size_t)h * D;
  }
  // lse and D_i [B, H, T]
  __host__ __device__ size_t stat_at(int b, int h, int t) const {
    return ((size_t)b * H + h) * T + t;
  }
};

Shape make_shape(int B, int T, int C, int H, int Hkv) {
  Shape s{};
  s.B = B, s.T = T, s.C = C, s.H = H;
  s.Hk = Hkv > 0 ? Hkv : H;
  s.group = H / s.Hk;
  s.D = C / H;
  s.Ck = s.Hk * s.D;
  s.ld = C + 2 * s.Ck;
  s.scale = 1.0f / std::sqrt(float(s.D));  // as the CPU: Real(1) / sqrt(Real(D))
  return s;
}

// ---- warp helpers ----

// Butterfly reductions: every lane ends with the same bits (each step adds the same two values).
__device__ float warp_sum(float x) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) x += __shfl_xor_sync(kFullMask, x, offset);
  return x;
}
__device__ float warp_max(float x) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    x = fmaxf(x, __shfl_xor_sync(kFullMask, x, offset));
  return x;
}
// The four lanes of a quad (same lane / 4) hold one row of an mma accumulator between them.
__device__ float quad_sum(float x) {
  x += __shfl_xor_sync(kFullMask, x, 1);
  return x + __shfl_xor_sync(kFullMask, x, 2);
}
__device__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(kFullMask, x, 1));
  return fmaxf(x, __shfl_xor_sync(kFullMask, x, 2));
}

// The online softmax subtracts this from a row's scores: its running max, or 0 while the row has
// seen neither a key nor a sink (max −∞), so that exp(−∞ − base) = 0 and no ∞ − ∞ arises.
__device__ float softmax_base(float running_max) {
  return running_max == -INFINITY ? 0.0f : running_max;
}

// XSA forward (ops::xsa_row_forward): z = y − removal · v with removal = α (y·v) / max(v·v, 1e-12).
__device__ float xsa_removal(float alpha, float yv, float vv) {
  return alpha * yv / fmaxf(vv, kXsaEpsilonSquared);
}

// ---- fp32 tiles in shared memory ----

// dst [tile_rows][dst_ld] = the first D columns of `rows` rows of src (row stride src_ld); the rows
// after them are zero, so products over a partial tile stay finite.
__device__ void stage_fp32(float* dst, int dst_ld, const float* src, size_t src_ld, int tile_rows,
                           int rows, int D) {
  for (int e = threadIdx.x; e < tile_rows * D; e += blockDim.x) {
    const int r = e / D, d = e % D;
    dst[r * dst_ld + d] = r < rows ? src[r * src_ld + d] : 0.0f;
  }
}

// ======================= fp32 forward =======================

constexpr int kFwdWarps = 4;
constexpr int kFwdRowsPerWarp = 8;
constexpr int kFwdRows = kFwdWarps * kFwdRowsPerWarp;  // query tile
constexpr int kFwdKeys = kWarp;                        // key tile: a key per lane

struct Fp32ForwardSmem {
  float* Q;  // [kFwdRows][D]
  float* K;  // [kFwdKeys][D + 1]: lanes read a column of 32 rows, the +1 spreads it over the banks
  float* V;  // [kFwdKeys][D]
  float* P;  // [kFwdWarps][kFwdRowsPerWarp][kFwdKeys]: each warp's probabilities
  __device__ Fp32ForwardSmem(float* base, int D)
      : Q(base), K(Q + kFwdRows * D), V(K + kFwdKeys * (D + 1)), P(V + kFwdKeys * D) {}
  static size_t bytes(int D) {
    return sizeof(float) * ((size_t)kFwdRows * D + kFwdKeys * (D + 1) + kFwdKeys * D +
                            kFwdWarps * kFwdRowsPerWarp * kFwdKeys);
  }
};

// Scores of key j0 + lane (the lane's row of K) against the warp's 8 query rows.
__device__ __forceinline__ void scores_fp32(float (&score)[kFwdRowsPerWarp],
                                            const Fp32ForwardSmem& sm, int D, int warp, int lane) {
  for (int d = 0; d < D; d++) {
    const float k = sm.K[lane * (D + 1) + d];
#pragma unroll
    for (int r = 0; r < kFwdRowsPerWarp; r++)
      score[r] += sm.Q[(warp * kFwdRowsPerWarp + r) * D + d] * k;
  }
}

// acc += P V over the tile's keys: P the warp's [8][kFwdKeys] probabilities, V the tile's values.
template <int DPL>
__device__ __forceinline__ void accumulate_pv_fp32(float (&acc)[kFwdRowsPerWarp][DPL],
                                                   const float* P, const float* V, int D,
                                                   int lane) {
  for (int j = 0; j < kFwdKeys; j++) {
    float v[DPL];
#pragma unroll
    for (int k = 0; k < DPL; k++) {
      const int d = lane + kWarp * k;
      v[k] = d < D ? V[j * D + d] : 0.0f;
    }
#pragma unroll
    for (int r = 0; r < kFwdRowsPerWarp; r++) {
      const float p = P[r * kFwdKeys + j];
#pragma unroll
      for (int k = 0; k < DPL; k++) acc[r][k] += p * v[k];
    }
  }
}

// Grid (query tiles, H, B), the last query tile first (it has the most keys). Lane `lane` owns head
// dimensions lane + 32·k, k < DPL, of its warp's 8 rows.
template <int DPL>
__global__ void __launch_bounds__(kFwdWarps* kWarp)
    forward_fp32_kernel(Shape s, const float* __restrict__ qkv, float* __restrict__ y,
                        float* __restrict__ z, float* __restrict__ lse,
                        const float* __restrict__ alpha, const float* __restrict__ sink) {
  extern __shared__ float fwd_smem[];
  const int D = s.D;
  const Fp32ForwardSmem sm(fwd_smem, D);
  const int qt = gridDim.x - 1 - blockIdx.x, h = blockIdx.y, b = blockIdx.z, g = h / s.group;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int i0 = qt * kFwdRows;
  const int first_row = i0 + warp * kFwdRowsPerWarp;  // this warp's rows: first_row + r
  stage_fp32(sm.Q, D, qkv + s.q_at(b, i0, h), s.ld, kFwdRows, min(kFwdRows, s.T - i0), D);

  // A sink starts every row with its logit and exp(b − b) = 1 in the sum; its value is zero.
  float m[kFwdRowsPerWarp], l[kFwdRowsPerWarp], acc[kFwdRowsPerWarp][DPL];
#pragma unroll
  for (int r = 0; r < kFwdRowsPerWarp; r++) {
    m[r] = sink ? sink[h] : -INFINITY;
    l[r] = sink ? 1.0f : 0.0f;
#pragma unroll
    for (int k = 0; k < DPL; k++) acc[r][k] = 0.0f;
  }

  const int key_end = min(s.T, i0 + kFwdRows);
  for (int j0 = 0; j0 < key_end; j0 += kFwdKeys) {
    __syncthreads();  // the previous tile's K and V are no longer read
    const int keys = min(kFwdKeys, s.T - j0);
    stage_fp32(sm.K, D + 1, qkv + s.k_at(b, j0, g), s.ld, kFwdKeys, keys, D);
    stage_fp32(sm.V, D, qkv + s.v_at(b, j0, g), s.ld, kFwdKeys, keys, D);
    __syncthreads();

    float score[kFwdRowsPerWarp] = {};
    scores_fp32(score, sm, D, warp, lane);
    const int key = j0 + lane;
    float* P = sm.P + warp * kFwdRowsPerWarp * kFwdKeys;
#pragma unroll
    for (int r = 0; r < kFwdRowsPerWarp; r++) {
      const bool visible = key <= first_row + r && key < s.T;  // causal
      const float x = visible ? score[r] * s.scale : -INFINITY;
      // Online softmax: raise the running max, rescale what was accumulated under the old one.
      const float new_max = fmaxf(m[r], warp_max(x));
      const float base = softmax_base(new_max);
      const float p = expf(x - base), correction = expf(m[r] - base);
      l[r] = l[r] * correction + warp_sum(p);
      m[r] = new_max;
#pragma unroll
      for (int k = 0; k < DPL; k++) acc[r][k] *= correction;
      P[r * kFwdKeys + lane] = p;
    }
    __syncwarp();
    accumulate_pv_fp32<DPL>(acc, P, sm.V, D, lane);
  }

  // Epilogue: y = acc / l, lse = m + log l, and with XSA z from the row's own value.
  const float alpha_h = alpha ? alpha[h] : 1.0f;
#pragma unroll
  for (int r = 0; r < kFwdRowsPerWarp; r++) {
    const int i = first_row + r;
    if (i >= s.T) continue;  // the same for the whole warp
    const float inv_l = 1.0f / l[r];
    float yd[DPL];
#pragma unroll
    for (int k = 0; k < DPL; k++) {
      const int d = lane + kWarp * k;
      yd[k] = acc[r][k] * inv_l;
      if (d < D) y[s.y_at(b, i, h) + d] = yd[k];
    }
    if (lane == 0) lse[s.stat_at(b, h, i)] = m[r] + logf(l[r]);
    if (z) {
      const float* v = qkv + s.v_at(b, i, g);
      float vv = 0.0f, yv = 0.0f;
#pragma unroll
      for (int k = 0; k < DPL; k++) {
        const int d = lane + kWarp * k;
        const float vd = d < D ? v[d] : 0.0f;
        vv += vd * vd, yv += yd[k] * vd;
      }
      const float removal = xsa_removal(alpha_h, warp_sum(yv), warp_sum(vv));
#pragma unroll
      for (int k = 0; k < DPL; k++) {
        const int d = lane + kWarp * k;
        if (d < D) z[s.y_at(b, i, h) + d] = yd[k] - removal * v[d];
      }
    }
  }
}

// ======================= fp32 backward =======================
//
// forward: s_ij = q_i·k_j/√D, p_ij = exp(s_ij − lse_i), y_i = Σ_j p_ij v_j. With dy = ∂L/∂y:
//   dv_j += Σ_i p_ij dy_i;  ds_ij = p_ij (dy_i·v_j − D_i)/√D with D_i = dy_i·y_i;
//   dq_i += Σ_j ds_ij k_j;  dk_j += Σ_i ds_ij q_i.

constexpr int kBwdTile = 32;  // query and key tiles (equal: query tile qt starts at key tile qt)
constexpr int kBwdWarps = 8;
constexpr int kBwdRowsPerWarp = kBwdTile / kBwdWarps;

struct Fp32BackwardSmem {
  float *K, *V, *Q, *dY;  // [kBwdTile][D + 1] (the +1: see Fp32ForwardSmem::K)
  float* acc[2];          // [kBwdTile][D]: dK and dV, or dQ and unused
  float *P, *dS;          // [kBwdTile][kBwdTile], [query][key]
  float *lse, *Di;        // [kBwdTile] of the query tile
  __device__ Fp32BackwardSmem(float* base, int D) {
    const int tile = kBwdTile * (D + 1);
    K = base, V = K + tile, Q = V + tile, dY = Q + tile;
    acc[0] = dY + tile, acc[1] = acc[0] + kBwdTile * D;
    P = acc[1] + kBwdTile * D, dS = P + kBwdTile * kBwdTile;
    lse = dS + kBwdTile * kBwdTile, Di = lse + kBwdTile;
  }
  static size_t bytes(int D) {
    return sizeof(float) * (4 * (size_t)kBwdTile * (D + 1) + 2 * kBwdTile * D +
                            2 * kBwdTile * kBwdTile + 2 * kBwdTile);
  }
};

// The query tile's Q, dY (head h), lse and D_i rows into shared memory.
// What the fp32 backward's tiles read: qkv, dY (∂L/∂y), the row statistics lse and D_i.
struct BackwardInputs {
  const float* qkv;
  const float* dy;
  const float* lse;
  const float* Di;
};

__device__ void stage_query_tile_fp32(const Fp32BackwardSmem& sm, const Shape& s,
                                      const BackwardInputs& in, int b, int h, int i0) {
  const float *qkv = in.qkv, *dy = in.dy, *lse = in.lse, *Di = in.Di;
  const int rows = min(kBwdTile, s.T - i0);
  stage_fp32(sm.Q, s.D + 1, qkv + s.q_at(b, i0, h), s.ld, kBwdTile, rows, s.D);
  stage_fp32(sm.dY, s.D + 1, dy + s.y_at(b, i0, h), s.C, kBwdTile, rows, s.D);
  for (int r = threadIdx.x; r < kBwdTile; r += blockDim.x) {
    sm.lse[r] = r < rows ? lse[s.stat_at(b, h, i0 + r)] : 0.0f;
    sm.Di[r] = r < rows ? Di[s.stat_at(b, h, i0 + r)] : 0.0f;
  }
}

// The key tile's K and V (kv head g) into shared memory.
__device__ void stage_key_tile_fp32(const Fp32BackwardSmem& sm, const Shape& s, const float* qkv,
                                    int b, int g, int j0) {
  const int keys = min(kBwdTile, s.T - j0);
  stage_fp32(sm.K, s.D + 1, qkv + s.k_at(b, j0, g), s.ld, kBwdTile, keys, s.D);
  stage_fp32(sm.V, s.D + 1, qkv + s.v_at(b, j0, g), s.ld, kBwdTile, keys, s.D);
}

// P and dS of a (query tile i0, key tile j0) pair from the staged tiles: p = exp(q·k/√D − lse)
// where the key is visible (key ≤ query < T), else 0; ds = p (dy·v − D_i)/√D. Thread: key
// j0 + lane against the queries i0 + warp·4 + r.
__device__ void probabilities_fp32(const Fp32BackwardSmem& sm, const Shape& s, int i0, int j0) {
  const int D = s.D, lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int first = warp * kBwdRowsPerWarp;
  float qk[kBwdRowsPerWarp] = {}, dyv[kBwdRowsPerWarp] = {};
  for (int d = 0; d < D; d++) {
    const float k = sm.K[lane * (D + 1) + d], v = sm.V[lane * (D + 1) + d];
#pragma unroll
    for (int r = 0; r < kBwdRowsPerWarp; r++) {
      qk[r] += sm.Q[(first + r) * (D + 1) + d] * k;
      dyv[r] += sm.dY[(first + r) * (D + 1) + d] * v;
    }
  }
  const int key = j0 + lane;
#pragma unroll
  for (int r = 0; r < kBwdRowsPerWarp; r++) {
    const int i = first + r, query = i0 + i;
    const bool visible = key <= query && query < s.T;
    const float p = visible ? expf(qk[r] * s.scale - sm.lse[i]) : 0.0f;
    sm.P[i * kBwdTile + lane] = p;
    sm.dS[i * kBwdTile + lane] = p * (dyv[r] - sm.Di[i]) * s.scale;
  }
}

// Grid (key tiles, Hk, B): dK and dV of the tile's keys over the group's query heads and the query
// tiles from the diagonal on, in that order; with kAtomicDq also dQ, added by atomicAdd.
template <bool kAtomicDq>
__global__ void __launch_bounds__(kBwdWarps* kWarp)
    backward_kv_fp32_kernel(Shape s, const float* __restrict__ qkv, const float* __restrict__ dy,
                            const float* __restrict__ lse, const float* __restrict__ Di,
                            float* __restrict__ dqkv) {
  extern __shared__ float bwd_smem[];
  const int D = s.D;
  const Fp32BackwardSmem sm(bwd_smem, D);
  const int kt = blockIdx.x, g = blockIdx.y, b = blockIdx.z, j0 = kt * kBwdTile;
  float *dK = sm.acc[0], *dV = sm.acc[1];
  stage_key_tile_fp32(sm, s, qkv, b, g, j0);
  // Each thread owns the elements e ≡ threadIdx.x of dK and dV (here and below): no races.
  for (int e = threadIdx.x; e < kBwdTile * D; e += blockDim.x) dK[e] = dV[e] = 0.0f;

  for (int h = g * s.group; h < (g + 1) * s.group; h++) {
    for (int i0 = j0; i0 < s.T; i0 += kBwdTile) {
      __syncthreads();  // the previous pair's tiles are no longer read
      stage_query_tile_fp32(sm, s, {qkv, dy, lse, Di}, b, h, i0);
      __syncthreads();
      probabilities_fp32(sm, s, i0, j0);
      __syncthreads();
      // dV += Pᵀ dY, dK += dSᵀ Q: element (key j, dimension d).
      for (int e = threadIdx.x; e < kBwdTile * D; e += blockDim.x) {
        const int j = e / D, d = e % D;
        float dv = 0.0f, dk = 0.0f;
        for (int i = 0; i < kBwdTile; i++) {
          dv += sm.P[i * kBwdTile + j] * sm.dY[i * (D + 1) + d];
          dk += sm.dS[i * kBwdTile + j] * sm.Q[i * (D + 1) + d];
        }
        dV[e] += dv;
        dK[e] += dk;
      }
      if constexpr (kAtomicDq) {  // dQ += dS K: element (query i, dimension d)
        for (int e = threadIdx.x; e < kBwdTile * D; e += blockDim.x) {
          const int i = e / D, d = e % D;
          if (i0 + i >= s.T) continue;
          float dq = 0.0f;
          for (int j = 0; j < kBwdTile; j++) dq += sm.dS[i * kBwdTile + j] * sm.K[j * (D + 1) + d];
          atomicAdd(dqkv + s.q_at(b, i0 + i, h) + d, dq);
        }
      }
    }
  }
  for (int e = threadIdx.x; e < kBwdTile * D; e += blockDim.x) {
    const int j = e / D, d = e % D;
    if (j0 + j >= s.T) continue;
    dqkv[s.k_at(b, j0 + j, g) + d] += dK[e];
    dqkv[s.v_at(b, j0 + j, g) + d] += dV[e];
  }
}

// The deterministic dQ: grid (query tiles, H, B), the last query tile first; the key tiles up to
// the diagonal in order, dQ += dS K, one += into dqkv at the end.
__global__ void __launch_bounds__(kBwdWarps* kWarp)
    backward_q_fp32_kernel(Shape s, const float* __restrict__ qkv, const float* __restrict__ dy,
                           const float* __restrict__ lse, const float* __restrict__ Di,
                           float* __restrict__ dqkv) {
  extern __shared__ float bwd_smem[];
  const int D = s.D;
  const Fp32BackwardSmem sm(bwd_smem, D);
  const int qt = gridDim.x - 1 - blockIdx.x, h = blockIdx.y, b = blockIdx.z, g = h / s.group;
  const int i0 = qt * kBwdTile;
  float* dQ = sm.acc[0];
  stage_query_tile_fp32(sm, s, {qkv, dy, lse, Di}, b, h, i0);
  for (int e = threadIdx.x; e < kBwdTile * D; e += blockDim.x) dQ[e] = 0.0f;

  for (int j0 = 0; j0 <= i0; j0 += kBwdTile) {
    __syncthreads();
    stage_key_tile_fp32(sm, s, qkv, b, g, j0);
    __syncthreads();
    probabilities_fp32(sm, s, i0, j0);
    __syncthreads();
    for (int e = threadIdx.x; e < kBwdTile * D; e += blockDim.x) {
      const int i = e / D, d = e % D;
      float dq = 0.0f;
      for (int j = 0; j < kBwdTile; j++) dq += sm.dS[i * kBwdTile + j] * sm.K[j * (D + 1) + d];
      dQ[e] += dq;
    }
  }
  for (int e = threadIdx.x; e < kBwdTile * D; e += blockDim.x) {
    const int i = e / D, d = e % D;
    if (i0 + i < s.T) dqkv[s.q_at(b, i0 + i, h) + d] += dQ[e];
  }
}

// ======================= tensor cores: mma.sync m16n8k16 bf16 → fp32 =======================
//
// Fragments (PTX ISA, "Matrix fragments for mma.m16n8k16 with floating point type"), with
// lane = 4·gid + tig and each 32-bit register holding two bf16, the lower index in the low half:
//   A 16×16 (m × k): a[0] = (gid, 2tig + {0,1}), a[1] = (gid + 8, 2tig + {0,1}),
//                    a[2] = (gid, 2tig + 8 + {0,1}), a[3] = (gid + 8, 2tig + 8 + {0,1})
//   B 16×8 (k × n):  b[0] = (2tig + {0,1}, gid), b[1] = (2tig + 8 + {0,1}, gid)
//   C 16×8 (m × n):  c[0], c[1] = (gid, 2tig + {0,1}), c[2], c[3] = (gid + 8, 2tig + {0,1})
// Tiles live in shared memory as bf16 rows of DP + 8 elements: the 8 extra shift each row by 16
// bytes, so the 8 rows a fragment load touches fall in different banks.

constexpr int kTcTile = 64;  // query and key tiles
constexpr int kTcWarps = 4;  // a warp per 16 rows of the tile
constexpr int kTcPad = 8;

__device__ uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);  // .x (lo) at the lower address
  uint32_t bits;
  memcpy(&bits, &pair, sizeof bits);
  return bits;
}

__device__ uint32_t load_pair(const bf16* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

// D = A B + C; a pure function of its registers (no volatile), so the compiler may schedule it.
__device__ void mma_bf16(float c[4], const uint32_t a[4], const uint32_t b[2]) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// A fragment: rows row0 …, columns k0 … of a row-major tile.
__device__ void load_a(uint32_t a[4], const bf16* tile, int ld, int row0, int k0) {
  const int lane = threadIdx.x % kWarp, gid = lane / 4, tig = lane % 4;
  const bf16* p = tile + (row0 + gid) * ld + k0 + 2 * tig;
  a[0] = load_pair(p);
  a[1] = load_pair(p + 8 * ld);
  a[2] = load_pair(p + 8);
  a[3] = load_pair(p + 8 * ld + 8);
}

// B fragment (k0 …, n0 …) of a tile stored [n][k] (k contiguous: K for Q·Kᵀ).
__device__ void load_b_from_nk(uint32_t b[2], const bf16* tile, int ld, int n0, int k0) {
  const int lane = threadIdx.x % kWarp, gid = lane / 4, tig = lane % 4;
  const bf16* p = tile + (n0 + gid) * ld + k0 + 2 * tig;
  b[0] = load_pair(p);
  b[1] = load_pair(p + 8);
}

// B fragment (k0 …, n0 …) of a tile stored [k][n] (n contiguous: V for P·V). ldmatrix .trans
// reads two 8×8 matrices, rows k0 … k0 + 7 and k0 + 8 … k0 + 15 (addresses from lanes 0–15), and
// hands lane 4·gid + tig the elements (k 2tig and 2tig + 1, n gid) of each: b[0] and b[1].
__device__ void load_b_from_kn(uint32_t b[2], const bf16* tile, int ld, int k0, int n0) {
  const int lane = threadIdx.x % kWarp;
  const bf16* row = tile + (k0 + lane % 16) * ld + n0;
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(row));
  // volatile and "memory": the same addresses are read again after every tile is restaged.
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(b[0]), "=r"(b[1])
               : "r"(address)
               : "memory");
}

// The A fragment of k-step kk of a product whose left operand is a block of accumulators
// c[nt][4] (16 rows × 8 columns each): its columns 16kk … 16kk + 15 are accumulator tiles 2kk and
// 2kk + 1, and the accumulator layout lines up with the A layout pair by pair.
__device__ void accumulators_to_a(uint32_t a[4], const float left[4], const float right[4]) {
  a[0] = pack_bf16x2(left[0], left[1]);
  a[1] = pack_bf16x2(left[2], left[3]);
  a[2] = pack_bf16x2(right[0], right[1]);
  a[3] = pack_bf16x2(right[2], right[3]);
}

// acc[nt] += A Bᵀ over k < K: A the warp's 16 rows (from row0) of a [row][k] tile, B the 8·NT rows
// of a [n][k] tile (S = Q Kᵀ, Sᵀ = K Qᵀ, dP = dY Vᵀ, dPᵀ = V dYᵀ).
template <int K, int NT>
__device__ __forceinline__ void mma_rows_by_nk(float (&acc)[NT][4], const bf16* A, const bf16* B,
                                               int ld, int row0) {
#pragma unroll
  for (int kk = 0; kk < K / 16; kk++) {
    uint32_t a[4];
    load_a(a, A, ld, row0, 16 * kk);
#pragma unroll
    for (int nt = 0; nt < NT; nt++) {
      uint32_t b[2];
      load_b_from_nk(b, B, ld, 8 * nt, 16 * kk);
      mma_bf16(acc[nt], a, b);
    }
  }
}

// out[nd] += L B over k < 8·KB: L a block of accumulators (left[nt] the columns 8nt …, as
// accumulators_to_a reads them), B the 8·ND columns of a [k][n] tile (O += P V, dV += Pᵀ dY,
// dK += dSᵀ Q, dQ += dS K).
template <int KB, int ND>
__device__ __forceinline__ void mma_accumulators_by_kn(float (&out)[ND][4],
                                                       const float (&left)[KB][4], const bf16* B,
                                                       int ld) {
#pragma unroll
  for (int kk = 0; kk < KB / 2; kk++) {
    uint32_t a[4];
    accumulators_to_a(a, left[2 * kk], left[2 * kk + 1]);
#pragma unroll
    for (int nd = 0; nd < ND; nd++) {
      uint32_t b[2];
      load_b_from_kn(b, B, ld, 16 * kk, 8 * nd);
      mma_bf16(out[nd], a, b);
    }
  }
}

// dst [kTcTile][DP + kTcPad] (bf16) = `rows` rows of src (row stride src_ld), the first D columns;
// zero elsewhere (padding rows and columns D … DP − 1). src and src_ld·4 bytes are 16-byte aligned.
template <int DP>
__device__ void stage_bf16(bf16* dst, const float* src, size_t src_ld, int rows, int D) {
  constexpr int kQuadsPerRow = DP / 4;
  for (int e = threadIdx.x; e < kTcTile * kQuadsPerRow; e += blockDim.x) {
    const int r = e / kQuadsPerRow, d = (e % kQuadsPerRow) * 4;
    float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (r < rows && d < D) x = *reinterpret_cast<const float4*>(src + r * src_ld + d);
    const uint2 packed = make_uint2(pack_bf16x2(x.x, x.y), pack_bf16x2(x.z, x.w));
    *reinterpret_cast<uint2*>(dst + r * (DP + kTcPad) + d) = packed;
  }
}

template <int DP>
constexpr size_t tc_tile_bytes() {
  return sizeof(bf16) * kTcTile * (DP + kTcPad);
}

// ---- tensor-core forward ----

template <int DP>
constexpr size_t forward_tc_bytes() {
  return 3 * tc_tile_bytes<DP>();  // Q, K, V
}

// What a forward block writes, and where: its (sequence, head, kv head) and the head's gate.
struct ForwardTarget {
  const float* qkv;
  float *y, *z, *lse;
  int b, h, g;
  float alpha;  // 1: plain XSA
};

// The tensor-core forward's epilogue: y = O / l (dimension 8nd + 2tig + c2 in o[nd][2r + c2]), lse,
// and z with XSA. The quad shuffles run in every lane; only the memory accesses depend on the row
// being real.
template <int ND>
__device__ __forceinline__ void forward_tc_epilogue(const Shape& s, const ForwardTarget& t,
                                                    const int (&rows)[2], const float (&m)[2],
                                                    const float (&l)[2], float (&o)[ND][4]) {
  const int tig = threadIdx.x % kWarp % 4, b = t.b, h = t.h, g = t.g;
#pragma unroll
  for (int r = 0; r < 2; r++) {
    const int i = rows[r];
    const bool real = i < s.T;
    const float inv_l = 1.0f / l[r];
    float vv = 0.0f, yv = 0.0f;
#pragma unroll
    for (int nd = 0; nd < ND; nd++)
#pragma unroll
      for (int c2 = 0; c2 < 2; c2++) {
        const int d = 8 * nd + 2 * tig + c2;
        const float yd = o[nd][2 * r + c2] * inv_l;
        o[nd][2 * r + c2] = yd;
        if (!real || d >= s.D) continue;
        t.y[s.y_at(b, i, h) + d] = yd;
        if (t.z) {
          const float vd = t.qkv[s.v_at(b, i, g) + d];
          vv += vd * vd, yv += yd * vd;
        }
      }
    if (real && tig == 0) t.lse[s.stat_at(b, h, i)] = m[r] + logf(l[r]);
    if (t.z) {
      const float removal = xsa_removal(t.alpha, quad_sum(yv), quad_sum(vv));
#pragma unroll
      for (int nd = 0; nd < ND; nd++)
#pragma unroll
        for (int c2 = 0; c2 < 2; c2++) {
          const int d = 8 * nd + 2 * tig + c2;
          if (real && d < s.D)
            t.z[s.y_at(b, i, h) + d] = o[nd][2 * r + c2] - removal * t.qkv[s.v_at(b, i, g) + d];
        }
    }
  }
}

// Grid (query tiles, H, B), the last query tile first. Warp w owns the tile's rows 16w … 16w + 15;
// a thread holds rows gid and gid + 8 of them (index r = 0, 1) in its accumulators.
template <int DP>
__global__ void __launch_bounds__(kTcWarps* kWarp)
    forward_tc_kernel(Shape s, const float* __restrict__ qkv, float* __restrict__ y,
                      float* __restrict__ z, float* __restrict__ lse,
                      const float* __restrict__ alpha, const float* __restrict__ sink) {
  constexpr int kLd = DP + kTcPad, kKeyBlocks = kTcTile / 8, kDimBlocks = DP / 8;
  extern __shared__ __align__(16) unsigned char tc_smem[];
  bf16* Qs = reinterpret_cast<bf16*>(tc_smem);
  bf16* Ks = Qs + kTcTile * kLd;
  bf16* Vs = Ks + kTcTile * kLd;
  const int qt = gridDim.x - 1 - blockIdx.x, h = blockIdx.y, b = blockIdx.z, g = h / s.group;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, gid = lane / 4, tig = lane % 4;
  const int i0 = qt * kTcTile;
  stage_bf16<DP>(Qs, qkv + s.q_at(b, i0, h), s.ld, min(kTcTile, s.T - i0), s.D);
  const int rows[2] = {i0 + 16 * warp + gid, i0 + 16 * warp + gid + 8};

  float m[2], l[2];  // the same in the four lanes of a quad
  for (int r = 0; r < 2; r++) m[r] = sink ? sink[h] : -INFINITY, l[r] = sink ? 1.0f : 0.0f;
  float o[kDimBlocks][4] = {};

  const int key_end = min(s.T, i0 + kTcTile);
  for (int j0 = 0; j0 < key_end; j0 += kTcTile) {
    __syncthreads();  // the previous tile's K and V are no longer read (and Q is staged)
    const int keys = min(kTcTile, s.T - j0);
    stage_bf16<DP>(Ks, qkv + s.k_at(b, j0, g), s.ld, keys, s.D);
    stage_bf16<DP>(Vs, qkv + s.v_at(b, j0, g), s.ld, keys, s.D);
    __syncthreads();

    // S = Q Kᵀ: 16 rows × 64 keys per warp, key 8nt + 2tig + (c & 1) in sc[nt][c].
    float sc[kKeyBlocks][4] = {};
    mma_rows_by_nk<DP>(sc, Qs, Ks, kLd, 16 * warp);
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nt = 0; nt < kKeyBlocks; nt++)
#pragma unroll
      for (int c = 0; c < 4; c++) {
        const int key = j0 + 8 * nt + 2 * tig + (c & 1), r = c / 2;
        const bool visible = key <= rows[r] && key < s.T;
        sc[nt][c] = visible ? sc[nt][c] * s.scale : -INFINITY;
        tile_max[r] = fmaxf(tile_max[r], sc[nt][c]);
      }
    // Online softmax (see forward_fp32_kernel), the row reductions over the quad.
    float base[2], correction[2], tile_sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int r = 0; r < 2; r++) {
      const float new_max = fmaxf(m[r], quad_max(tile_max[r]));
      base[r] = softmax_base(new_max);
      correction[r] = expf(m[r] - base[r]);
      m[r] = new_max;
    }
#pragma unroll
    for (int nt = 0; nt < kKeyBlocks; nt++)
#pragma unroll
      for (int c = 0; c < 4; c++) {
        sc[nt][c] = expf(sc[nt][c] - base[c / 2]);
        tile_sum[c / 2] += sc[nt][c];
      }
#pragma unroll
    for (int r = 0; r < 2; r++) l[r] = l[r] * correction[r] + quad_sum(tile_sum[r]);
#pragma unroll
    for (int nd = 0; nd < kDimBlocks; nd++) {
#pragma unroll
      for (int c = 0; c < 4; c++) o[nd][c] *= correction[c / 2];
    }

    mma_accumulators_by_kn(o, sc, Vs, kLd);  // O += P V, P in bf16 straight from the accumulators
  }

  forward_tc_epilogue(s, {qkv, y, z, lse, b, h, g, alpha ? alpha[h] : 1.0f}, rows, m, l, o);
}

// ---- tensor-core backward: dK, dV (and dQ by atomics) ----

template <int DP>
constexpr size_t backward_kv_tc_bytes() {
  // K, V, Q, dY tiles; dS [query][key] in bf16; lse and D_i of the query tile.
  return 4 * tc_tile_bytes<DP>() + sizeof(bf16) * kTcTile * (kTcTile + kTcPad) +
         2 * sizeof(float) * kTcTile;
}

// dQ = dS K for the atomic path: it needs every warp's keys, so dS (a warp's 16 keys × the 64
// queries, query 8nt + 2tig + (c & 1) in ds[nt][c]) goes through shared memory as [query][key],
// then warp w computes the queries i0 + 16w … + 15 and adds them by atomicAdd into dq_head (the
// sequence's and head's first q row of dqkv).
template <int DP>
__device__ __forceinline__ void atomic_dq_tc(const Shape& s, const float (&ds)[kTcTile / 8][4],
                                             bf16* dSs, const bf16* Ks, float* dq_head, int i0) {
  constexpr int kLd = DP + kTcPad, kDsLd = kTcTile + kTcPad, kDimBlocks = DP / 8;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, gid = lane / 4, tig = lane % 4;
#pragma unroll
  for (int nt = 0; nt < kTcTile / 8; nt++)
#pragma unroll
    for (int c = 0; c < 4; c++) {
      const int qi = 8 * nt + 2 * tig + (c & 1), kj = 16 * warp + gid + 8 * (c / 2);
      dSs[qi * kDsLd + kj] = __float2bfloat16_rn(ds[nt][c]);
    }
  __syncthreads();
  uint32_t a_ds[kTcTile / 16][4];
#pragma unroll
  for (int kk = 0; kk < kTcTile / 16; kk++) load_a(a_ds[kk], dSs, kDsLd, 16 * warp, 16 * kk);
  const int my_rows[2] = {i0 + 16 * warp + gid, i0 + 16 * warp + gid + 8};
#pragma unroll
  for (int nd = 0; nd < kDimBlocks; nd++) {
    if (8 * nd >= s.D) continue;  // zero padding (the same for the whole warp)
    float dq[4] = {};
#pragma unroll
    for (int kk = 0; kk < kTcTile / 16; kk++) {
      uint32_t bk[2];
      load_b_from_kn(bk, Ks, kLd, 16 * kk, 8 * nd);
      mma_bf16(dq, a_ds[kk], bk);
    }
#pragma unroll
    for (int c = 0; c < 4; c++) {
      const int i = my_rows[c / 2], d = 8 * nd + 2 * tig + (c & 1);
      if (i < s.T) atomicAdd(dq_head + (size_t)i * s.ld + d, dq[c]);
    }
  }
}

// Grid (key tiles, Hk, B). Warp w owns the keys j0 + 16w … + 15 (a thread: keys gid and gid + 8,
// index r) and computes with the transposed tiles Sᵀ = K Qᵀ and dPᵀ = V dYᵀ, so that dV += Pᵀ dY
// and dK += dSᵀ Q take their left operand from its own accumulators.
template <int DP, bool kAtomicDq>
__global__ void __launch_bounds__(kTcWarps* kWarp)
    backward_kv_tc_kernel(Shape s, const float* __restrict__ qkv, const float* __restrict__ dy,
                          const float* __restrict__ lse, const float* __restrict__ Di,
                          float* __restrict__ dqkv) {
  constexpr int kLd = DP + kTcPad, kDsLd = kTcTile + kTcPad;
  constexpr int kQueryBlocks = kTcTile / 8, kDimBlocks = DP / 8;
  extern __shared__ __align__(16) unsigned char tc_smem[];
  bf16* Ks = reinterpret_cast<bf16*>(tc_smem);
  bf16* Vs = Ks + kTcTile * kLd;
  bf16* Qs = Vs + kTcTile * kLd;
  bf16* dYs = Qs + kTcTile * kLd;
  bf16* dSs = dYs + kTcTile * kLd;  // [query][key]
  float* lse_s = reinterpret_cast<float*>(dSs + kTcTile * kDsLd);
  float* Di_s = lse_s + kTcTile;
  const int kt = blockIdx.x, g = blockIdx.y, b = blockIdx.z, j0 = kt * kTcTile;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, gid = lane / 4, tig = lane % 4;
  const int keys = min(kTcTile, s.T - j0);
  stage_bf16<DP>(Ks, qkv + s.k_at(b, j0, g), s.ld, keys, s.D);
  stage_bf16<DP>(Vs, qkv + s.v_at(b, j0, g), s.ld, keys, s.D);
  const int my_keys[2] = {j0 + 16 * warp + gid, j0 + 16 * warp + gid + 8};
  float dk[kDimBlocks][4] = {}, dv[kDimBlocks][4] = {};

  for (int h = g * s.group; h < (g + 1) * s.group; h++) {
    for (int i0 = j0; i0 < s.T; i0 += kTcTile) {
      __syncthreads();  // the previous pair's tiles are no longer read
      const int rows = min(kTcTile, s.T - i0);
      stage_bf16<DP>(Qs, qkv + s.q_at(b, i0, h), s.ld, rows, s.D);
      stage_bf16<DP>(dYs, dy + s.y_at(b, i0, h), s.C, rows, s.D);
      for (int r = threadIdx.x; r < kTcTile; r += blockDim.x) {
        lse_s[r] = r < rows ? lse[s.stat_at(b, h, i0 + r)] : 0.0f;
        Di_s[r] = r < rows ? Di[s.stat_at(b, h, i0 + r)] : 0.0f;
      }
      __syncthreads();

      // Pᵀ: this warp's 16 keys × the 64 queries, query i0 + 8nt + 2tig + (c & 1) in p[nt][c].
      float p[kQueryBlocks][4] = {};
      mma_rows_by_nk<DP>(p, Ks, Qs, kLd, 16 * warp);
#pragma unroll
      for (int nt = 0; nt < kQueryBlocks; nt++)
#pragma unroll
        for (int c = 0; c < 4; c++) {
          const int qi = 8 * nt + 2 * tig + (c & 1), query = i0 + qi;
          const bool visible = my_keys[c / 2] <= query && query < s.T;
          p[nt][c] = visible ? expf(p[nt][c] * s.scale - lse_s[qi]) : 0.0f;
        }
      float ds[kQueryBlocks][4] = {};
      mma_rows_by_nk<DP>(ds, Vs, dYs, kLd, 16 * warp);  // dPᵀ = V dYᵀ, same layout
      mma_accumulators_by_kn(dv, p, dYs, kLd);          // dV += Pᵀ dY (k = the queries)
      // dSᵀ = Pᵀ ∘ (dPᵀ − D_query) / √D.
#pragma unroll
      for (int nt = 0; nt < kQueryBlocks; nt++) {
#pragma unroll
        for (int c = 0; c < 4; c++) {
          const int qi = 8 * nt + 2 * tig + (c & 1);
          ds[nt][c] = p[nt][c] * (ds[nt][c] - Di_s[qi]) * s.scale;
        }
      }
      mma_accumulators_by_kn(dk, ds, Qs, kLd);  // dK += dSᵀ Q
      if constexpr (kAtomicDq) atomic_dq_tc<DP>(s, ds, dSs, Ks, dqkv + s.q_at(b, 0, h), i0);
    }
  }
  // This block alone writes these keys' dK and dV: one += each.
#pragma unroll
  for (int nd = 0; nd < kDimBlocks; nd++)
#pragma unroll
    for (int c = 0; c < 4; c++) {
      const int key = my_keys[c / 2], d = 8 * nd + 2 * tig + (c & 1);
      if (key >= s.T || d >= s.D) continue;
      dqkv[s.k_at(b, key, g) + d] += dk[nd][c];
      dqkv[s.v_at(b, key, g) + d] += dv[nd][c];
    }
}

// ---- tensor-core backward: the deterministic dQ ----

template <int DP>
constexpr size_t backward_q_tc_bytes() {
  return 4 * tc_tile_bytes<DP>();  // Q, dY, K, V
}

// Grid (query tiles, H, B), the last query tile first. Warp w owns the queries i0 + 16w … + 15
// (a thread: rows gid and gid + 8) and walks the key tiles up to the diagonal in order:
// S = Q Kᵀ, dP = dY Vᵀ, dS = P ∘ (dP − D_i)/√D, dQ += dS K, one += into dqkv at the end.
template <int DP>
__global__ void __launch_bounds__(kTcWarps* kWarp)
    backward_q_tc_kernel(Shape s, const float* __restrict__ qkv, const float* __restrict__ dy,
                         const float* __restrict__ lse, const float* __restrict__ Di,
                         float* __restrict__ dqkv) {
  constexpr int kLd = DP + kTcPad, kKeyBlocks = kTcTile / 8, kDimBlocks = DP / 8;
  extern __shared__ __align__(16) unsigned char tc_smem[];
  bf16* Qs = reinterpret_cast<bf16*>(tc_smem);
  bf16* dYs = Qs + kTcTile * kLd;
  bf16* Ks = dYs + kTcTile * kLd;
  bf16* Vs = Ks + kTcTile * kLd;
  const int qt = gridDim.x - 1 - blockIdx.x, h = blockIdx.y, b = blockIdx.z, g = h / s.group;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, gid = lane / 4, tig = lane % 4;
  const int i0 = qt * kTcTile, rows = min(kTcTile, s.T - i0);
  stage_bf16<DP>(Qs, qkv + s.q_at(b, i0, h), s.ld, rows, s.D);
  stage_bf16<DP>(dYs, dy + s.y_at(b, i0, h), s.C, rows, s.D);
  const int my_rows[2] = {i0 + 16 * warp + gid, i0 + 16 * warp + gid + 8};
  float row_lse[2], row_D[2];
  for (int r = 0; r < 2; r++) {
    const bool real = my_rows[r] < s.T;
    row_lse[r] = real ? lse[s.stat_at(b, h, my_rows[r])] : 0.0f;
    row_D[r] = real ? Di[s.stat_at(b, h, my_rows[r])] : 0.0f;
  }
  float dq[kDimBlocks][4] = {};

  for (int j0 = 0; j0 <= i0; j0 += kTcTile) {
    __syncthreads();  // the previous tile's K and V are no longer read (and Q, dY are staged)
    const int keys = min(kTcTile, s.T - j0);
    stage_bf16<DP>(Ks, qkv + s.k_at(b, j0, g), s.ld, keys, s.D);
    stage_bf16<DP>(Vs, qkv + s.v_at(b, j0, g), s.ld, keys, s.D);
    __syncthreads();

    // P: 16 rows × 64 keys per warp, key j0 + 8nt + 2tig + (c & 1) in p[nt][c].
    float p[kKeyBlocks][4] = {};
    mma_rows_by_nk<DP>(p, Qs, Ks, kLd, 16 * warp);
#pragma unroll
    for (int nt = 0; nt < kKeyBlocks; nt++)
#pragma unroll
      for (int c = 0; c < 4; c++) {
        const int key = j0 + 8 * nt + 2 * tig + (c & 1), r = c / 2;
        const bool visible = key <= my_rows[r] && my_rows[r] < s.T;
        p[nt][c] = visible ? expf(p[nt][c] * s.scale - row_lse[r]) : 0.0f;
      }
    // dP = dY Vᵀ, then dS in place.
    float ds[kKeyBlocks][4] = {};
    mma_rows_by_nk<DP>(ds, dYs, Vs, kLd, 16 * warp);
#pragma unroll
    for (int nt = 0; nt < kKeyBlocks; nt++) {
#pragma unroll
      for (int c = 0; c < 4; c++) ds[nt][c] = p[nt][c] * (ds[nt][c] - row_D[c / 2]) * s.scale;
    }
    mma_accumulators_by_kn(dq, ds, Ks, kLd);  // dQ += dS K (k = the keys)
  }
#pragma unroll
  for (int nd = 0; nd < kDimBlocks; nd++)
#pragma unroll
    for (int c = 0; c < 4; c++) {
      const int i = my_rows[c / 2], d = 8 * nd + 2 * tig + (c & 1);
      if (i < s.T && d < s.D) dqkv[s.q_at(b, i, h) + d] += dq[nd][c];
    }
}

// ======================= per-row kernels: XSA, D_i, sinks, the cache =======================

constexpr int kRowWarps = 8;  // warps per block of the warp-per-row kernels

// The backward's prologue, a warp per (token, kv head), the group's query heads in order (under
// GQA they add into the same v, so one warp keeps that race-free and in a fixed order). With XSA,
// as ops::xsa_row_backward: g = ∂L/∂z in d_out becomes dy = g − α (g·u) u in place, the own-value
// gradient joins dqkv's v, dalpha gets −s (g·u). Then D_i = dy·y for the attention backward.
__global__ void __launch_bounds__(kRowWarps* kWarp)
    backward_prologue_kernel(Shape s, const ops::AttentionArgs<float> a, float* __restrict__ Di) {
  const bool exclusive = a.exclusive;
  const float* __restrict__ qkv = a.qkv;
  const float* __restrict__ y = a.y;
  float* __restrict__ d_out = a.d_out;
  const float* __restrict__ alpha = a.alpha;
  float* __restrict__ dalpha = exclusive ? a.dalpha : nullptr;
  float* __restrict__ dqkv = a.dqkv;
  const int task = blockIdx.x * kRowWarps + threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  if (task >= s.B * s.T * s.Hk) return;  // the whole warp
  const int n = task / s.Hk, g = task % s.Hk, b = n / s.T, t = n % s.T, D = s.D;
  for (int h = g * s.group; h < (g + 1) * s.group; h++) {
    const float* yr = y + s.y_at(b, t, h);
    float* gr = d_out + s.y_at(b, t, h);  // ∂L/∂z in, ∂L/∂y out (XSA)
    float dy_dot_y = 0.0f;
    if (exclusive) {
      const float* v = qkv + s.v_at(b, t, g);
      float* dv = dqkv + s.v_at(b, t, g);
      float vv = 0.0f, yv = 0.0f, gv = 0.0f;
      for (int d = lane; d < D; d += kWarp)
        vv += v[d] * v[d], yv += yr[d] * v[d], gv += gr[d] * v[d];
      vv = warp_sum(vv), yv = warp_sum(yv), gv = warp_sum(gv);
      const float a = alpha ? alpha[h] : 1.0f;
      const float raw_norm = sqrtf(vv);
      const bool degenerate = !(raw_norm > kXsaEpsilon);
      const float norm = degenerate ? kXsaEpsilon : raw_norm, inv_n = 1.0f / norm;
      const float su = yv * inv_n, gu = gv * inv_n;  // s = y·u, g·u
      const float au = degenerate ? 0.0f : -2.0f * a * su * gu;
      for (int d = lane; d < D; d += kWarp) {  // each lane reads and writes only its own d
        const float u = v[d] * inv_n, ad = -a * (su * gr[d] + gu * yr[d]);
        dv[d] += (ad - au * u) * inv_n;
        const float dyd = gr[d] - a * gu * u;
        gr[d] = dyd;
        dy_dot_y += dyd * yr[d];
      }
      if (dalpha && lane == 0) dalpha[s.token(b, t) * s.H + h] = -su * gu;
    } else {
      for (int d = lane; d < D; d += kWarp) dy_dot_y += gr[d] * yr[d];
    }
    dy_dot_y = warp_sum(dy_dot_y);
    if (lane == 0) Di[s.stat_at(b, h, t)] = dy_dot_y;
  }
}

constexpr int kSinkThreads = 256;

// dsink [B, H] (written): −Σ_i exp(b_h − lse_i) D_i, a block per (sequence, head), summed in a
// fixed order (strided per thread, then a tree).
__global__ void __launch_bounds__(kSinkThreads)
    sink_gradient_kernel(Shape s, const float* __restrict__ sink, const float* __restrict__ lse,
                         const float* __restrict__ Di, float* __restrict__ dsink) {
  __shared__ float partial[kSinkThreads];
  const int b = blockIdx.x / s.H, h = blockIdx.x % s.H;
  float sum = 0.0f;
  for (int t = threadIdx.x; t < s.T; t += kSinkThreads)
    sum += expf(sink[h] - lse[s.stat_at(b, h, t)]) * Di[s.stat_at(b, h, t)];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int half = kSinkThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) dsink[(size_t)b * s.H + h] = -partial[0];
}

// z = y − α (y·u) u per (token, head), a warp each (ops::xsa_forward). z may alias y: every lane
// reads its own elements before the warp sums and writes only those after them.
__global__ void __launch_bounds__(kRowWarps* kWarp)
    xsa_forward_kernel(Shape s, float* z, const float* y, const float* __restrict__ qkv,
                       const float* __restrict__ alpha) {
  const int task = blockIdx.x * kRowWarps + threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  if (task >= s.B * s.T * s.H) return;
  const int n = task / s.H, h = task % s.H;
  const int b = n / s.T, t = n % s.T, D = s.D;
  const float* yr = y + s.y_at(b, t, h);
  const float* v = qkv + s.v_at(b, t, h / s.group);
  float vv = 0.0f, yv = 0.0f;
  for (int d = lane; d < D; d += kWarp) vv += v[d] * v[d], yv += yr[d] * v[d];
  const float removal = xsa_removal(alpha ? alpha[h] : 1.0f, warp_sum(yv), warp_sum(vv));
  for (int d = lane; d < D; d += kWarp) z[s.y_at(b, t, h) + d] = yr[d] - removal * v[d];
}

constexpr int kCachedWarps = 4;

// The forward over a key/value cache (ops::attention_forward_cached), a warp per (row, head). The
// visible slots are three runs, in order: the prefix [0, prefix), the parent segment, the row's
// own segment up to itself. Chunks of 32 visible slots: a lane scores one slot, the online softmax
// takes the chunk, then every lane adds the chunk's p·v for its head dimensions lane + 32k.
template <int DPL>
__global__ void __launch_bounds__(kCachedWarps* kWarp)
    forward_cached_kernel(Shape s, const ops::AttentionArgs<float> a,
                          const ops::KvCache<float> cache, float* __restrict__ z) {
  const float* __restrict__ qkv = a.qkv;
  const float* __restrict__ k_cache = cache.k;
  const float* __restrict__ v_cache = cache.v;
  const int prefix = cache.prefix, slot0 = cache.slot0;
  const ops::SlotSpan* __restrict__ spans = cache.spans;
  float* __restrict__ y = a.y;
  const float* __restrict__ alpha = a.alpha;
  const float* __restrict__ sink = a.sink;
  __shared__ float q_rows[kCachedWarps][DPL * kWarp];
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int task = blockIdx.x * kCachedWarps + warp;
  if (task >= s.T * s.H) return;  // the whole warp; no block barrier below
  const int r = task / s.H, h = task % s.H, kv = (h / s.group) * s.D, D = s.D;
  float* q = q_rows[warp];
  for (int d = lane; d < D; d += kWarp) q[d] = qkv[s.q_at(0, r, h) + d];
  __syncwarp();

  const ops::SlotSpan span = spans ? spans[r] : ops::SlotSpan{0, 0, prefix};
  const int self = slot0 + r;
  const int run_start[3] = {0, span.parent_begin, span.first};
  const int run_length[3] = {prefix, max(0, span.parent_end - span.parent_begin),
                             max(0, self - span.first + 1)};
  const int visible = run_length[0] + run_length[1] + run_length[2];

  float m = sink ? sink[h] : -INFINITY, l = sink ? 1.0f : 0.0f, acc[DPL] = {};
  for (int j0 = 0; j0 < visible; j0 += kWarp) {
    // This lane's slot: the (j0 + lane)-th visible one.
    const int j = j0 + lane;
    int slot = 0;
    if (j < run_length[0])
      slot = run_start[0] + j;
    else if (j < run_length[0] + run_length[1])
      slot = run_start[1] + (j - run_length[0]);
    else
      slot = run_start[2] + (j - run_length[0] - run_length[1]);
    float score = -INFINITY;
    if (j < visible) {
      const float* k = k_cache + (size_t)slot * s.Ck + kv;
      float dot = 0.0f;
      for (int d = 0; d < D; d++) dot += q[d] * k[d];
      score = dot * s.scale;
    }
    const float new_max = fmaxf(m, warp_max(score));
    const float base = softmax_base(new_max);
    const float p = expf(score - base), correction = expf(m - base);
    l = l * correction + warp_sum(p);
    m = new_max;
#pragma unroll
    for (int k = 0; k < DPL; k++) acc[k] *= correction;
    const int count = min(kWarp, visible - j0);
    for (int jj = 0; jj < count; jj++) {
      const float pj = __shfl_sync(kFullMask, p, jj);
      const int slot_j = __shfl_sync(kFullMask, slot, jj);
      const float* v = v_cache + (size_t)slot_j * s.Ck + kv;
#pragma unroll
      for (int k = 0; k < DPL; k++) {
        const int d = lane + kWarp * k;
        if (d < D) acc[k] += pj * v[d];
      }
    }
  }

  const float inv_l = 1.0f / l;
  float yd[DPL];
#pragma unroll
  for (int k = 0; k < DPL; k++) {
    const int d = lane + kWarp * k;
    yd[k] = acc[k] * inv_l;
    if (d < D) y[s.y_at(0, r, h) + d] = yd[k];
  }
  if (z) {  // XSA: the own value is the cache entry this row wrote
    const float* v = v_cache + (size_t)self * s.Ck + kv;
    float vv = 0.0f, yv = 0.0f;
#pragma unroll
    for (int k = 0; k < DPL; k++) {
      const int d = lane + kWarp * k;
      const float vd = d < D ? v[d] : 0.0f;
      vv += vd * vd, yv += yd[k] * vd;
    }
    const float removal = xsa_removal(alpha ? alpha[h] : 1.0f, warp_sum(yv), warp_sum(vv));
#pragma unroll
    for (int k = 0; k < DPL; k++) {
      const int d = lane + kWarp * k;
      if (d < D) z[s.y_at(0, r, h) + d] = yd[k] - removal * v[d];
    }
  }
}

// ======================= host side =======================

int ceil_div(int a, int b) {
  return (a + b - 1) / b;
}

// The shape of a launch, for launch.h's errors.
std::string shape_text(const Shape& s) {
  return "B " + std::to_string(s.B) + " T " + std::to_string(s.T) + " H " + std::to_string(s.H) +
         " Hkv " + std::to_string(s.Hk) + " D " + std::to_string(s.D);
}
#define XSA_KERNEL_LAUNCHED(name) launched(stream, name, [&] { return shape_text(s); })
#define XSA_FIT_SHARED(kernel, max_bytes, launch_bytes, name)                             \
  fit_shared_memory(reinterpret_cast<const void*>(kernel), max_bytes, launch_bytes, name, \
                    [&] { return shape_text(s); })

// A shape outside what these kernels cover (D > 256) is reported the CUDA way: a launch with an
// empty grid fails with cudaErrorInvalidConfiguration, which the caller's cudaGetLastError returns.
__global__ void unsupported_shape_kernel() {}
void report_unsupported(cudaStream_t stream) {
  unsupported_shape_kernel<<<0, 1, 0, stream>>>();
}

// The tensor-core kernels' head sizes: D a multiple of 8 (the fragments' column pairs and the
// float4 loads), padded to DP ≤ 128 (above, the accumulators would spill).
bool tensor_core_shape(const Shape& s) {
  return s.D % 8 == 0 && s.D <= 128;
}
int padded_head(int D) {
  return D <= 16 ? 16 : D <= 32 ? 32 : D <= 64 ? 64 : 128;
}
bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}
// Head dimensions per lane of the fp32 and cached kernels (a power of two up to 8).
int dims_per_lane(int D) {
  return D <= 32 ? 1 : D <= 64 ? 2 : D <= 128 ? 4 : 8;
}

template <int DPL>
void launch_forward_fp32(const Shape& s, const ops::AttentionArgs<float>& args, float* z,
                         cudaStream_t stream) {
  XSA_FIT_SHARED(&forward_fp32_kernel<DPL>, Fp32ForwardSmem::bytes(DPL * kWarp),
                 Fp32ForwardSmem::bytes(s.D), "forward_fp32_kernel");
  const dim3 grid(ceil_div(s.T, kFwdRows), s.H, s.B);
  forward_fp32_kernel<DPL><<<grid, kFwdWarps * kWarp, Fp32ForwardSmem::bytes(s.D), stream>>>(
      s, args.qkv, args.y, z, args.lse, args.alpha, args.sink);
  XSA_KERNEL_LAUNCHED("forward_fp32_kernel");
}

template <int DP>
void launch_forward_tc(const Shape& s, const ops::AttentionArgs<float>& args, float* z,
                       cudaStream_t stream) {
  XSA_FIT_SHARED(&forward_tc_kernel<DP>, forward_tc_bytes<DP>(), forward_tc_bytes<DP>(),
                 "forward_tc_kernel");
  const dim3 grid(ceil_div(s.T, kTcTile), s.H, s.B);
  forward_tc_kernel<DP><<<grid, kTcWarps * kWarp, forward_tc_bytes<DP>(), stream>>>(
      s, args.qkv, args.y, z, args.lse, args.alpha, args.sink);
  XSA_KERNEL_LAUNCHED("forward_tc_kernel");
}

template <bool kAtomicDq>
void launch_backward_kv_fp32(const Shape& s, const ops::AttentionArgs<float>& args, const float* Di,
                             cudaStream_t stream) {
  XSA_FIT_SHARED(&backward_kv_fp32_kernel<kAtomicDq>, Fp32BackwardSmem::bytes(kMaxHead),
                 Fp32BackwardSmem::bytes(s.D), "backward_kv_fp32_kernel");
  const dim3 grid(ceil_div(s.T, kBwdTile), s.Hk, s.B);
  backward_kv_fp32_kernel<kAtomicDq>
      <<<grid, kBwdWarps * kWarp, Fp32BackwardSmem::bytes(s.D), stream>>>(s, args.qkv, args.d_out,
                                                                          args.lse, Di, args.dqkv);
  XSA_KERNEL_LAUNCHED("backward_kv_fp32_kernel");
}

void launch_backward_q_fp32(const Shape& s, const ops::AttentionArgs<float>& args, const float* Di,
                            cudaStream_t stream) {
  XSA_FIT_SHARED(&backward_q_fp32_kernel, Fp32BackwardSmem::bytes(kMaxHead),
                 Fp32BackwardSmem::bytes(s.D), "backward_q_fp32_kernel");
  const dim3 grid(ceil_div(s.T, kBwdTile), s.H, s.B);
  backward_q_fp32_kernel<<<grid, kBwdWarps * kWarp, Fp32BackwardSmem::bytes(s.D), stream>>>(
      s, args.qkv, args.d_out, args.lse, Di, args.dqkv);
  XSA_KERNEL_LAUNCHED("backward_q_fp32_kernel");
}

template <int DP>
void launch_backward_tc(const Shape& s, const ops::AttentionArgs<float>& args, bool deterministic,
                        const float* Di, cudaStream_t stream) {
  const dim3 kv_grid(ceil_div(s.T, kTcTile), s.Hk, s.B);
  if (deterministic) {
    XSA_FIT_SHARED((&backward_kv_tc_kernel<DP, false>), backward_kv_tc_bytes<DP>(),
                   backward_kv_tc_bytes<DP>(), "backward_kv_tc_kernel");
    XSA_FIT_SHARED(&backward_q_tc_kernel<DP>, backward_q_tc_bytes<DP>(), backward_q_tc_bytes<DP>(),
                   "backward_q_tc_kernel");
    backward_kv_tc_kernel<DP, false>
        <<<kv_grid, kTcWarps * kWarp, backward_kv_tc_bytes<DP>(), stream>>>(
            s, args.qkv, args.d_out, args.lse, Di, args.dqkv);
    XSA_KERNEL_LAUNCHED("backward_kv_tc_kernel (deterministic)");
    const dim3 q_grid(ceil_div(s.T, kTcTile), s.H, s.B);
    backward_q_tc_kernel<DP><<<q_grid, kTcWarps * kWarp, backward_q_tc_bytes<DP>(), stream>>>(
        s, args.qkv, args.d_out, args.lse, Di, args.dqkv);
    XSA_KERNEL_LAUNCHED("backward_q_tc_kernel");
  } else {
    XSA_FIT_SHARED((&backward_kv_tc_kernel<DP, true>), backward_kv_tc_bytes<DP>(),
                   backward_kv_tc_bytes<DP>(), "backward_kv_tc_kernel");
    backward_kv_tc_kernel<DP, true>
        <<<kv_grid, kTcWarps * kWarp, backward_kv_tc_bytes<DP>(), stream>>>(
            s, args.qkv, args.d_out, args.lse, Di, args.dqkv);
    XSA_KERNEL_LAUNCHED("backward_kv_tc_kernel");
  }
}

template <int DPL>
void launch_forward_cached(const Shape& s, const ops::AttentionArgs<float>& args,
                           const ops::KvCache<float>& cache, float* z, cudaStream_t stream) {
  const int blocks = ceil_div(s.T * s.H, kCachedWarps);
  forward_cached_kernel<DPL><<<blocks, kCachedWarps * kWarp, 0, stream>>>(s, args, cache, z);
  XSA_KERNEL_LAUNCHED("forward_cached_kernel");
}

}  // namespace

void attention_forward(const ops::AttentionArgs<float>& args, bool bf16_products,
                       cudaStream_t stream) {
  if (args.B <= 0 || args.T <= 0 || args.H <= 0) return;
  const Shape s = make_shape(args.B, args.T, args.C, args.H, args.Hkv);
  float* z = args.exclusive ? args.z.data : nullptr;
  if (bf16_products && tensor_core_shape(s) && aligned16(args.qkv)) {
    switch (padded_head(s.D)) {
      case 16:
        return launch_forward_tc<16>(s, args, z, stream);
      case 32:
        return launch_forward_tc<32>(s, args, z, stream);
      case 64:
        return launch_forward_tc<64>(s, args, z, stream);
      default:
        return launch_forward_tc<128>(s, args, z, stream);
    }
  }
  if (s.D > kMaxHead) return report_unsupported(stream);
  switch (dims_per_lane(s.D)) {
    case 1:
      return launch_forward_fp32<1>(s, args, z, stream);
    case 2:
      return launch_forward_fp32<2>(s, args, z, stream);
    case 4:
      return launch_forward_fp32<4>(s, args, z, stream);
    default:
      return launch_forward_fp32<8>(s, args, z, stream);
  }
}

size_t attention_backward_workspace(const ops::AttentionArgs<float>& args, bool deterministic) {
  (void)deterministic;  // both paths need only D_i [B, H, T]
  return (size_t)args.B * args.H * args.T;
}

void attention_backward(const ops::AttentionArgs<float>& args, bool bf16_products,
                        bool deterministic, float* workspace, cudaStream_t stream) {
  if (args.B <= 0 || args.T <= 0 || args.H <= 0) return;
  const Shape s = make_shape(args.B, args.T, args.C, args.H, args.Hkv);
  if (s.D > kMaxHead) return report_unsupported(stream);
  float* Di = workspace;  // [B, H, T]
  // 0. A dqkv to be written starts from zeros: the kernels below add into it. A failure shows in
  // the launch check after this call, as the kernels' do.
  if (args.write_dqkv)
    cudaMemsetAsync(args.dqkv, 0, s.token(s.B, 0) * s.ld * sizeof(float), stream);
  // 1. XSA's backward (d_out becomes ∂L/∂y, the own-value gradient, dalpha) and D_i.
  const int prologue_blocks = ceil_div(s.B * s.T * s.Hk, kRowWarps);
  backward_prologue_kernel<<<prologue_blocks, kRowWarps * kWarp, 0, stream>>>(s, args, Di);
  XSA_KERNEL_LAUNCHED("backward_prologue_kernel");
  // 2. The sinks' gradient.
  if (args.sink) {
    sink_gradient_kernel<<<s.B * s.H, kSinkThreads, 0, stream>>>(s, args.sink, args.lse, Di,
                                                                 args.dsink);
    XSA_KERNEL_LAUNCHED("sink_gradient_kernel");
  }
  // 3. dK, dV and dQ.
  if (bf16_products && tensor_core_shape(s) && aligned16(args.qkv) && aligned16(args.d_out)) {
    switch (padded_head(s.D)) {
      case 16:
        return launch_backward_tc<16>(s, args, deterministic, Di, stream);
      case 32:
        return launch_backward_tc<32>(s, args, deterministic, Di, stream);
      case 64:
        return launch_backward_tc<64>(s, args, deterministic, Di, stream);
      default:
        return launch_backward_tc<128>(s, args, deterministic, Di, stream);
    }
  }
  if (deterministic) {
    launch_backward_kv_fp32<false>(s, args, Di, stream);
    launch_backward_q_fp32(s, args, Di, stream);
  } else {
    launch_backward_kv_fp32<true>(s, args, Di, stream);
  }
}

void attention_forward_cached(const ops::AttentionArgs<float>& args,
                              const ops::KvCache<float>& cache, cudaStream_t stream) {
  if (args.T <= 0 || args.H <= 0) return;
  const Shape s = make_shape(1, args.T, args.C, args.H, args.Hkv);  // one sequence (B = 1)
  if (s.D > kMaxHead) return report_unsupported(stream);
  float* z = args.exclusive ? args.z.data : nullptr;
  switch (dims_per_lane(s.D)) {
    case 1:
      return launch_forward_cached<1>(s, args, cache, z, stream);
    case 2:
      return launch_forward_cached<2>(s, args, cache, z, stream);
    case 4:
      return launch_forward_cached<4>(s, args, cache, z, stream);
    default:
      return launch_forward_cached<8>(s, args, cache, z, stream);
  }
}

void xsa_forward(const ops::AttentionArgs<float>& a, cudaStream_t stream) {
  if (a.B <= 0 || a.T <= 0 || a.H <= 0) return;
  const Shape s = make_shape(a.B, a.T, a.C, a.H, a.Hkv);
  const int blocks = ceil_div(a.B * a.T * a.H, kRowWarps);
  xsa_forward_kernel<<<blocks, kRowWarps * kWarp, 0, stream>>>(s, a.z.data, a.y, a.qkv, a.alpha);
  XSA_KERNEL_LAUNCHED("xsa_forward_kernel");
}

}  // namespace xsa::cuda

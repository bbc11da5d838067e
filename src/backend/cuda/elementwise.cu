// Embeddings, biases, GELU, RoPE, AdamW, gates and sinks: the memory-bound kernels of a training
// step, each the twin of its CPU kernel in ops/ (or backend/cpu_backend.cpp for gates and sinks).
// Elementwise kernels move four floats at a time when every pointer they touch is 16-byte
// aligned (a per-element result never depends on that). Reductions run in a fixed order.
#include <algorithm>
#include <cmath>

#include "xsa/backend/cuda/common.cuh"
#include "xsa/backend/cuda/kernels.h"

namespace xsa::cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float4 add4(float4 a, float4 b) {
  return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}

// ---- embeddings ----

// One block per output row; threads across its columns. Also gather_rows (accumulate false).
constexpr int kRowThreads = 128;

__global__ void embedding_forward_kernel(float* out, const int32_t* index, const float* table,
                                         int C, bool accumulate, bool vectorized) {
  const size_t n = blockIdx.x;
  float* dst = out + n * C;
  const float* src = table + (size_t)index[n] * C;
  if (vectorized) {
    float4* dst4 = reinterpret_cast<float4*>(dst);
    const float4* src4 = reinterpret_cast<const float4*>(src);
    for (int q = threadIdx.x; q < C / 4; q += blockDim.x)
      dst4[q] = accumulate ? add4(dst4[q], src4[q]) : src4[q];
  } else {
    for (int c = threadIdx.x; c < C; c += blockDim.x)
      dst[c] = accumulate ? dst[c] + src[c] : src[c];
  }
}

// dst row r += src row r, `width` values (rows dst_stride and src_stride apart): one block per
// row, threads across its columns, one rounding each as ops::add_rows.
__global__ void add_rows_kernel(float* dst, size_t dst_stride, const float* src, size_t src_stride,
                                int width) {
  float* d = dst + (size_t)blockIdx.x * dst_stride;
  const float* s = src + (size_t)blockIdx.x * src_stride;
  for (int c = threadIdx.x; c < width; c += blockDim.x) d[c] += s[c];
}

// One block per group (a table row): each column adds its rows in the order given, starting from
// the table's gradient — the same additions, in the same order, as ops::encoder_backward.
__global__ void embedding_backward_kernel(float* dtable, const float* dout, const int32_t* rows,
                                          const int32_t* starts, const int32_t* table_row, int C,
                                          bool vectorized) {
  const int g = blockIdx.x;
  const int begin = starts[g], end = starts[g + 1];
  float* dst = dtable + (size_t)table_row[g] * C;
  if (vectorized) {
    float4* dst4 = reinterpret_cast<float4*>(dst);
    for (int q = threadIdx.x; q < C / 4; q += blockDim.x) {
      float4 acc = dst4[q];
      for (int r = begin; r < end; r++)
        acc = add4(acc, reinterpret_cast<const float4*>(dout + (size_t)rows[r] * C)[q]);
      dst4[q] = acc;
    }
  } else {
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
      float acc = dst[c];
      for (int r = begin; r < end; r++) acc += dout[(size_t)rows[r] * C + c];
      dst[c] = acc;
    }
  }
}

// ---- biases ----

__global__ void bias_forward_kernel(float* out, const float* bias, size_t total, int D,
                                    bool vectorized) {
  const size_t stride = grid_threads();
  if (vectorized) {  // D % 4 == 0, so a quad never straddles two rows
    const int quads_per_row = D / 4;
    float4* out4 = reinterpret_cast<float4*>(out);
    const float4* bias4 = reinterpret_cast<const float4*>(bias);
    for (size_t q = global_thread(); q < total / 4; q += stride)
      out4[q] = add4(out4[q], bias4[q % quads_per_row]);
  } else {
    for (size_t i = global_thread(); i < total; i += stride) out[i] += bias[i % D];
  }
}

// dbias: a tile of 32 columns × kPartialLanes row lanes per block; block (chunk, tile) sums the
// chunk's rows (lane y takes rows y, y + kPartialLanes, …) in double, the lanes are added in lane
// order into one partial per (chunk, column), and a second kernel adds the partials in chunk order.

__global__ void bias_partials_kernel(double* partials, const float* dout, int N, int D) {
  __shared__ double lane_sums[kPartialLanes][kTileColumns];
  const int col = blockIdx.y * kTileColumns + threadIdx.x;
  const int row_begin = blockIdx.x * kChunkRows, row_end = min(N, row_begin + kChunkRows);
  double sum = 0;
  if (col < D)
    for (int r = row_begin + threadIdx.y; r < row_end; r += kPartialLanes)
      sum += dout[(size_t)r * D + col];
  lane_sums[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && col < D) {
    double chunk_sum = 0;
    for (int y = 0; y < kPartialLanes; y++) chunk_sum += lane_sums[y][threadIdx.x];
    partials[(size_t)blockIdx.x * D + col] = chunk_sum;
  }
}

__global__ void bias_finish_kernel(float* dbias, const double* partials, int chunks, int D) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (col >= D) return;
  double sum = 0;
  for (int k = 0; k < chunks; k++) sum += partials[(size_t)k * D + col];
  dbias[col] += (float)sum;
}

// ---- GELU, tanh approximation (ops/gelu.cpp; tanhf here, ops' fast_tanh there: ~1e-7 apart) ----

constexpr float kSqrt2OverPi = (float)0.7978845608028654;
constexpr float kGeluCubic = 0.044715f;
constexpr float kGeluCubicSlope = (float)(3 * 0.044715);

__device__ __forceinline__ float gelu(float x) {
  return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + kGeluCubic * x * x * x)));
}

// gelu'(x) · g: 0.5 (1 + tanh u) + 0.5 x sech²(u) √(2/π) (1 + 3·0.044715 x²), as ops.
__device__ __forceinline__ float gelu_grad(float x, float g) {
  const float th = tanhf(kSqrt2OverPi * (x + kGeluCubic * x * x * x));
  const float sech2 = 1.0f - th * th;
  return (0.5f * (1.0f + th) + 0.5f * x * sech2 * kSqrt2OverPi * (1.0f + kGeluCubicSlope * x * x)) *
         g;
}

__global__ void gelu_forward_kernel(float* out, const float* inp, size_t n, bool vectorized) {
  const size_t stride = grid_threads();
  const size_t quads = vectorized ? n / 4 : 0;
  for (size_t q = global_thread(); q < quads; q += stride) {
    const float4 x = reinterpret_cast<const float4*>(inp)[q];
    reinterpret_cast<float4*>(out)[q] = make_float4(gelu(x.x), gelu(x.y), gelu(x.z), gelu(x.w));
  }
  for (size_t i = quads * 4 + global_thread(); i < n; i += stride) out[i] = gelu(inp[i]);
}

__global__ void gelu_backward_kernel(float* dinp, const float* inp, const float* dout, size_t n,
                                     bool vectorized) {
  const size_t stride = grid_threads();
  const size_t quads = vectorized ? n / 4 : 0;
  for (size_t q = global_thread(); q < quads; q += stride) {
    const float4 x = reinterpret_cast<const float4*>(inp)[q];
    const float4 g = reinterpret_cast<const float4*>(dout)[q];
    reinterpret_cast<float4*>(dinp)[q] = make_float4(gelu_grad(x.x, g.x), gelu_grad(x.y, g.y),
                                                     gelu_grad(x.z, g.z), gelu_grad(x.w, g.w));
  }
  for (size_t i = quads * 4 + global_thread(); i < n; i += stride)
    dinp[i] = gelu_grad(inp[i], dout[i]);
}

// ---- ReLU² (ops/gelu.cpp) ----

__global__ void relu2_forward_kernel(float* out, const float* inp, size_t n) {
  for (size_t i = global_thread(); i < n; i += grid_threads()) {
    const float x = fmaxf(inp[i], 0.0f);
    out[i] = x * x;
  }
}

__global__ void relu2_backward_kernel(float* dinp, const float* inp, const float* dout, size_t n) {
  for (size_t i = global_thread(); i < n; i += grid_threads())
    dinp[i] = 2.0f * fmaxf(inp[i], 0.0f) * dout[i];
}

// ---- Muon's elementwise steps (ops/muon.cpp): each element as the CPU computes it ----

__global__ void muon_momentum_kernel(float* m, float* u, const float* grad, size_t n, float beta,
                                     float rest, float scale) {
  for (size_t i = global_thread(); i < n; i += grid_threads()) {
    const float g = __fmul_rn(grad[i], scale);
    m[i] = __fadd_rn(__fmul_rn(beta, m[i]), __fmul_rn(rest, g));
    u[i] = __fadd_rn(__fmul_rn(rest, g), __fmul_rn(beta, m[i]));
  }
}

__global__ void newton_schulz_poly_kernel(float* poly, const float* gram, const float* gram2, int k,
                                          float a, float b, float c) {
  const size_t n = (size_t)k * k;
  for (size_t i = global_thread(); i < n; i += grid_threads()) {
    const float diagonal = i / k == i % k ? a : 0.0f;
    poly[i] = __fadd_rn(__fadd_rn(__fmul_rn(b, gram[i]), __fmul_rn(c, gram2[i])), diagonal);
  }
}

__global__ void muon_apply_kernel(float* w, const float* o, size_t n, float keep, float step) {
  for (size_t i = global_thread(); i < n; i += grid_threads())
    w[i] = __fsub_rn(__fmul_rn(w[i], keep), __fmul_rn(step, o[i]));
}

// ---- RoPE, rotate-half pairing over the whole head (ops/rope.cpp) ----

// One thread per rotated pair (j, j + D/2) of one (token, head); q's H heads then k's Hkv heads
// are adjacent in a qkv row, so head hh (of H + Hkv) starts at column hh·D. direction −1 rotates
// by −angle (the backward).
// The rotation's layout: `pairs` (j, j + D/2) pairs over B·T rows of `heads` heads (q's, then
// k's), rows `row_width` apart.
struct RopeLayout {
  size_t pairs;
  int T, D, heads, row_width;
  float direction;
};

__global__ void rope_kernel(float* qkv, const float* cos, const float* sin, RopeLayout l) {
  const size_t pairs = l.pairs;
  const int T = l.T, D = l.D, heads = l.heads, row_width = l.row_width;
  const float direction = l.direction;
  const int half = D / 2;
  for (size_t i = global_thread(); i < pairs; i += grid_threads()) {
    const int j = (int)(i % half);
    const size_t head_row = i / half;
    const int head = (int)(head_row % heads);
    const size_t row = head_row / heads;  // b·T + t
    const size_t angle = (row % T) * half + j;
    float* x = qkv + row * row_width + (size_t)head * D;
    const float lo = x[j], hi = x[j + half], c = cos[angle], s = direction * sin[angle];
    x[j] = lo * c - hi * s;
    x[j + half] = hi * c + lo * s;
  }
}

void rope(float* qkv, const ops::RopeArgs<float>& a, float direction, cudaStream_t stream) {
  const int Hk = a.Hkv > 0 ? a.Hkv : a.H, D = a.C / a.H, heads = a.H + Hk;
  const size_t pairs = (size_t)a.B * a.T * heads * (D / 2);
  if (pairs == 0) return;
  rope_kernel<<<grid_stride_blocks(pairs, kThreads), kThreads, 0, stream>>>(
      qkv, a.cos, a.sin, RopeLayout{pairs, a.T, D, heads, a.C + 2 * Hk * D, direction});
}

// ---- AdamW (ops/adamw.cpp): the same float constants, made on the host in double ----

struct AdamWConstants {
  float decay, step_size, beta1, beta2, one_minus_beta1, one_minus_beta2, eps, grad_scale,
      inv_bias2_sqrt;
};

__device__ __forceinline__ void adamw_one(float& p, float grad, float& m, float& v,
                                          const AdamWConstants& k) {
  const float g = grad * k.grad_scale;
  m = k.beta1 * m + k.one_minus_beta1 * g;
  v = k.beta2 * v + k.one_minus_beta2 * g * g;
  const float denom = sqrtf(v) * k.inv_bias2_sqrt + k.eps;
  p = p * k.decay - k.step_size * m / denom;
}

__global__ void adamw_kernel(float* param, const float* grad, float* m, float* v, size_t n,
                             AdamWConstants k, bool vectorized) {
  const size_t stride = grid_threads();
  const size_t quads = vectorized ? n / 4 : 0;
  for (size_t q = global_thread(); q < quads; q += stride) {
    float4 p4 = reinterpret_cast<float4*>(param)[q];
    float4 m4 = reinterpret_cast<float4*>(m)[q];
    float4 v4 = reinterpret_cast<float4*>(v)[q];
    const float4 g4 = reinterpret_cast<const float4*>(grad)[q];
    adamw_one(p4.x, g4.x, m4.x, v4.x, k);
    adamw_one(p4.y, g4.y, m4.y, v4.y, k);
    adamw_one(p4.z, g4.z, m4.z, v4.z, k);
    adamw_one(p4.w, g4.w, m4.w, v4.w, k);
    reinterpret_cast<float4*>(param)[q] = p4;
    reinterpret_cast<float4*>(m)[q] = m4;
    reinterpret_cast<float4*>(v)[q] = v4;
  }
  for (size_t i = quads * 4 + global_thread(); i < n; i += stride)
    adamw_one(param[i], grad[i], m[i], v[i], k);
}

// ---- gates and sinks (backend/cpu_backend.cpp) ----

__global__ void xsa_alpha_kernel(float* alpha, const float* w, int H) {
  const int h = blockIdx.x * blockDim.x + threadIdx.x;
  if (h < H) alpha[h] = tanhf(w[h]);
}

// One block per head: thread t sums rows t, t + blockDim, … in double, then a fixed tree.
__global__ void xsa_alpha_backward_kernel(float* dw, const float* dalpha, const float* alpha, int N,
                                          int H) {
  __shared__ double warp_sums[kThreads / 32];
  const int h = blockIdx.x;
  double sum = 0;
  for (int n = threadIdx.x; n < N; n += blockDim.x) sum += dalpha[(size_t)n * H + h];
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0;
    for (int w = 0; w < kThreads / 32; w++) total += warp_sums[w];
    const double a = alpha[h];
    dw[h] += (float)((1.0 - a * a) * total);  // α = tanh(w): ∂α/∂w = 1 − α²
  }
}

// One thread per head, batches in order, in float from dsink's value: the CPU's additions.
__global__ void sink_backward_kernel(float* dsink, const float* dlogit, int B, int H) {
  const int h = blockIdx.x * blockDim.x + threadIdx.x;
  if (h >= H) return;
  float acc = dsink[h];
  for (int b = 0; b < B; b++) acc += dlogit[(size_t)b * H + h];
  dsink[h] = acc;
}

unsigned blocks_of(int n, int threads) {
  return (unsigned)((n + threads - 1) / threads);
}

}  // namespace

void embedding_forward(float* out, const int32_t* index, const float* table, int N, int C,
                       bool accumulate, cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  const bool vectorized = C % 4 == 0 && aligned16(out) && aligned16(table);
  embedding_forward_kernel<<<N, kRowThreads, 0, stream>>>(out, index, table, C, accumulate,
                                                          vectorized);
}

void gather_rows(float* dst, const float* table, const int32_t* index, int n, int width,
                 cudaStream_t stream) {
  embedding_forward(dst, index, table, n, width, false, stream);
}

void add_rows(float* dst, size_t dst_stride, const float* src, size_t src_stride, int rows,
              int width, cudaStream_t stream) {
  if (rows <= 0 || width <= 0) return;
  add_rows_kernel<<<rows, kRowThreads, 0, stream>>>(dst, dst_stride, src, src_stride, width);
}

void embedding_backward(float* dtable, const float* dout, const int32_t* rows,
                        const int32_t* starts, const int32_t* table_row, int groups, int C,
                        cudaStream_t stream) {
  if (groups <= 0 || C <= 0) return;
  const bool vectorized = C % 4 == 0 && aligned16(dtable) && aligned16(dout);
  embedding_backward_kernel<<<groups, kRowThreads, 0, stream>>>(dtable, dout, rows, starts,
                                                                table_row, C, vectorized);
}

void bias_forward(float* out, const float* bias, int N, int D, cudaStream_t stream) {
  if (N <= 0 || D <= 0) return;
  const size_t total = (size_t)N * D;
  const bool vectorized = D % 4 == 0 && aligned16(out) && aligned16(bias);
  bias_forward_kernel<<<grid_stride_blocks(vectorized ? total / 4 : total, kThreads), kThreads, 0,
                        stream>>>(out, bias, total, D, vectorized);
}

size_t bias_backward_scratch(int N, int D) {
  if (N <= 0 || D <= 0) return 0;
  return 2 * (size_t)row_chunks(N) * D + 1;  // doubles, plus one float to reach 8-byte alignment
}

void bias_backward(float* dbias, const float* dout, int N, int D, float* scratch,
                   cudaStream_t stream) {
  if (N <= 0 || D <= 0) return;
  double* partials = as_doubles(scratch);
  const int chunks = row_chunks(N);
  const dim3 grid(chunks, (D + kTileColumns - 1) / kTileColumns);
  bias_partials_kernel<<<grid, dim3(kTileColumns, kPartialLanes), 0, stream>>>(partials, dout, N,
                                                                               D);
  bias_finish_kernel<<<blocks_of(D, kThreads), kThreads, 0, stream>>>(dbias, partials, chunks, D);
}

void gelu_forward(float* out, const float* inp, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  const bool vectorized = aligned16(out) && aligned16(inp);
  gelu_forward_kernel<<<grid_stride_blocks(vectorized ? n / 4 + 1 : n, kThreads), kThreads, 0,
                        stream>>>(out, inp, n, vectorized);
}

void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n,
                   cudaStream_t stream) {
  if (n == 0) return;
  const bool vectorized = aligned16(dinp) && aligned16(inp) && aligned16(dout);
  gelu_backward_kernel<<<grid_stride_blocks(vectorized ? n / 4 + 1 : n, kThreads), kThreads, 0,
                         stream>>>(dinp, inp, dout, n, vectorized);
}

void relu2_forward(float* out, const float* inp, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  relu2_forward_kernel<<<grid_stride_blocks(n, kThreads), kThreads, 0, stream>>>(out, inp, n);
}

void relu2_backward(float* dinp, const float* inp, const float* dout, size_t n,
                    cudaStream_t stream) {
  if (n == 0) return;
  relu2_backward_kernel<<<grid_stride_blocks(n, kThreads), kThreads, 0, stream>>>(dinp, inp, dout,
                                                                                  n);
}

void muon_momentum(float* m, float* u, const float* grad, size_t n, const ops::MuonSettings& s,
                   cudaStream_t stream) {
  if (n == 0) return;
  muon_momentum_kernel<<<grid_stride_blocks(n, kThreads), kThreads, 0, stream>>>(
      m, u, grad, n, (float)s.momentum, (float)(1 - s.momentum), (float)s.grad_scale);
}

void newton_schulz_poly(float* poly, const float* gram, const float* gram2, int k,
                        const ops::NewtonSchulzCoefficients& c, cudaStream_t stream) {
  if (k <= 0) return;
  newton_schulz_poly_kernel<<<grid_stride_blocks((size_t)k * k, kThreads), kThreads, 0, stream>>>(
      poly, gram, gram2, k, (float)c.a, (float)c.b, (float)c.c);
}

void muon_apply(float* w, const float* o, size_t n, const ops::MuonSettings& s,
                cudaStream_t stream) {
  if (n == 0) return;
  muon_apply_kernel<<<grid_stride_blocks(n, kThreads), kThreads, 0, stream>>>(
      w, o, n, (float)s.keep, (float)s.step);
}

void rope_forward(float* qkv, const ops::RopeArgs<float>& args, cudaStream_t stream) {
  rope(qkv, args, 1.0f, stream);
}

void rope_backward(float* dqkv, const ops::RopeArgs<float>& args, cudaStream_t stream) {
  // The rotation is orthogonal: its transpose is the rotation by −angle.
  rope(dqkv, args, -1.0f, stream);
}

void adamw_update(float* param, const float* grad, float* m, float* v, size_t n,
                  const ops::AdamWSettings& s, cudaStream_t stream) {
  if (n == 0) return;
  // As ops::adamw_update: bias corrections in double, then every constant rounded to float once.
  const double bias1 = 1.0 - std::pow(s.beta1, (double)s.step);
  const double bias2_sqrt = std::sqrt(1.0 - std::pow(s.beta2, (double)s.step));
  AdamWConstants k;
  k.decay = (float)(1.0 - s.lr * s.weight_decay);
  k.step_size = (float)(s.lr / bias1);
  k.beta1 = (float)s.beta1;
  k.beta2 = (float)s.beta2;
  k.one_minus_beta1 = 1.0f - k.beta1;  // in float, as the CPU's Real(1) − b1
  k.one_minus_beta2 = 1.0f - k.beta2;
  k.eps = (float)s.eps;
  k.grad_scale = (float)s.grad_scale;
  k.inv_bias2_sqrt = (float)(1.0 / bias2_sqrt);
  const bool vectorized = aligned16(param) && aligned16(grad) && aligned16(m) && aligned16(v);
  adamw_kernel<<<grid_stride_blocks(vectorized ? n / 4 + 1 : n, kThreads), kThreads, 0, stream>>>(
      param, grad, m, v, n, k, vectorized);
}

void xsa_alpha(float* alpha, const float* w, int H, cudaStream_t stream) {
  if (H <= 0) return;
  xsa_alpha_kernel<<<blocks_of(H, kThreads), kThreads, 0, stream>>>(alpha, w, H);
}

void xsa_alpha_backward(float* dw, const float* dalpha, const float* alpha, int N, int H,
                        cudaStream_t stream) {
  if (H <= 0 || N <= 0) return;  // N = 0 adds (1 − α²)·0: nothing
  xsa_alpha_backward_kernel<<<H, kThreads, 0, stream>>>(dw, dalpha, alpha, N, H);
}

void sink_backward(float* dsink, const float* dlogit, int B, int H, cudaStream_t stream) {
  if (H <= 0 || B <= 0) return;
  sink_backward_kernel<<<blocks_of(H, kThreads), kThreads, 0, stream>>>(dsink, dlogit, B, H);
}

}  // namespace xsa::cuda

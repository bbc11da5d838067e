// LayerNorm with weight and bias, eps 1e-5, as ops/layernorm.cpp: the row statistics in double
// (the CPU's choice, for fp32 stability; cheap on sm_80/sm_90 next to the memory traffic).
//
// Rows: one warp per row. Lane l takes the column quads 4l, 4l + 128, … (one 16-byte access per
// quad when the row's pointers allow, else four scalar ones: the same columns either way, so the
// sums' order never depends on alignment), and the lanes' sums meet in a fixed shuffle tree.
// Parameter gradients: per-(row chunk, column) partials in double, then a fixed-order pass.
#include "xsa/backend/cuda/common.cuh"
#include "xsa/backend/cuda/kernels.h"

namespace xsa::cuda {
namespace {

constexpr double kEps = 1e-5;
constexpr int kRowsPerBlock = 8;  // warps per block, one row each
constexpr int kQuadStride = 4 * kWarp;

// The warp's total in a fixed tree, lane 0's value given to every lane.
__device__ __forceinline__ double warp_sum(double v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    v += __shfl_down_sync(0xffffffffu, v, offset);
  return __shfl_sync(0xffffffffu, v, 0);
}

__global__ void layernorm_forward_kernel(float* out, float* mean, float* rstd, const float* inp,
                                         const float* weight, const float* bias, int N, int C) {
  const int lane = threadIdx.x % kWarp;
  const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp;
  if (row >= N) return;  // a whole warp; there is no block-wide sync
  const float* x = inp + (size_t)row * C;
  float* o = out + (size_t)row * C;
  const bool vectorized = aligned16(x) && aligned16(o) && aligned16(weight) && aligned16(bias);

  double sum = 0;
  for (int col = 4 * lane; col < C; col += kQuadStride) {
    float v[4];
    load_quad(v, x, col, C, vectorized);
    for (int k = 0; k < 4; k++)
      if (col + k < C) sum += v[k];
  }
  const double m = warp_sum(sum) / C;

  // Two passes, as the CPU: the variance about the mean (the row is in L1 by now).
  double var = 0;
  for (int col = 4 * lane; col < C; col += kQuadStride) {
    float v[4];
    load_quad(v, x, col, C, vectorized);
    for (int k = 0; k < 4; k++)
      if (col + k < C) var += (v[k] - m) * (v[k] - m);
  }
  const double s = 1.0 / sqrt(warp_sum(var) / C + kEps);

  for (int col = 4 * lane; col < C; col += kQuadStride) {
    float v[4], w[4], b[4], y[4];
    load_quad(v, x, col, C, vectorized);
    load_quad(w, weight, col, C, vectorized);
    load_quad(b, bias, col, C, vectorized);
    for (int k = 0; k < 4; k++) y[k] = (float)((v[k] - m) * s) * w[k] + b[k];
    store_quad(o, y, col, C, vectorized);
  }
  if (lane == 0) {
    mean[row] = (float)m;
    rstd[row] = (float)s;
  }
}

// dinp (+)= rstd·(dxhat − mean(dxhat) − xhat·mean(dxhat·xhat)), dxhat = dout·w, per row.
__global__ void layernorm_backward_rows_kernel(float* dinp, const float* dout, const float* inp,
                                               const float* weight, const float* mean,
                                               const float* rstd, int N, int C) {
  const int lane = threadIdx.x % kWarp;
  const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp;
  if (row >= N) return;
  const float* x = inp + (size_t)row * C;
  const float* g = dout + (size_t)row * C;
  float* dx = dinp + (size_t)row * C;
  const bool vectorized = aligned16(x) && aligned16(g) && aligned16(dx) && aligned16(weight);
  const double m = mean[row], s = rstd[row];

  double sum_dxhat = 0, sum_dxhat_xhat = 0;
  for (int col = 4 * lane; col < C; col += kQuadStride) {
    float xv[4], gv[4], wv[4];
    load_quad(xv, x, col, C, vectorized);
    load_quad(gv, g, col, C, vectorized);
    load_quad(wv, weight, col, C, vectorized);
    for (int k = 0; k < 4; k++) {
      if (col + k >= C) continue;
      const double dxhat = (double)gv[k] * wv[k];
      sum_dxhat += dxhat;
      sum_dxhat_xhat += dxhat * (xv[k] - m) * s;
    }
  }
  const double mean_dxhat = warp_sum(sum_dxhat) / C;
  const double mean_dxhat_xhat = warp_sum(sum_dxhat_xhat) / C;

  for (int col = 4 * lane; col < C; col += kQuadStride) {
    float xv[4], gv[4], wv[4], dv[4];
    load_quad(xv, x, col, C, vectorized);
    load_quad(gv, g, col, C, vectorized);
    load_quad(wv, weight, col, C, vectorized);
    load_quad(dv, dx, col, C, vectorized);
    for (int k = 0; k < 4; k++) {
      const double xhat = (xv[k] - m) * s;
      const double dxhat = (double)gv[k] * wv[k];
      dv[k] += (float)(s * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat));
    }
    store_quad(dx, dv, col, C, vectorized);
  }
}

// dweight, dbias: block (chunk, tile) covers kTileColumns columns of kChunkRows rows; row lane y
// takes rows y, y + kPartialLanes, … in order (coalesced: a warp reads 32 adjacent columns of one
// row), the lanes are added in lane order into one double partial per (chunk, column).

__global__ void layernorm_param_partials_kernel(double* dweight_partials, double* dbias_partials,
                                                const float* dout, const float* inp,
                                                const float* mean, const float* rstd, int N,
                                                int C) {
  __shared__ double lane_dweight[kPartialLanes][kTileColumns];
  __shared__ double lane_dbias[kPartialLanes][kTileColumns];
  const int col = blockIdx.y * kTileColumns + threadIdx.x;
  const int row_begin = blockIdx.x * kChunkRows, row_end = min(N, row_begin + kChunkRows);
  double dw = 0, db = 0;
  if (col < C) {
    for (int r = row_begin + threadIdx.y; r < row_end; r += kPartialLanes) {
      const size_t i = (size_t)r * C + col;
      const double g = dout[i];
      const float centered = inp[i] - mean[r];  // in float, as the CPU's inp − mean
      dw += g * centered * rstd[r];
      db += g;
    }
  }
  lane_dweight[threadIdx.y][threadIdx.x] = dw;
  lane_dbias[threadIdx.y][threadIdx.x] = db;
  __syncthreads();
  if (threadIdx.y == 0 && col < C) {
    double chunk_dw = 0, chunk_db = 0;
    for (int y = 0; y < kPartialLanes; y++) {
      chunk_dw += lane_dweight[y][threadIdx.x];
      chunk_db += lane_dbias[y][threadIdx.x];
    }
    dweight_partials[(size_t)blockIdx.x * C + col] = chunk_dw;
    dbias_partials[(size_t)blockIdx.x * C + col] = chunk_db;
  }
}

// Each column adds its chunks' partials in chunk order.
__global__ void layernorm_param_finish_kernel(float* dweight, float* dbias,
                                              const double* dweight_partials,
                                              const double* dbias_partials, int chunks, int C) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (col >= C) return;
  double dw = 0, db = 0;
  for (int k = 0; k < chunks; k++) {
    dw += dweight_partials[(size_t)k * C + col];
    db += dbias_partials[(size_t)k * C + col];
  }
  dweight[col] += (float)dw;
  dbias[col] += (float)db;
}

}  // namespace

void layernorm_forward(float* out, const ops::LayerNormArgs<float>& a, cudaStream_t stream) {
  if (a.N <= 0 || a.C <= 0) return;
  const unsigned blocks = (unsigned)((a.N + kRowsPerBlock - 1) / kRowsPerBlock);
  layernorm_forward_kernel<<<blocks, kRowsPerBlock * kWarp, 0, stream>>>(
      out, a.mean, a.rstd, a.inp, a.weight, a.bias, a.N, a.C);
}

size_t layernorm_backward_scratch(int N, int C) {
  if (N <= 0 || C <= 0) return 0;
  // Two arrays of chunks × C doubles, plus one float to reach 8-byte alignment.
  return 4 * (size_t)row_chunks(N) * C + 1;
}

void layernorm_backward(const LayerNormGrads& grads, const float* dout,
                        const ops::LayerNormArgs<float>& a, cudaStream_t stream) {
  float *dinp = grads.dinp, *dweight = grads.dweight, *dbias = grads.dbias;
  float* scratch = grads.scratch;
  const float *inp = a.inp, *weight = a.weight, *mean = a.mean, *rstd = a.rstd;
  const int N = a.N, C = a.C;
  if (N <= 0 || C <= 0) return;
  const unsigned row_blocks = (unsigned)((N + kRowsPerBlock - 1) / kRowsPerBlock);
  layernorm_backward_rows_kernel<<<row_blocks, kRowsPerBlock * kWarp, 0, stream>>>(
      dinp, dout, inp, weight, mean, rstd, N, C);

  const int chunks = row_chunks(N);
  double* dweight_partials = as_doubles(scratch);
  double* dbias_partials = dweight_partials + (size_t)chunks * C;
  const dim3 grid(chunks, (C + kTileColumns - 1) / kTileColumns);
  layernorm_param_partials_kernel<<<grid, dim3(kTileColumns, kPartialLanes), 0, stream>>>(
      dweight_partials, dbias_partials, dout, inp, mean, rstd, N, C);
  constexpr int kFinishThreads = 256;
  layernorm_param_finish_kernel<<<(C + kFinishThreads - 1) / kFinishThreads, kFinishThreads, 0,
                                  stream>>>(dweight, dbias, dweight_partials, dbias_partials,
                                            chunks, C);
}

}  // namespace xsa::cuda

// Σ x and Σ x² in double, the same bits on every run: the grid is a function of n alone, thread i
// sums the element quads i, i + grid threads, … in order (one 16-byte load where x allows, else
// four scalar ones: the same elements in the same order, so alignment changes nothing), each block
// adds its threads in a fixed tree into the scratch, and one block adds the blocks' partials in
// a fixed order.
#include <algorithm>

#include "xsa/backend/cuda/common.cuh"
#include "xsa/backend/cuda/kernels.h"

namespace xsa::cuda {
namespace {

constexpr int kThreads = 256;
constexpr size_t kMaxBlocks = 1024;

size_t blocks_for(size_t n) {
  const size_t quads = (n + 3) / 4;
  return std::min((quads + kThreads - 1) / kThreads, kMaxBlocks);
}

// The block's total through a fixed tree (shuffles within warps, then warp 0 over the warps);
// valid in thread 0.
__device__ double block_sum(double v) {
  __shared__ double warp_totals[kThreads / kWarp];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    v += __shfl_down_sync(0xffffffffu, v, offset);
  if (lane == 0) warp_totals[warp] = v;
  __syncthreads();
  double total = 0;
  if (threadIdx.x == 0)
    for (int w = 0; w < kThreads / kWarp; w++) total += warp_totals[w];
  return total;
}

__device__ __forceinline__ double term(float x, bool squares) {
  return squares ? (double)x * x : (double)x;
}

__global__ void __launch_bounds__(kThreads)
    sum_partials_kernel(double* partials, const float* x, size_t n, bool squares) {
  const bool vectorized = reinterpret_cast<uintptr_t>(x) % 16 == 0;
  const size_t full_quads = n / 4, quads = (n + 3) / 4;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  double sum = 0;
  for (size_t q = (size_t)blockIdx.x * blockDim.x + threadIdx.x; q < quads; q += stride) {
    if (vectorized && q < full_quads) {
      const float4 f = reinterpret_cast<const float4*>(x)[q];
      sum += term(f.x, squares);
      sum += term(f.y, squares);
      sum += term(f.z, squares);
      sum += term(f.w, squares);
    } else {
      const size_t end = 4 * q + 4 < n ? 4 * q + 4 : n;
      for (size_t i = 4 * q; i < end; i++) sum += term(x[i], squares);
    }
  }
  const double total = block_sum(sum);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

// One block: thread t adds partials t, t + kThreads, … in order, then the fixed tree.
__global__ void __launch_bounds__(kThreads)
    sum_finish_kernel(double* result, const double* partials, int blocks) {
  double sum = 0;
  for (int b = threadIdx.x; b < blocks; b += kThreads) sum += partials[b];
  const double total = block_sum(sum);
  if (threadIdx.x == 0) *result = total;
}

}  // namespace

size_t sum_scratch(size_t n) {
  return blocks_for(n);
}

void sum(double* result, const float* x, size_t n, bool squares, double* scratch,
         cudaStream_t stream) {
  if (n == 0) {  // the empty sum is 0
    cudaMemsetAsync(result, 0, sizeof(double), stream);
    return;
  }
  const int blocks = (int)blocks_for(n);
  sum_partials_kernel<<<blocks, kThreads, 0, stream>>>(scratch, x, n, squares);
  sum_finish_kernel<<<1, kThreads, 0, stream>>>(result, scratch, blocks);
}

}  // namespace xsa::cuda

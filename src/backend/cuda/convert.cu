// Float → bfloat16: round to nearest, ties to even, a NaN kept a (quiet) NaN — the bits
// ops::to_bf16 (ops/matmul_bf16.cpp) makes.
#include <algorithm>

#include "xsa/backend/cuda/common.cuh"
#include "xsa/backend/cuda/kernels.h"

namespace xsa::cuda {
namespace {

constexpr int kThreads = 256;

// Four at a time (16-byte loads, 8-byte stores) when both pointers allow, the rest one by one.
__global__ void to_bf16_kernel(bf16_bits* dst, const float* src, size_t n, bool vectorized) {
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  const size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  const size_t quads = vectorized ? n / 4 : 0;
  for (size_t q = first; q < quads; q += stride) {
    const float4 f = reinterpret_cast<const float4*>(src)[q];
    ushort4 b;
    b.x = round_to_bf16(f.x);
    b.y = round_to_bf16(f.y);
    b.z = round_to_bf16(f.z);
    b.w = round_to_bf16(f.w);
    reinterpret_cast<ushort4*>(dst)[q] = b;
  }
  for (size_t i = quads * 4 + first; i < n; i += stride) dst[i] = round_to_bf16(src[i]);
}

}  // namespace

void to_bf16(bf16_bits* dst, const float* src, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  const bool vectorized =
      reinterpret_cast<uintptr_t>(src) % 16 == 0 && reinterpret_cast<uintptr_t>(dst) % 8 == 0;
  to_bf16_kernel<<<grid_stride_blocks(vectorized ? n / 4 + 1 : n, kThreads), kThreads, 0, stream>>>(
      dst, src, n, vectorized);
}

}  // namespace xsa::cuda

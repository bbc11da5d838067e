// Helpers the kernel families share: launch arithmetic, aligned quads of floats, bf16 rounding,
// and the row chunks in which parameter gradients are summed in a fixed order.
#pragma once

#include <cstdint>

#include "xsa/backend/cuda/kernels.h"

namespace xsa::cuda {

constexpr int kWarp = 32;

// Blocks for a grid-stride loop over `work` items, `threads` per block: enough to fill the GPU,
// at most 65 536 (the loop covers the rest).
inline unsigned grid_stride_blocks(size_t work, int threads) {
  const size_t blocks = (work + threads - 1) / threads;
  return (unsigned)(blocks < (size_t(1) << 16) ? blocks : (size_t(1) << 16));
}

__host__ __device__ inline bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

__device__ __forceinline__ size_t global_thread() {
  return (size_t)blockIdx.x * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ size_t grid_threads() {
  return (size_t)gridDim.x * blockDim.x;
}

// Float → bf16 bits: round to nearest, ties to even, a NaN kept a (quiet) NaN — the bits
// ops::to_bf16 (ops/matmul_bf16.cpp) makes. Adding 0x7fff plus the kept lowest bit rounds half to
// even; an overflow carries into Inf.
__device__ __forceinline__ bf16_bits round_to_bf16(float x) {
  const uint32_t u = __float_as_uint(x);
  const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return (bf16_bits)(nan ? (u >> 16) | 0x40u : rounded);
}

// Columns col … col + 3 of a row (those below limit; the others read as 0), as one 16-byte load
// when the row allows it: the same values either way.
__device__ __forceinline__ void load_quad(float (&v)[4], const float* row, int col, int limit,
                                          bool vectorized) {
  if (vectorized && col + 4 <= limit) {
    const float4 f = *reinterpret_cast<const float4*>(row + col);
    v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
  } else {
    for (int k = 0; k < 4; k++) v[k] = col + k < limit ? row[col + k] : 0.0f;
  }
}

__device__ __forceinline__ void store_quad(float* row, const float (&v)[4], int col, int limit,
                                           bool vectorized) {
  if (vectorized && col + 4 <= limit) {
    *reinterpret_cast<float4*>(row + col) = make_float4(v[0], v[1], v[2], v[3]);
  } else {
    for (int k = 0; k < 4; k++)
      if (col + k < limit) row[col + k] = v[k];
  }
}

// The same quad rounded to bf16 (the cross-entropy's gradient for bf16 products).
__device__ __forceinline__ void store_quad(bf16_bits* row, const float (&v)[4], int col, int limit,
                                           bool vectorized) {
  if (vectorized && col + 4 <= limit) {
    ushort4 b;
    b.x = round_to_bf16(v[0]);
    b.y = round_to_bf16(v[1]);
    b.z = round_to_bf16(v[2]);
    b.w = round_to_bf16(v[3]);
    *reinterpret_cast<ushort4*>(row + col) = b;
  } else {
    for (int k = 0; k < 4; k++)
      if (col + k < limit) row[col + k] = round_to_bf16(v[k]);
  }
}

// Column sums over N rows in a fixed order: block (chunk, tile) covers kTileColumns columns of
// kChunkRows rows; row lane y takes rows y, y + kPartialLanes, … (a warp reads 32 adjacent
// columns of one row), the lanes are added in lane order into one double partial per (chunk,
// column), and a second kernel adds the partials in chunk order.
constexpr int kTileColumns = 32;
constexpr int kPartialLanes = 8;
constexpr int kChunkRows = 256;

inline int row_chunks(int N) {
  return (N + kChunkRows - 1) / kChunkRows;
}

// The scratch is floats; the partials are doubles at its first 8-byte boundary.
inline double* as_doubles(float* scratch) {
  return reinterpret_cast<double*>((reinterpret_cast<uintptr_t>(scratch) + 7) & ~uintptr_t(7));
}

}  // namespace xsa::cuda

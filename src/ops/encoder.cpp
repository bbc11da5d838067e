// Token (and learned position) embedding: forward gathers rows of wte (adds rows of wpe),
// backward scatters gradients back.
#include <cstring>

#include "xsa/ops/ops.h"

// clang-format off: after every other include (ops/kernel_level.h)
#include "xsa/ops/kernel_level.h"
// clang-format on

namespace xsa::ops::XSA_LEVEL {

template <typename Real>
void copy_rows(Real* dst, size_t dst_stride, const Real* src, size_t src_stride, int rows,
               int width) {
  for (int r = 0; r < rows; r++)
    std::memcpy(dst + r * dst_stride, src + r * src_stride, sizeof(Real) * width);
}

template <typename Real>
void encoder_forward(Real* out, const int32_t* tokens, const Real* wte, int N, int C) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    std::memcpy(out + (size_t)n * C, wte + (size_t)tokens[n] * C, sizeof(Real) * C);
  }
}

template <typename Real>
void encoder_backward(Real* dwte, const Real* dout, const int32_t* tokens, int N, int C) {
  // forward: out[n] = wte[tokens[n]]  =>  dwte[tokens[n]] += dout[n].
  // Threads split the channels, not the rows, so two rows of one token never race and the
  // summation order is fixed (deterministic whatever the thread count).
  constexpr int kChunk = 16;
  int n_chunks = (C + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (int chunk = 0; chunk < n_chunks; chunk++) {
    int c0 = chunk * kChunk, c1 = c0 + kChunk < C ? c0 + kChunk : C;
    for (int n = 0; n < N; n++) {
      Real* dst = dwte + (size_t)tokens[n] * C;
      const Real* src = dout + (size_t)n * C;
      for (int c = c0; c < c1; c++) dst[c] += src[c];
    }
  }
}

template <typename Real>
void embedding_add(Real* out, const int32_t* index, const Real* table, int N, int C) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    Real* row = out + (size_t)n * C;
    const Real* add = table + (size_t)index[n] * C;
#pragma omp simd
    for (int c = 0; c < C; c++) row[c] += add[c];
  }
}

#define XSA_INSTANTIATE(Real)                                                        \
  template void copy_rows<Real>(Real*, size_t, const Real*, size_t, int, int);       \
  template void embedding_add<Real>(Real*, const int32_t*, const Real*, int, int);   \
  template void encoder_forward<Real>(Real*, const int32_t*, const Real*, int, int); \
  template void encoder_backward<Real>(Real*, const Real*, const int32_t*, int, int);
XSA_INSTANTIATE(float)
XSA_INSTANTIATE(double)

}  // namespace xsa::ops::XSA_LEVEL
XSA_LEVEL_END

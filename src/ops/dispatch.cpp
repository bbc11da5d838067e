// The kernels of ops/kernels.h as everyone calls them: each runs the level util/cpu.h chose, the
// xsa::ops::avx512 copy of the kernel on a CPU with AVX-512 (unless XSA_CPU or set_cpu_level lowers
// it), the xsa::ops::baseline copy otherwise (ops/kernel_level.h). The level is read at every call,
// a load and a branch beside a kernel's work.
#include "xsa/ops/ops.h"
#include "xsa/util/cpu.h"

namespace xsa::ops {

namespace baseline {
#include "xsa/ops/kernels.h"
}  // namespace baseline

#if defined(XSA_HAS_AVX512_LEVEL)
namespace avx512 {
#include "xsa/ops/kernels.h"
}  // namespace avx512
#define XSA_DISPATCH(kernel, ...) \
  (cpu_level() >= CpuLevel::avx512 ? avx512::kernel : baseline::kernel)(__VA_ARGS__)
#else
#define XSA_DISPATCH(kernel, ...) baseline::kernel(__VA_ARGS__)
#endif

template <typename Real>
void matmul_forward(Real* out, const Real* inp, const Real* weight, int N, int in_dim, int out_dim,
                    bool accumulate) {
  XSA_DISPATCH(matmul_forward<Real>, out, inp, weight, N, in_dim, out_dim, accumulate);
}

template <typename Real>
void matmul_backward(Real* dinp, Real* dweight, const Real* dout, const Real* inp,
                     const Real* weight, MatmulShape shape, bool accumulate) {
  XSA_DISPATCH(matmul_backward<Real>, dinp, dweight, dout, inp, weight, shape, accumulate);
}

template <typename Real>
void bias_forward(Real* out, const Real* bias, int N, int D) {
  XSA_DISPATCH(bias_forward<Real>, out, bias, N, D);
}

template <typename Real>
void bias_backward(Real* dbias, const Real* dout, int N, int D) {
  XSA_DISPATCH(bias_backward<Real>, dbias, dout, N, D);
}

template <typename Real>
void copy_rows(Real* dst, size_t dst_stride, const Real* src, size_t src_stride, int rows,
               int width) {
  XSA_DISPATCH(copy_rows<Real>, dst, dst_stride, src, src_stride, rows, width);
}

template <typename Real>
void encoder_forward(Real* out, const int32_t* tokens, const Real* wte, int N, int C) {
  XSA_DISPATCH(encoder_forward<Real>, out, tokens, wte, N, C);
}

template <typename Real>
void encoder_backward(Real* dwte, const Real* dout, const int32_t* tokens, int N, int C) {
  XSA_DISPATCH(encoder_backward<Real>, dwte, dout, tokens, N, C);
}

template <typename Real>
void embedding_add(Real* out, const int32_t* index, const Real* table, int N, int C) {
  XSA_DISPATCH(embedding_add<Real>, out, index, table, N, C);
}

template <typename Real>
void layernorm_forward(Real* out, Real* mean, Real* rstd, const Real* inp, const Real* weight,
                       const Real* bias, int N, int C) {
  XSA_DISPATCH(layernorm_forward<Real>, out, mean, rstd, inp, weight, bias, N, C);
}

template <typename Real>
void layernorm_backward(Real* dinp, Real* dweight, Real* dbias, const Real* dout,
                        const LayerNormArgs<Real>& args) {
  XSA_DISPATCH(layernorm_backward<Real>, dinp, dweight, dbias, dout, args);
}

template <typename Real>
void rope_table(Real* cos, Real* sin, int T, int D, double theta) {
  XSA_DISPATCH(rope_table<Real>, cos, sin, T, D, theta);
}

template <typename Real>
void rope_forward(Real* qkv, const RopeArgs<Real>& args) {
  XSA_DISPATCH(rope_forward<Real>, qkv, args);
}

template <typename Real>
void rope_backward(Real* dqkv, const RopeArgs<Real>& args) {
  XSA_DISPATCH(rope_backward<Real>, dqkv, args);
}

template <typename Real>
void attention_forward(const AttentionArgs<Real>& args, Storage tile_products) {
  XSA_DISPATCH(attention_forward<Real>, args, tile_products);
}

template <typename Real>
void attention_backward(const AttentionArgs<Real>& args, Storage tile_products) {
  XSA_DISPATCH(attention_backward<Real>, args, tile_products);
}

template <typename Real>
void attention_forward_cached(const AttentionArgs<Real>& args, const KvCache<Real>& cache) {
  XSA_DISPATCH(attention_forward_cached<Real>, args, cache);
}

template <typename Real>
void xsa_forward(const AttentionArgs<Real>& args) {
  XSA_DISPATCH(xsa_forward<Real>, args);
}

template <typename Real>
void xsa_backward(const AttentionArgs<Real>& args) {
  XSA_DISPATCH(xsa_backward<Real>, args);
}

template <typename Real>
void gelu_forward(Real* out, const Real* inp, size_t n) {
  XSA_DISPATCH(gelu_forward<Real>, out, inp, n);
}

template <typename Real>
void gelu_backward(Real* dinp, const Real* inp, const Real* dout, size_t n) {
  XSA_DISPATCH(gelu_backward<Real>, dinp, inp, dout, n);
}

template <typename Real>
void crossentropy_forward_backward(Real* logits, Real* losses, const int32_t* targets, int N, int V,
                                   int Vp, Real dloss) {
  XSA_DISPATCH(crossentropy_forward_backward<Real>, logits, losses, targets, N, V, Vp, dloss);
}

template <typename Real>
void adamw_update(Real* param, const Real* grad, Real* m, Real* v, size_t n, const AdamWSettings& s,
                  uint16_t* bf16_copy) {
  XSA_DISPATCH(adamw_update<Real>, param, grad, m, v, n, s, bf16_copy);
}

template <typename Real>
double sum_of_squares(const Real* x, size_t n) {
  return XSA_DISPATCH(sum_of_squares<Real>, x, n);
}

void to_bf16(const float* x, bf16* out, size_t n) {
  XSA_DISPATCH(to_bf16, x, out, n);
}

void from_bf16(const bf16* x, float* out, size_t n) {
  XSA_DISPATCH(from_bf16, x, out, n);
}

void crossentropy_forward_backward_bf16(float* logits, bf16* grad, float* losses,
                                        const int32_t* targets, int N, int V, int Vp, float dloss) {
  XSA_DISPATCH(crossentropy_forward_backward_bf16, logits, grad, losses, targets, N, V, Vp, dloss);
}

void layernorm_forward_bf16(bf16* out, float* mean, float* rstd, const float* inp,
                            const float* weight, const float* bias, int N, int C) {
  XSA_DISPATCH(layernorm_forward_bf16, out, mean, rstd, inp, weight, bias, N, C);
}

void gelu_forward_bf16(bf16* out, const float* inp, size_t n) {
  XSA_DISPATCH(gelu_forward_bf16, out, inp, n);
}

void gelu_backward_bf16(bf16* dinp, const float* inp, const float* dout, size_t n) {
  XSA_DISPATCH(gelu_backward_bf16, dinp, inp, dout, n);
}

void rope_backward_bf16(bf16* out, const float* dqkv, const RopeArgs<float>& args) {
  XSA_DISPATCH(rope_backward_bf16, out, dqkv, args);
}

double fma_peak_gflops() {
  return XSA_DISPATCH(fma_peak_gflops);
}

#define XSA_INSTANTIATE(Real)                                                                      \
  template void matmul_forward<Real>(Real*, const Real*, const Real*, int, int, int, bool);        \
  template void matmul_backward<Real>(Real*, Real*, const Real*, const Real*, const Real*,         \
                                      MatmulShape, bool);                                          \
  template void bias_forward<Real>(Real*, const Real*, int, int);                                  \
  template void bias_backward<Real>(Real*, const Real*, int, int);                                 \
  template void copy_rows<Real>(Real*, size_t, const Real*, size_t, int, int);                     \
  template void encoder_forward<Real>(Real*, const int32_t*, const Real*, int, int);               \
  template void encoder_backward<Real>(Real*, const Real*, const int32_t*, int, int);              \
  template void embedding_add<Real>(Real*, const int32_t*, const Real*, int, int);                 \
  template void layernorm_forward<Real>(Real*, Real*, Real*, const Real*, const Real*,             \
                                        const Real*, int, int);                                    \
  template void layernorm_backward<Real>(Real*, Real*, Real*, const Real*,                         \
                                         const LayerNormArgs<Real>&);                              \
  template void rope_table<Real>(Real*, Real*, int, int, double);                                  \
  template void rope_forward<Real>(Real*, const RopeArgs<Real>&);                                  \
  template void rope_backward<Real>(Real*, const RopeArgs<Real>&);                                 \
  template void attention_forward<Real>(const AttentionArgs<Real>&, Storage);                      \
  template void attention_backward<Real>(const AttentionArgs<Real>&, Storage);                     \
  template void attention_forward_cached<Real>(const AttentionArgs<Real>&, const KvCache<Real>&);  \
  template void xsa_forward<Real>(const AttentionArgs<Real>&);                                     \
  template void xsa_backward<Real>(const AttentionArgs<Real>&);                                    \
  template void gelu_forward<Real>(Real*, const Real*, size_t);                                    \
  template void gelu_backward<Real>(Real*, const Real*, const Real*, size_t);                      \
  template void crossentropy_forward_backward<Real>(Real*, Real*, const int32_t*, int, int, int,   \
                                                    Real);                                         \
  template void adamw_update<Real>(Real*, const Real*, Real*, Real*, size_t, const AdamWSettings&, \
                                   uint16_t*);                                                     \
  template double sum_of_squares<Real>(const Real*, size_t);

XSA_INSTANTIATE(float)
XSA_INSTANTIATE(double)

}  // namespace xsa::ops

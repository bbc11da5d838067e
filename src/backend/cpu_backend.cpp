// The CPU backend: host memory (64-byte aligned, inference weights on transparent huge pages) and
// the kernels of ops/ (products through oneDNN or OpenBLAS, OpenMP elsewhere, at the CPU's level).
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <unordered_map>
#include <vector>

#include "xsa/backend/backend.h"
#include "xsa/ops/matmul_bf16.h"
#include "xsa/ops/parallel.h"
#include "xsa/util/arena.h"
#include "xsa/util/cpu.h"
#include "xsa/util/fmt.h"

namespace xsa {

namespace {

template <typename Real>
class CpuBackend : public Backend<Real> {
 public:
  Device device() const override { return Device::cpu; }
  bool host_addressable() const override { return true; }
  // "cpu, avx512 (Intel Xeon ..., family 6, model 106); products: oneDNN 2.6.3 (...) ..."
  std::string describe() const override {
    return fmt::format("cpu, {}; {}", cpu_summary(), ops::products_summary());
  }

  Real* allocate(size_t n, MemoryUse use) override {
    // Inference weights on transparent huge pages: decoding streams them once per token.
    return static_cast<Real*>(
        allocate_zeroed(n * sizeof(Real), use == MemoryUse::inference_weights));
  }
  void release(Real* p, size_t) override { std::free(p); }
  // A large buffer (a layer's qkv gradient, 9 MB on `small`) zeroed by all the threads: one alone
  // reached 40 % of the speed of two.
  void fill_zero(Real* p, size_t n) override {
    if (n * sizeof(Real) < (1 << 20) || omp_in_parallel())
      return (void)std::memset(p, 0, n * sizeof(Real));
#pragma omp parallel
    {
      const ops::ThreadShare mine = ops::this_threads_share(n, 64 / sizeof(Real));
      std::memset(p + mine.begin, 0, (mine.end - mine.begin) * sizeof(Real));
    }
  }
  void copy(Real* dst, const Real* src, size_t n) override {
    if (dst != src) std::memcpy(dst, src, n * sizeof(Real));
  }
  void to_host(Real* host, const Real* src, size_t n) override {
    copy(host, src, n);
  }
  void from_host(Real* dst, const Real* host, size_t n) override {
    copy(dst, host, n);
  }
  void copy_rows(Real* dst, size_t dst_stride, const Real* src, size_t src_stride, int rows,
                 int width) override {
    ops::copy_rows(dst, dst_stride, src, src_stride, rows, width);
  }
  void gather_rows(Real* dst, const Real* table, const int* index, int n, int width) override {
    for (int r = 0; r < n; r++)
      std::memcpy(dst + (size_t)r * width, table + (size_t)index[r] * width, sizeof(Real) * width);
  }

  void matmul_forward(Real* out, const Real* inp, const Real* weight, int N, int in_dim,
                      int out_dim, bool accumulate) override {
    ops::matmul_forward(out, inp, weight, N, in_dim, out_dim, accumulate);
  }
  void matmul_backward(Real* dinp, Real* dweight, const Real* dout, const Real* inp,
                       const Real* weight, int N, int in_dim, int out_dim,
                       bool accumulate) override {
    ops::matmul_backward(dinp, dweight, dout, inp, weight, N, in_dim, out_dim, accumulate);
  }
  void bias_forward(Real* out, const Real* bias, int N, int D) override {
    ops::bias_forward(out, bias, N, D);
  }
  void bias_backward(Real* dbias, const Real* dout, int N, int D) override {
    ops::bias_backward(dbias, dout, N, D);
  }
  void embedding_add(Real* out, const int32_t* index, const Real* table, int N, int C) override {
    ops::embedding_add(out, index, table, N, C);
  }
  void encoder_forward(Real* out, const int32_t* tokens, const Real* wte, int N, int C) override {
    ops::encoder_forward(out, tokens, wte, N, C);
  }
  void encoder_backward(Real* dwte, const Real* dout, const int32_t* tokens, int N,
                        int C) override {
    ops::encoder_backward(dwte, dout, tokens, N, C);
  }
  void layernorm_forward(Real* out, Real* mean, Real* rstd, const Real* inp, const Real* weight,
                         const Real* bias, int N, int C) override {
    ops::layernorm_forward(out, mean, rstd, inp, weight, bias, N, C);
  }
  void layernorm_backward(Real* dinp, Real* dweight, Real* dbias, const Real* dout, const Real* inp,
                          const Real* weight, const Real* mean, const Real* rstd, int N,
                          int C) override {
    ops::layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
  }
  void rope_table(Real* cos, Real* sin, int T, int D, double theta) override {
    ops::rope_table(cos, sin, T, D, theta);
  }
  void rope_forward(Real* qkv, const Real* cos, const Real* sin, int B, int T, int C, int H,
                    int Hkv) override {
    ops::rope_forward(qkv, cos, sin, B, T, C, H, Hkv);
  }
  void rope_backward(Real* dqkv, const Real* cos, const Real* sin, int B, int T, int C, int H,
                     int Hkv) override {
    ops::rope_backward(dqkv, cos, sin, B, T, C, H, Hkv);
  }
  void attention_forward(const ops::AttentionArgs<Real>& args) override {
    ops::attention_forward(args);
  }
  void attention_backward(const ops::AttentionArgs<Real>& args) override {
    ops::attention_backward(args);
  }
  void attention_forward_cached(const ops::AttentionArgs<Real>& args,
                                const ops::KvCache<Real>& cache) override {
    ops::attention_forward_cached(args, cache);
  }
  void xsa_forward(Real* z, const Real* y, const Real* qkv, int B, int T, int C, int H,
                   const Real* alpha, int Hkv) override {
    ops::xsa_forward(z, y, qkv, B, T, C, H, alpha, Hkv);
  }
  void gelu_forward(Real* out, const Real* inp, size_t n) override {
    ops::gelu_forward(out, inp, n);
  }
  void gelu_backward(Real* dinp, const Real* inp, const Real* dout, size_t n) override {
    ops::gelu_backward(dinp, inp, dout, n);
  }
  void crossentropy_forward_backward(Real* logits, Real* losses, const int32_t* targets, int N,
                                     int V, int Vp, Real dloss) override {
    ops::crossentropy_forward_backward(logits, losses, targets, N, V, Vp, dloss);
  }

  void gate_alpha(Real* alpha, const Real* w, int H) override {
    for (int h = 0; h < H; h++) alpha[h] = std::tanh(w[h]);
  }
  void gate_backward(Real* dw, const Real* dalpha, const Real* alpha, int N, int H) override {
    for (int h = 0; h < H; h++) {  // α = tanh(w): ∂L/∂w_h = (1 − α_h²) Σ_tokens ∂L/∂α_h
      double sum = 0;
      for (int n = 0; n < N; n++) sum += dalpha[(size_t)n * H + h];
      dw[h] += Real((1.0 - (double)alpha[h] * alpha[h]) * sum);
    }
  }
  void sink_backward(Real* dsink, const Real* dlogit, int B, int H) override {
    for (int h = 0; h < H; h++)
      for (int b = 0; b < B; b++) dsink[h] += dlogit[(size_t)b * H + h];
  }

  double sum(const Real* x, size_t n) override {
    double total = 0;
    for (size_t i = 0; i < n; i++) total += x[i];
    return total;
  }
  double sum_of_squares(const Real* x, size_t n) override {
    return ops::sum_of_squares(x, n);
  }
  void adamw_update(Real* param, const Real* grad, Real* m, Real* v, size_t n,
                    const ops::AdamWSettings& settings) override {
    ops::adamw_update(param, grad, m, v, n, settings);
  }
};

// Mixed precision: bf16 products, everything else as the CPU backend.
class CpuBf16Backend final : public CpuBackend<float> {
 public:
  // The copies are marked stale, not freed: their memory comes back at the next use without
  // fresh pages (freeing 60 MB of copies every step cost ~10 000 page faults per step).
  // Copies that AdamW wrote as it updated their weights stay fresh, and so do those of weights
  // outside the range (another model's: else each of two models stepped in turn converted all
  // its weights again every step).
  void weights_changed(const float* begin, size_t n) override {
    for (auto& [weight, copy] : weights_)
      if (in_changed_range(weight, begin, n)) copy.fresh = copy.updated, copy.updated = false;
  }
  // A weight with a copy gets it written in AdamW's pass (no second pass over the weights); a
  // part of a tensor (a ZeRO shard) leaves its copy to be made again on first use.
  void adamw_update(float* param, const float* grad, float* m, float* v, size_t n,
                    const ops::AdamWSettings& settings) override {
    auto it = weights_.find(param);
    if (it == weights_.end() || it->second.data.size() != n)
      return CpuBackend<float>::adamw_update(param, grad, m, v, n, settings);
    ops::adamw_update(param, grad, m, v, n, settings, it->second.data.data());
    it->second.updated = true;
  }
  // Memory handed back may come again as other weights: its copies go with it.
  void release(float* p, size_t n) override {
    for (auto it = weights_.begin(); it != weights_.end();)
      it = it->first >= p && it->first < p + n ? weights_.erase(it) : std::next(it);
    CpuBackend<float>::release(p, n);
  }

  void matmul_forward(float* out, const float* inp, const float* weight, int N, int in_dim,
                      int out_dim, bool accumulate) override {
    if (N <= 1)
      return CpuBackend<float>::matmul_forward(out, inp, weight, N, in_dim, out_dim, accumulate);
    const ops::bf16* w = bf16_weights(weight, (size_t)in_dim * out_dim);
    ops::matmul_forward_bf16(out, convert(inp, (size_t)N * in_dim, inp_), w, N, in_dim, out_dim,
                             accumulate);
  }
  void matmul_forward_residual(float* out, const float* residual, const float* inp,
                               const float* weight, int N, int in_dim, int out_dim) override {
    if (N <= 1)
      return Backend<float>::matmul_forward_residual(out, residual, inp, weight, N, in_dim,
                                                     out_dim);
    const ops::bf16* w = bf16_weights(weight, (size_t)in_dim * out_dim);
    ops::matmul_residual_bf16(out, residual, convert(inp, (size_t)N * in_dim, inp_), w, N, in_dim,
                              out_dim);
  }
  void matmul_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                       const float* weight, int N, int in_dim, int out_dim,
                       bool accumulate) override {
    if (N <= 1)
      return CpuBackend<float>::matmul_backward(dinp, dweight, dout, inp, weight, N, in_dim,
                                                out_dim, accumulate);
    const ops::bf16* w = bf16_weights(weight, (size_t)in_dim * out_dim);
    ops::matmul_backward_bf16(dinp, dweight, convert(dout, (size_t)N * out_dim, dout_),
                              dweight ? convert(inp, (size_t)N * in_dim, inp_) : nullptr, w, N,
                              in_dim, out_dim, accumulate);
  }

  // Product inputs (backend.h) as bf16 in their buffers' first half, for the rows whose products
  // run in bf16 (N > 1, as above).
  void layernorm_forward_product_input(float* out, float* mean, float* rstd, const float* inp,
                                       const float* weight, const float* bias, int N,
                                       int C) override {
    if (N <= 1) return layernorm_forward(out, mean, rstd, inp, weight, bias, N, C);
    ops::layernorm_forward_bf16(stored_bf16(out), mean, rstd, inp, weight, bias, N, C);
  }
  void gelu_forward_product_input(float* out, const float* inp, int N, int width) override {
    if (N <= 1) return gelu_forward(out, inp, (size_t)N * width);
    ops::gelu_forward_bf16(stored_bf16(out), inp, (size_t)N * width);
  }
  void matmul_forward_product_input(float* out, const float* inp, const float* weight, int N,
                                    int in_dim, int out_dim) override {
    if (N <= 1) return matmul_forward(out, inp, weight, N, in_dim, out_dim, false);
    ops::matmul_forward_bf16(out, stored_bf16(inp), bf16_weights(weight, (size_t)in_dim * out_dim),
                             N, in_dim, out_dim, false);
  }
  void matmul_forward_residual_product_input(float* out, const float* residual, const float* inp,
                                             const float* weight, int N, int in_dim,
                                             int out_dim) override {
    if (N <= 1) return matmul_forward_residual(out, residual, inp, weight, N, in_dim, out_dim);
    ops::matmul_residual_bf16(out, residual, stored_bf16(inp),
                              bf16_weights(weight, (size_t)in_dim * out_dim), N, in_dim, out_dim);
  }
  void matmul_backward_product_input(float* dinp, float* dweight, const float* dout,
                                     const float* inp, const float* weight, int N, int in_dim,
                                     int out_dim, bool accumulate) override {
    if (N <= 1)
      return matmul_backward(dinp, dweight, dout, inp, weight, N, in_dim, out_dim, accumulate);
    backward_of_stored_input(dinp, dweight, convert(dout, (size_t)N * out_dim, dout_), inp, weight,
                             N, in_dim, out_dim, accumulate);
  }

  const float* gelu_backward_product_input(float* grad, const float* inp, float* spare, int N,
                                           int width) override {
    if (N <= 1) return Backend<float>::gelu_backward_product_input(grad, inp, spare, N, width);
    ops::gelu_backward_bf16(stored_bf16(spare), inp, grad, (size_t)N * width);
    return spare;
  }
  const float* rope_backward_product_input(float* dqkv, const float* cos, const float* sin, int B,
                                           int T, int C, int H, int Hkv, float* spare) override {
    if (B * T <= 1)
      return Backend<float>::rope_backward_product_input(dqkv, cos, sin, B, T, C, H, Hkv, spare);
    ops::rope_backward_bf16(stored_bf16(spare), dqkv, cos, sin, B, T, C, H, Hkv);
    return spare;
  }
  void matmul_backward_product_inputs(float* dinp, float* dweight, const float* dout,
                                      const float* inp, const float* weight, int N, int in_dim,
                                      int out_dim, bool accumulate) override {
    if (N <= 1)
      return matmul_backward(dinp, dweight, dout, inp, weight, N, in_dim, out_dim, accumulate);
    backward_of_stored_input(dinp, dweight, stored_bf16(dout), inp, weight, N, in_dim, out_dim,
                             accumulate);
  }

  // Attention's tile products in bf16 too (the softmax and the accumulations stay fp32).
  void attention_forward(const ops::AttentionArgs<float>& args) override {
    ops::attention_forward(with_bf16_tiles(args));
  }
  void attention_backward(const ops::AttentionArgs<float>& args) override {
    ops::attention_backward(with_bf16_tiles(args));
  }
  // XSA's z as a product input (for the rows whose products run in bf16).
  void attention_forward_product_input(const ops::AttentionArgs<float>& args) override {
    ops::attention_forward(with_bf16_z(args));
  }
  void attention_backward_product_input(const ops::AttentionArgs<float>& args) override {
    ops::attention_backward(with_bf16_z(args));
  }

  // The head with its gradient written in bf16 by the cross-entropy itself (no separate pass over
  // the chunk's logits to convert them for the backward's products).
  void classifier_forward_backward(float* logits, float* losses, const int32_t* targets,
                                   const float* inp, const float* wte, float* dinp, float* dwte,
                                   int rows, int C, int V, int Vp, float dloss,
                                   bool accumulate) override {
    if (rows <= 1)
      return Backend<float>::classifier_forward_backward(logits, losses, targets, inp, wte, dinp,
                                                         dwte, rows, C, V, Vp, dloss, accumulate);
    const ops::bf16* w = bf16_weights(wte, (size_t)Vp * C);
    const ops::bf16* x = convert(inp, (size_t)rows * C, inp_);
    ops::matmul_forward_bf16(logits, x, w, rows, C, Vp, false);
    if (dloss == 0.0f)
      return ops::crossentropy_forward_backward(logits, losses, targets, rows, V, Vp, dloss);
    if (dlogits_.size() < (size_t)rows * Vp) dlogits_.resize((size_t)rows * Vp);
    ops::crossentropy_forward_backward_bf16(logits, dlogits_.data(), losses, targets, rows, V, Vp,
                                            dloss);
    ops::matmul_backward_bf16(dinp, dwte, dlogits_.data(), x, w, rows, C, Vp, accumulate);
  }

 private:
  static ops::AttentionArgs<float> with_bf16_tiles(ops::AttentionArgs<float> args) {
    args.bf16_tiles = true;
    return args;
  }
  static ops::AttentionArgs<float> with_bf16_z(ops::AttentionArgs<float> args) {
    args.z_bf16 = args.exclusive && args.B * args.T > 1;
    return with_bf16_tiles(args);
  }
  // matmul_backward in bf16 with dout given in bf16 and inp a product input.
  void backward_of_stored_input(float* dinp, float* dweight, const ops::bf16* dout,
                                const float* inp, const float* weight, int N, int in_dim,
                                int out_dim, bool accumulate) {
    ops::matmul_backward_bf16(dinp, dweight, dout, dweight ? stored_bf16(inp) : nullptr,
                              bf16_weights(weight, (size_t)in_dim * out_dim), N, in_dim, out_dim,
                              accumulate);
  }
  // A product input's bf16 values, in the first half of its float buffer.
  static ops::bf16* stored_bf16(float* x) { return reinterpret_cast<ops::bf16*>(x); }
  static const ops::bf16* stored_bf16(const float* x) {
    return reinterpret_cast<const ops::bf16*>(x);
  }
  const ops::bf16* convert(const float* x, size_t n, std::vector<ops::bf16>& buf) {
    if (buf.size() < n) buf.resize(n);
    ops::to_bf16(x, buf.data(), n);
    return buf.data();
  }
  // A weight matrix's bf16 copy, made on first use after weights_changed().
  const ops::bf16* bf16_weights(const float* weight, size_t n) {
    WeightCopy& copy = weights_[weight];
    if (!copy.fresh || copy.data.size() != n) {
      copy.data.resize(n);
      ops::to_bf16(weight, copy.data.data(), n);
      copy.fresh = true;
    }
    return copy.data.data();
  }
  struct WeightCopy {
    std::vector<ops::bf16> data;
    bool fresh = false;
    bool updated = false;  // written by adamw_update since the last weights_changed()
  };
  std::unordered_map<const float*, WeightCopy> weights_;
  std::vector<ops::bf16> inp_, dout_;  // activations converted per call
  std::vector<ops::bf16> dlogits_;     // the classifier's gradient, written by the cross-entropy
};

}  // namespace

Backend<float>& cpu_bf16_backend() {
  static CpuBf16Backend backend;
  return backend;
}

bool bf16_products_available(std::string* why) {
  return ops::bf16_available(why);
}

template <typename Real>
Backend<Real>& cpu_backend() {
  static CpuBackend<Real> backend;
  return backend;
}

// ---- DeviceBuffer and HostView: memory through whichever backend owns it ----

template <typename Real>
DeviceBuffer<Real>::DeviceBuffer(Backend<Real>& backend, size_t n, MemoryUse use)
    : backend_(&backend), data_(n ? backend.allocate(n, use) : nullptr), size_(n) {}

template <typename Real>
DeviceBuffer<Real>::DeviceBuffer(DeviceBuffer&& o) noexcept
    : backend_(o.backend_), data_(o.data_), size_(o.size_) {
  o.data_ = nullptr, o.size_ = 0;
}

template <typename Real>
DeviceBuffer<Real>& DeviceBuffer<Real>::operator=(DeviceBuffer&& o) noexcept {
  std::swap(backend_, o.backend_);
  std::swap(data_, o.data_);
  std::swap(size_, o.size_);
  return *this;
}

template <typename Real>
DeviceBuffer<Real>::~DeviceBuffer() {
  if (data_) backend_->release(data_, size_);
}

template <typename Real>
void DeviceBuffer<Real>::zero() {
  if (data_) backend_->fill_zero(data_, size_);
}

template <typename Real>
HostView<Real>::HostView(DeviceBuffer<Real>& buffer, bool write_back)
    : buffer_(&buffer), write_back_(write_back) {
  if (!buffer.backend() || buffer.backend()->host_addressable()) {
    data_ = buffer.data();
    write_back_ = false;
    return;
  }
  copy_.resize(buffer.size());
  buffer.backend()->to_host(copy_.data(), buffer.data(), buffer.size());
  data_ = copy_.data();
}

template <typename Real>
HostView<Real>::HostView(const DeviceBuffer<Real>& buffer)
    : HostView(const_cast<DeviceBuffer<Real>&>(buffer), false) {}

template <typename Real>
HostView<Real>::~HostView() noexcept(false) {
  if (!write_back_) return;
  if (std::uncaught_exceptions() == 0) {
    buffer_->backend()->from_host(buffer_->data(), copy_.data(), copy_.size());
    return;
  }
  try {
    buffer_->backend()->from_host(buffer_->data(), copy_.data(), copy_.size());
  } catch (...) {  // the exception already in flight is the one to report
  }
}

template Backend<float>& cpu_backend<float>();
template Backend<double>& cpu_backend<double>();
template class DeviceBuffer<float>;
template class DeviceBuffer<double>;
template class HostView<float>;
template class HostView<double>;

}  // namespace xsa

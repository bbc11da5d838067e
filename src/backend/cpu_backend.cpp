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

// Built once per CPU level: `Kernels` is the level's (ops::BaselineKernels, ops::Avx512Kernels), so
// each call reaches its kernel without a branch; cpu_backend() picks the level once, when asked.
template <typename Real, typename Kernels>
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
    Kernels::copy_rows(dst, dst_stride, src, src_stride, rows, width);
  }
  void gather_rows(Real* dst, const Real* table, const int* index, int n, int width) override {
    for (int r = 0; r < n; r++)
      std::memcpy(dst + (size_t)r * width, table + (size_t)index[r] * width, sizeof(Real) * width);
  }

  bool memory_info(size_t*, size_t*) override {
    return false;
  }
  PeakFlops peak_flops() const override {
    return {};
  }
  void synchronize() override {}
  void weights_changed(const Real*, size_t) override {}

  // fp32 activations only; the bf16 backend below adds bf16 product inputs.
  bool supports(Op, Storage storage) const override {
    return storage == Storage::fp32;
  }
  Storage product_input_storage(int) const override {
    return Storage::fp32;
  }

  void matmul_forward(Real* out, Tensor<const Real> inp, const Real* weight, MatmulShape shape,
                      bool accumulate) override {
    refuse_unsupported(*this, Op::matmul, inp.storage);
    Kernels::matmul_forward(out, inp.data, weight, shape.N, shape.in_dim, shape.out_dim,
                            accumulate);
  }
  void matmul_forward_residual(Real* out, const Real* residual, Tensor<const Real> inp,
                               const Real* weight, MatmulShape shape) override {
    matmul_residual_by_copy(*this, out, residual, inp, weight, shape);
  }
  void matmul_backward(Real* dinp, Real* dweight, Tensor<const Real> dout, Tensor<const Real> inp,
                       const Real* weight, MatmulShape shape, bool accumulate) override {
    refuse_unsupported(*this, Op::matmul, dout.storage);
    refuse_unsupported(*this, Op::matmul, inp.storage);
    Kernels::matmul_backward(dinp, dweight, dout.data, inp.data, weight, shape, accumulate);
  }
  void layernorm_forward(Tensor<Real> out, const LayerNormArgs<Real>& a) override {
    refuse_unsupported(*this, Op::layernorm, out.storage);
    Kernels::layernorm_forward(out.data, a.mean, a.rstd, a.inp, a.weight, a.bias, a.N, a.C);
  }
  void rope_backward(Tensor<Real> out, Real* dqkv, const RopeArgs<Real>& a) override {
    refuse_unsupported(*this, Op::rope, out.storage);
    copy(out.data, dqkv, rope_rows_size(a));
    Kernels::rope_backward(out.data, a);
  }
  void attention_forward(const ops::AttentionArgs<Real>& args) override {
    refuse_unsupported(*this, Op::attention, args.z.storage);
    Kernels::attention_forward(args);
  }
  void attention_backward(const ops::AttentionArgs<Real>& args) override {
    refuse_unsupported(*this, Op::attention, args.z.storage);
    Kernels::attention_backward(args);
  }
  void attention_forward_cached(const ops::AttentionArgs<Real>& args,
                                const ops::KvCache<Real>& cache) override {
    refuse_unsupported(*this, Op::attention, args.z.storage);
    Kernels::attention_forward_cached(args, cache);
  }
  void xsa_forward(const ops::AttentionArgs<Real>& a) override {
    refuse_unsupported(*this, Op::attention, a.z.storage);
    Kernels::xsa_forward(a);
  }
  void gelu_forward(Tensor<Real> out, const Real* inp, size_t n) override {
    refuse_unsupported(*this, Op::gelu, out.storage);
    Kernels::gelu_forward(out.data, inp, n);
  }
  void gelu_backward(Tensor<Real> dinp, const Real* inp, const Real* dout, size_t n) override {
    refuse_unsupported(*this, Op::gelu, dinp.storage);
    Kernels::gelu_backward(dinp.data, inp, dout, n);
  }
  // The table's plain entries (kernel_table.h's P lines): the level's kernel of the same name.
#define XSA_CPU_PLAIN(family, ret, name, params, args) \
  ret name params override {                           \
    return Kernels::name args;                         \
  }
#define XSA_CPU_OWN(...)
  XSA_KERNEL_ENTRIES(XSA_CPU_OWN, XSA_CPU_PLAIN)
#undef XSA_CPU_PLAIN
#undef XSA_CPU_OWN

  void classifier_forward_backward(const ClassifierArgs<Real>& args) override {
    classifier_by_ops(*this, args);
  }
  // Muon's iteration through this backend's own products (the bf16 backend's, where it is one).
  void newton_schulz(const ops::NewtonSchulzArgs<Real>& args) override {
    newton_schulz_by_ops(*this, args);
  }

  void xsa_alpha(Real* alpha, const Real* w, int H) override {
    for (int h = 0; h < H; h++) alpha[h] = std::tanh(w[h]);
  }
  void xsa_alpha_backward(Real* dw, const Real* dalpha, const Real* alpha, int N, int H) override {
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
};

// Mixed precision: bf16 products, everything else as the CPU backend.
template <typename Kernels>
class CpuBf16Backend final : public CpuBackend<float, Kernels> {
  using Base = CpuBackend<float, Kernels>;

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
      return Base::adamw_update(param, grad, m, v, n, settings);
    Kernels::adamw_update(param, grad, m, v, n, settings, it->second.data.data());
    it->second.updated = true;
  }
  // Memory handed back may come again as other weights: its copies go with it.
  void release(float* p, size_t n) override {
    for (auto it = weights_.begin(); it != weights_.end();)
      it = it->first >= p && it->first < p + n ? weights_.erase(it) : std::next(it);
    Base::release(p, n);
  }

  // bf16 product inputs: written so by LayerNorm, GELU, RoPE's backward and XSA, read so by the
  // products.
  bool supports(Op op, Storage storage) const override {
    return storage == Storage::fp32 || op == Op::matmul || op == Op::layernorm || op == Op::gelu ||
           op == Op::rope || op == Op::attention;
  }
  Storage product_input_storage(int rows) const override {
    return rows > 1 ? Storage::bf16 : Storage::fp32;
  }

  // An fp32 input is converted on each call; a bf16 one (a product input) is read as it is. One
  // row with fp32 inputs (decoding) stays fp32: bound by reading the weights.
  void matmul_forward(float* out, Tensor<const float> inp, const float* weight, MatmulShape shape,
                      bool accumulate) override {
    if (shape.N <= 1 && !inp.bf16())
      return Base::matmul_forward(out, inp, weight, shape, accumulate);
    ops::matmul_forward_bf16(out, as_bf16(inp, (size_t)shape.N * shape.in_dim, inp_),
                             bf16_weights(weight, shape), shape.N, shape.in_dim, shape.out_dim,
                             accumulate);
  }
  void matmul_forward_residual(float* out, const float* residual, Tensor<const float> inp,
                               const float* weight, MatmulShape shape) override {
    if (shape.N <= 1 && !inp.bf16())
      return Base::matmul_forward_residual(out, residual, inp, weight, shape);
    ops::matmul_residual_bf16(out, residual, as_bf16(inp, (size_t)shape.N * shape.in_dim, inp_),
                              bf16_weights(weight, shape), shape.N, shape.in_dim, shape.out_dim);
  }
  void matmul_backward(float* dinp, float* dweight, Tensor<const float> dout,
                       Tensor<const float> inp, const float* weight, MatmulShape shape,
                       bool accumulate) override {
    if (shape.N <= 1 && !dout.bf16() && !inp.bf16())
      return Base::matmul_backward(dinp, dweight, dout, inp, weight, shape, accumulate);
    const ops::bf16* x = dweight ? as_bf16(inp, (size_t)shape.N * shape.in_dim, inp_) : nullptr;
    ops::matmul_backward_bf16(dinp, dweight, as_bf16(dout, (size_t)shape.N * shape.out_dim, dout_),
                              x, dinp ? bf16_weights(weight, shape) : nullptr, shape, accumulate);
  }

  // The producers of product inputs, rounding as they write.
  void layernorm_forward(Tensor<float> out, const LayerNormArgs<float>& a) override {
    if (!out.bf16()) return Base::layernorm_forward(out, a);
    Kernels::layernorm_forward_bf16(out.as_bf16(), a.mean, a.rstd, a.inp, a.weight, a.bias, a.N,
                                    a.C);
  }
  void gelu_forward(Tensor<float> out, const float* inp, size_t n) override {
    if (!out.bf16()) return Base::gelu_forward(out, inp, n);
    Kernels::gelu_forward_bf16(out.as_bf16(), inp, n);
  }
  void gelu_backward(Tensor<float> dinp, const float* inp, const float* dout, size_t n) override {
    if (!dinp.bf16()) return Base::gelu_backward(dinp, inp, dout, n);
    Kernels::gelu_backward_bf16(dinp.as_bf16(), inp, dout, n);
  }
  void rope_backward(Tensor<float> out, float* dqkv, const RopeArgs<float>& a) override {
    if (!out.bf16()) return Base::rope_backward(out, dqkv, a);
    Kernels::rope_backward_bf16(out.as_bf16(), dqkv, a);
  }

  // Attention's tile products in bf16 too (the softmax and the accumulations stay fp32); z as the
  // args' storage says.
  void attention_forward(const ops::AttentionArgs<float>& args) override {
    Kernels::attention_forward(args, Storage::bf16);
  }
  void attention_backward(const ops::AttentionArgs<float>& args) override {
    Kernels::attention_backward(args, Storage::bf16);
  }

  // The head with its gradient written in bf16 by the cross-entropy itself (no separate pass over
  // the chunk's logits to convert them for the backward's products).
  void classifier_forward_backward(const ClassifierArgs<float>& a) override {
    if (a.rows <= 1 || a.softcap > 0) return classifier_by_ops(*this, a);
    const MatmulShape shape{a.rows, a.C, a.Vp};
    const ops::bf16* w = bf16_weights(a.wte, shape);
    const ops::bf16* x = as_bf16(a.inp, (size_t)a.rows * a.C, inp_);
    ops::matmul_forward_bf16(a.logits, x, w, a.rows, a.C, a.Vp, false);
    if (a.dloss == 0.0f)
      return Kernels::crossentropy_forward_backward(a.logits, a.losses, a.targets, a.rows, a.V,
                                                    a.Vp, a.dloss);
    if (dlogits_.size() < (size_t)a.rows * a.Vp) dlogits_.resize((size_t)a.rows * a.Vp);
    Kernels::crossentropy_forward_backward_bf16(a.logits, dlogits_.data(), a.losses, a.targets,
                                                a.rows, a.V, a.Vp, a.dloss);
    ops::matmul_backward_bf16(a.dinp, a.dwte, dlogits_.data(), x, w, shape, a.accumulate);
  }

 private:
  // A product's input in bf16: a bf16 tensor as it is, an fp32 one converted into `buf`.
  const ops::bf16* as_bf16(Tensor<const float> x, size_t n, std::vector<ops::bf16>& buf) {
    if (x.bf16()) return x.as_bf16();
    if (buf.size() < n) buf.resize(n);
    Kernels::to_bf16(x.data, buf.data(), n);
    return buf.data();
  }
  // A weight matrix's bf16 copy, made on first use after weights_changed().
  const ops::bf16* bf16_weights(const float* weight, MatmulShape shape) {
    const size_t n = (size_t)shape.in_dim * shape.out_dim;
    WeightCopy& copy = weights_[weight];
    if (!copy.fresh || copy.data.size() != n) {
      copy.data.resize(n);
      Kernels::to_bf16(weight, copy.data.data(), n);
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

Backend<float>& cpu_backend(Precision precision) {
  switch (precision) {
    case Precision::fp32:
      return cpu_backend<float>();
    case Precision::bf16: {
      std::string why;
      if (!bf16_products_available(&why)) fail("--precision bf16: {}", why);
        // At the level util/cpu.h chose (XSA_CPU; set_cpu_level, for what is made after it).
#if defined(XSA_HAS_AVX512_LEVEL)
      static CpuBf16Backend<ops::Avx512Kernels> avx512;
      if (cpu_level() >= CpuLevel::avx512) return avx512;
#endif
      static CpuBf16Backend<ops::BaselineKernels> baseline;
      return baseline;
    }
  }
  fail("the CPU backend has no precision {}", to_string(precision));
}

bool bf16_products_available(std::string* why) {
  return ops::bf16_available(why);
}

// One backend per level and process, the one of the level util/cpu.h chose returned (XSA_CPU;
// set_cpu_level, for what is made after it).
template <typename Real>
Backend<Real>& cpu_backend() {
#if defined(XSA_HAS_AVX512_LEVEL)
  static CpuBackend<Real, ops::Avx512Kernels> avx512;
  if (cpu_level() >= CpuLevel::avx512) return avx512;
#endif
  static CpuBackend<Real, ops::BaselineKernels> baseline;
  return baseline;
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

// The seam between the model and the hardware. A backend owns the memory it computes on (each
// buffer knows its device and its backend releases it) and runs every op of the model's forward
// and backward, the optimizer and the reductions on that memory. The model (model/), the training
// step (train/) and the decoder reach ops only through a Backend; the CPU backend (cpu_backend.cpp)
// dispatches to the kernels in ops/. Another device (CUDA) is another implementation of this
// interface in its own files.
//
// Conventions: device pointers everywhere, except token ids (inputs, targets), which stay on the
// host — a device backend copies the B·T ids itself. Sizes and layouts as in ops/ops.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "xsa/ops/ops.h"

namespace xsa {

enum class Device : uint8_t { cpu, cuda };
inline const char* to_string(Device device) {
  return device == Device::cuda ? "cuda" : "cpu";
}

// What a buffer holds, so a backend can place it well (the CPU backend puts inference weights on
// transparent huge pages: decoding streams them once per token).
enum class MemoryUse : uint8_t { weights, inference_weights, gradients, optimizer, activations };

template <typename Real>
class Backend;

// Memory on one device, allocated and released by its backend; zeroed when allocated.
template <typename Real>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Backend<Real>& backend, size_t n, MemoryUse use);
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  ~DeviceBuffer();

  Real* data() { return data_; }
  const Real* data() const { return data_; }
  size_t size() const { return size_; }
  Backend<Real>* backend() const { return backend_; }
  void zero();

 private:
  Backend<Real>* backend_ = nullptr;
  Real* data_ = nullptr;
  size_t size_ = 0;
};

// The contents of a buffer where host code can read and write them (initialisation, checkpoint
// I/O, analysis): the buffer itself where the host can address it, else a copy, written back on
// destruction when `write_back`.
template <typename Real>
class HostView {
 public:
  HostView(DeviceBuffer<Real>& buffer, bool write_back);
  explicit HostView(const DeviceBuffer<Real>& buffer);  // read only
  HostView(const HostView&) = delete;
  HostView& operator=(const HostView&) = delete;
  // Writes back; a device error there propagates (one line from the CLI) unless the view is being
  // destroyed by another exception's unwinding, which then stays the one reported.
  ~HostView() noexcept(false);
  Real* data() { return data_; }
  const Real* data() const { return data_; }

 private:
  DeviceBuffer<Real>* buffer_ = nullptr;
  std::vector<Real> copy_;
  Real* data_ = nullptr;
  bool write_back_ = false;
};

template <typename Real>
class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  // Whether host code may dereference this backend's pointers (the CPU: yes).
  virtual bool host_addressable() const = 0;
  // One line for logs and benchmarks: the device and how it computes.
  virtual std::string describe() const { return to_string(device()); }
  // The device memory free and in all, where the backend knows them (a GPU), for fitting a run
  // before it starts.
  virtual bool memory_info(size_t* free_bytes, size_t* total_bytes) { return false; }
  // The device's dense bf16 tensor-core peak in FLOP/s where known (a GPU), for model FLOPs
  // utilisation; 0 where not.
  virtual double peak_bf16_flops() const { return 0; }
  // Waits for the work queued so far (a device that runs asynchronously); timing needs it.
  virtual void synchronize() {}

  // ---- memory ----
  // Zeroed. Throws std::bad_alloc, or (a GPU) Error with the memory needed and free.
  virtual Real* allocate(size_t n, MemoryUse use) = 0;
  virtual void release(Real* p, size_t n) = 0;
  virtual void fill_zero(Real* p, size_t n) = 0;
  virtual void copy(Real* dst, const Real* src, size_t n) = 0;        // device → device
  virtual void to_host(Real* host, const Real* src, size_t n) = 0;    // device → host
  virtual void from_host(Real* dst, const Real* host, size_t n) = 0;  // host → device
  // dst[r·dst_stride …] = src[r·src_stride …], `width` elements of each of `rows` rows.
  virtual void copy_rows(Real* dst, size_t dst_stride, const Real* src, size_t src_stride, int rows,
                         int width) = 0;
  // dst [n, width] = table rows index[0 … n) (host indices).
  virtual void gather_rows(Real* dst, const Real* table, const int* index, int n, int width) = 0;

  // ---- the model's ops (ops/ops.h documents each) ----
  virtual void matmul_forward(Real* out, const Real* inp, const Real* weight, int N, int in_dim,
                              int out_dim, bool accumulate) = 0;
  // out = residual + inp · Wᵀ, a residual connection (out may be residual). This form copies and
  // accumulates; a backend that can add the residual inside the product (oneDNN's binary
  // post-op) saves the copy.
  virtual void matmul_forward_residual(Real* out, const Real* residual, const Real* inp,
                                       const Real* weight, int N, int in_dim, int out_dim) {
    copy(out, residual, (size_t)N * out_dim);
    matmul_forward(out, inp, weight, N, in_dim, out_dim, /*accumulate=*/true);
  }
  // dinp = dout · W; dweight accumulates doutᵀ · inp, or with accumulate false is overwritten (a
  // step's first contribution). Either may be null: that product is skipped (inp unread without
  // dweight).
  virtual void matmul_backward(Real* dinp, Real* dweight, const Real* dout, const Real* inp,
                               const Real* weight, int N, int in_dim, int out_dim,
                               bool accumulate) = 0;
  // ---- product inputs: activations that only matrix products read ----
  // LayerNorm's outputs before the qkv and fc products and GELU's before the MLP's projection are
  // read by those products alone, forward and (for the weight gradients) backward. A backend with
  // bf16 products may keep them as bf16 in the first half of their buffers: written so by the
  // producers below and read so by the products below. That saves each product's conversion of
  // its input and half of the producer's writing. The model calls these for such buffers only,
  // with the same N on both sides; these defaults are the plain fp32 ops.
  virtual void layernorm_forward_product_input(Real* out, Real* mean, Real* rstd, const Real* inp,
                                               const Real* weight, const Real* bias, int N, int C) {
    layernorm_forward(out, mean, rstd, inp, weight, bias, N, C);
  }
  virtual void gelu_forward_product_input(Real* out, const Real* inp, int N, int width) {
    gelu_forward(out, inp, (size_t)N * width);
  }
  virtual void matmul_forward_product_input(Real* out, const Real* inp, const Real* weight, int N,
                                            int in_dim, int out_dim) {
    matmul_forward(out, inp, weight, N, in_dim, out_dim, false);
  }
  virtual void matmul_forward_residual_product_input(Real* out, const Real* residual,
                                                     const Real* inp, const Real* weight, int N,
                                                     int in_dim, int out_dim) {
    matmul_forward_residual(out, residual, inp, weight, N, in_dim, out_dim);
  }
  virtual void matmul_backward_product_input(Real* dinp, Real* dweight, const Real* dout,
                                             const Real* inp, const Real* weight, int N, int in_dim,
                                             int out_dim, bool accumulate) {
    matmul_backward(dinp, dweight, dout, inp, weight, N, in_dim, out_dim, accumulate);
  }

  // Gradients that only products read are product inputs too: GELU's input gradient before W_fc's
  // backward (when fc has no bias, whose gradient reads it) and the rotated ∂L/∂qkv before W_qkv's
  // (likewise without a qkv bias). Computing them in place keeps fp32, so a backend that keeps them
  // as bf16 writes them into `spare` instead (a buffer free at that point, of at least N·width/2
  // floats, N·(C + 2·Hkv·D)/2 for RoPE); each returns where the gradient now is, to give to
  // matmul_backward_product_inputs. The defaults compute in place and return that.
  virtual const Real* gelu_backward_product_input(Real* grad, const Real* inp, Real* spare, int N,
                                                  int width) {
    gelu_backward(grad, inp, grad, (size_t)N * width);
    return grad;
  }
  virtual const Real* rope_backward_product_input(Real* dqkv, const Real* cos, const Real* sin,
                                                  int B, int T, int C, int H, int Hkv,
                                                  Real* spare) {
    rope_backward(dqkv, cos, sin, B, T, C, H, Hkv);
    return dqkv;
  }
  // matmul_backward with dout and inp both product inputs.
  virtual void matmul_backward_product_inputs(Real* dinp, Real* dweight, const Real* dout,
                                              const Real* inp, const Real* weight, int N,
                                              int in_dim, int out_dim, bool accumulate) {
    matmul_backward(dinp, dweight, dout, inp, weight, N, in_dim, out_dim, accumulate);
  }

  // XSA's z is read by W_o's products alone, forward and (written again by the attention backward)
  // for W_o's weight gradient: the attention may write it as a product input, to be read by the
  // product-input products above. The defaults are the plain attention.
  virtual void attention_forward_product_input(const ops::AttentionArgs<Real>& args) {
    attention_forward(args);
  }
  virtual void attention_backward_product_input(const ops::AttentionArgs<Real>& args) {
    attention_backward(args);
  }

  virtual void bias_forward(Real* out, const Real* bias, int N, int D) = 0;
  virtual void bias_backward(Real* dbias, const Real* dout, int N, int D) = 0;
  virtual void encoder_forward(Real* out, const int32_t* tokens, const Real* wte, int N, int C) = 0;
  virtual void embedding_add(Real* out, const int32_t* index, const Real* table, int N, int C) = 0;
  virtual void encoder_backward(Real* dwte, const Real* dout, const int32_t* tokens, int N,
                                int C) = 0;
  virtual void layernorm_forward(Real* out, Real* mean, Real* rstd, const Real* inp,
                                 const Real* weight, const Real* bias, int N, int C) = 0;
  virtual void layernorm_backward(Real* dinp, Real* dweight, Real* dbias, const Real* dout,
                                  const Real* inp, const Real* weight, const Real* mean,
                                  const Real* rstd, int N, int C) = 0;
  virtual void rope_table(Real* cos, Real* sin, int T, int D, double theta) = 0;
  virtual void rope_forward(Real* qkv, const Real* cos, const Real* sin, int B, int T, int C, int H,
                            int Hkv) = 0;
  virtual void rope_backward(Real* dqkv, const Real* cos, const Real* sin, int B, int T, int C,
                             int H, int Hkv) = 0;
  virtual void attention_forward(const ops::AttentionArgs<Real>& args) = 0;
  virtual void attention_backward(const ops::AttentionArgs<Real>& args) = 0;
  virtual void attention_forward_cached(const ops::AttentionArgs<Real>& args,
                                        const ops::KvCache<Real>& cache) = 0;
  virtual void xsa_forward(Real* z, const Real* y, const Real* qkv, int B, int T, int C, int H,
                           const Real* alpha, int Hkv) = 0;
  virtual void gelu_forward(Real* out, const Real* inp, size_t n) = 0;
  virtual void gelu_backward(Real* dinp, const Real* inp, const Real* dout, size_t n) = 0;
  virtual void crossentropy_forward_backward(Real* logits, Real* losses, const int32_t* targets,
                                             int N, int V, int Vp, Real dloss) = 0;
  // The tied classifier on `rows` rows: logits [rows, Vp] (scratch) = inp · wteᵀ, the fused
  // softmax-cross-entropy into losses, and with dloss ≠ 0 its backward: dinp = dlogits · wte,
  // dwte += dlogitsᵀ · inp (= when not accumulate). The three ops above by default; a backend may
  // fuse them.
  virtual void classifier_forward_backward(Real* logits, Real* losses, const int32_t* targets,
                                           const Real* inp, const Real* wte, Real* dinp, Real* dwte,
                                           int rows, int C, int V, int Vp, Real dloss,
                                           bool accumulate) {
    matmul_forward(logits, inp, wte, rows, C, Vp, false);
    crossentropy_forward_backward(logits, losses, targets, rows, V, Vp, dloss);
    if (dloss != Real(0)) matmul_backward(dinp, dwte, logits, inp, wte, rows, C, Vp, accumulate);
  }

  // ---- gates and sinks: their per-head parameters and gradients ----
  // alpha [H] = tanh(w [H]).
  virtual void gate_alpha(Real* alpha, const Real* w, int H) = 0;
  // dw [H] += (1 − α_h²) Σ_n dalpha [N, H], summed in row order.
  virtual void gate_backward(Real* dw, const Real* dalpha, const Real* alpha, int N, int H) = 0;
  // dsink [H] += Σ_b dlogit [B, H], in order.
  virtual void sink_backward(Real* dsink, const Real* dlogit, int B, int H) = 0;

  // ---- reductions and the optimizer ----
  virtual double sum(const Real* x, size_t n) = 0;             // in order, in double
  virtual double sum_of_squares(const Real* x, size_t n) = 0;  // thread-count independent
  // The weights in [begin, begin + n) changed outside the ops above (an optimizer step, weights
  // loaded or gathered): a backend that keeps derived copies of them (bf16) drops those, and keeps
  // those of other weights (another model in the same process: `compare`'s arms, `bench`'s SA and
  // XSA). begin == nullptr: every weight.
  virtual void weights_changed(const Real* begin, size_t n) {}
  void weights_changed() { weights_changed(nullptr, 0); }
  // Decoupled AdamW, one tensor.
  virtual void adamw_update(Real* param, const Real* grad, Real* m, Real* v, size_t n,
                            const ops::AdamWSettings& settings) = 0;
};

// Whether p lies in the range [begin, begin + n) given to weights_changed (begin == nullptr: all).
template <typename Real>
bool in_changed_range(const Real* p, const Real* begin, size_t n) {
  const auto at = reinterpret_cast<uintptr_t>(p), from = reinterpret_cast<uintptr_t>(begin);
  return !begin || (at >= from && at - from < n * sizeof(Real));
}

// The process's CPU backend (OpenBLAS products, OpenMP kernels).
template <typename Real>
Backend<Real>& cpu_backend();

// The CPU backend with mixed-precision products: matrix products take bf16 copies of their inputs
// (weights converted once per weights_changed(), activations on each call) and accumulate in
// fp32 (oneDNN); every other op, the master weights, the gradients and the optimizer stay fp32.
// Products of one row (decoding) stay fp32: they are bound by reading the weights.
Backend<float>& cpu_bf16_backend();
// `inner`'s kernels on memory that host code cannot dereference (`--device isolated`): a test
// device standing in for a GPU, on which every access outside the backend faults.
Backend<float>& isolated_backend(Backend<float>& inner);
// Whether bf16 products can run here: a build with oneDNN and a CPU with AVX512_BF16 or AMX-BF16.
// When not, `why` says what is missing.
bool bf16_products_available(std::string* why);

}  // namespace xsa

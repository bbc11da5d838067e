// `--device isolated`: the CPU's kernels on memory that host code cannot touch, standing in for a
// GPU where there is none. Every pointer this backend hands out is its real address moved by
// kOffset into the non-canonical half of the address space: arithmetic on it works as on a device
// pointer, and any dereference outside the backend faults at once. So a run through it proves
// that the model, the trainer, checkpoints, evaluation, sampling and analysis reach device memory
// only through the Backend seam (HostView, to_host, from_host) — the first thing a GPU run would
// otherwise find out — while computing exactly what the CPU backend computes.
#include <cstdint>

#include "xsa/backend/backend.h"

namespace xsa {
namespace {

constexpr uintptr_t kOffset = uintptr_t(1) << 62;

template <typename T>
T* real(T* p) {
  return p ? reinterpret_cast<T*>(reinterpret_cast<uintptr_t>(p) - kOffset) : nullptr;
}
// The opposite: an address of the inner backend's memory as this backend hands it out.
template <typename T>
T* device_address(T* p) {
  return p ? reinterpret_cast<T*>(reinterpret_cast<uintptr_t>(p) + kOffset) : nullptr;
}

class IsolatedBackend final : public Backend<float> {
 public:
  explicit IsolatedBackend(Backend<float>& inner) : cpu_(inner) {}

  Device device() const override { return Device::cpu; }
  bool host_addressable() const override { return false; }
  std::string describe() const override { return "isolated (CPU kernels, memory off limits)"; }

  float* allocate(size_t n, MemoryUse use) override {
    return device_address(cpu_.allocate(n, use));
  }
  void release(float* p, size_t n) override { cpu_.release(real(p), n); }
  void fill_zero(float* p, size_t n) override { cpu_.fill_zero(real(p), n); }
  void copy(float* dst, const float* src, size_t n) override { cpu_.copy(real(dst), real(src), n); }
  void to_host(float* host, const float* src, size_t n) override { cpu_.copy(host, real(src), n); }
  void from_host(float* dst, const float* host, size_t n) override {
    cpu_.copy(real(dst), host, n);
  }
  void copy_rows(float* dst, size_t dst_stride, const float* src, size_t src_stride, int rows,
                 int width) override {
    cpu_.copy_rows(real(dst), dst_stride, real(src), src_stride, rows, width);
  }
  void gather_rows(float* dst, const float* table, const int* index, int n, int width) override {
    cpu_.gather_rows(real(dst), real(table), index, n, width);
  }

  void matmul_forward(float* out, const float* inp, const float* weight, int N, int in_dim,
                      int out_dim, bool accumulate) override {
    cpu_.matmul_forward(real(out), real(inp), real(weight), N, in_dim, out_dim, accumulate);
  }
  void matmul_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                       const float* weight, int N, int in_dim, int out_dim,
                       bool accumulate) override {
    cpu_.matmul_backward(real(dinp), real(dweight), real(dout), real(inp), real(weight), N, in_dim,
                         out_dim, accumulate);
  }
  void bias_forward(float* out, const float* bias, int N, int D) override {
    cpu_.bias_forward(real(out), real(bias), N, D);
  }
  void bias_backward(float* dbias, const float* dout, int N, int D) override {
    cpu_.bias_backward(real(dbias), real(dout), N, D);
  }
  void encoder_forward(float* out, const int32_t* tokens, const float* wte, int N, int C) override {
    cpu_.encoder_forward(real(out), tokens, real(wte), N, C);
  }
  void embedding_add(float* out, const int32_t* index, const float* table, int N, int C) override {
    cpu_.embedding_add(real(out), index, real(table), N, C);
  }
  void encoder_backward(float* dwte, const float* dout, const int32_t* tokens, int N,
                        int C) override {
    cpu_.encoder_backward(real(dwte), real(dout), tokens, N, C);
  }
  void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                         const float* weight, const float* bias, int N, int C) override {
    cpu_.layernorm_forward(real(out), real(mean), real(rstd), real(inp), real(weight), real(bias),
                           N, C);
  }
  void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                          const float* inp, const float* weight, const float* mean,
                          const float* rstd, int N, int C) override {
    cpu_.layernorm_backward(real(dinp), real(dweight), real(dbias), real(dout), real(inp),
                            real(weight), real(mean), real(rstd), N, C);
  }
  void rope_table(float* cos, float* sin, int T, int D, double theta) override {
    cpu_.rope_table(real(cos), real(sin), T, D, theta);
  }
  void rope_forward(float* qkv, const float* cos, const float* sin, int B, int T, int C, int H,
                    int Hkv) override {
    cpu_.rope_forward(real(qkv), real(cos), real(sin), B, T, C, H, Hkv);
  }
  void rope_backward(float* dqkv, const float* cos, const float* sin, int B, int T, int C, int H,
                     int Hkv) override {
    cpu_.rope_backward(real(dqkv), real(cos), real(sin), B, T, C, H, Hkv);
  }
  void attention_forward(const ops::AttentionArgs<float>& args) override {
    cpu_.attention_forward(on_host(args));
  }
  void attention_backward(const ops::AttentionArgs<float>& args) override {
    cpu_.attention_backward(on_host(args));
  }
  void attention_forward_cached(const ops::AttentionArgs<float>& args,
                                const ops::KvCache<float>& cache) override {
    ops::KvCache<float> c = cache;  // the spans are host data
    c.k = real(cache.k), c.v = real(cache.v);
    cpu_.attention_forward_cached(on_host(args), c);
  }
  void xsa_forward(float* z, const float* y, const float* qkv, int B, int T, int C, int H,
                   const float* alpha, int Hkv) override {
    cpu_.xsa_forward(real(z), real(y), real(qkv), B, T, C, H, real(alpha), Hkv);
  }
  void gelu_forward(float* out, const float* inp, size_t n) override {
    cpu_.gelu_forward(real(out), real(inp), n);
  }
  void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n) override {
    cpu_.gelu_backward(real(dinp), real(inp), real(dout), n);
  }
  void crossentropy_forward_backward(float* logits, float* losses, const int32_t* targets, int N,
                                     int V, int Vp, float dloss) override {
    cpu_.crossentropy_forward_backward(real(logits), real(losses), targets, N, V, Vp, dloss);
  }
  void classifier_forward_backward(float* logits, float* losses, const int32_t* targets,
                                   const float* inp, const float* wte, float* dinp, float* dwte,
                                   int rows, int C, int V, int Vp, float dloss,
                                   bool accumulate) override {
    cpu_.classifier_forward_backward(real(logits), real(losses), targets, real(inp), real(wte),
                                     real(dinp), real(dwte), rows, C, V, Vp, dloss, accumulate);
  }
  // The inner backend's own forms of these (a bf16 backend's product inputs, oneDNN's residual
  // post-op), not the interface's plain defaults: exactly what the inner backend computes.
  void matmul_forward_residual(float* out, const float* residual, const float* inp,
                               const float* weight, int N, int in_dim, int out_dim) override {
    cpu_.matmul_forward_residual(real(out), real(residual), real(inp), real(weight), N, in_dim,
                                 out_dim);
  }
  void layernorm_forward_product_input(float* out, float* mean, float* rstd, const float* inp,
                                       const float* weight, const float* bias, int N,
                                       int C) override {
    cpu_.layernorm_forward_product_input(real(out), real(mean), real(rstd), real(inp), real(weight),
                                         real(bias), N, C);
  }
  void gelu_forward_product_input(float* out, const float* inp, int N, int width) override {
    cpu_.gelu_forward_product_input(real(out), real(inp), N, width);
  }
  void matmul_forward_product_input(float* out, const float* inp, const float* weight, int N,
                                    int in_dim, int out_dim) override {
    cpu_.matmul_forward_product_input(real(out), real(inp), real(weight), N, in_dim, out_dim);
  }
  void matmul_forward_residual_product_input(float* out, const float* residual, const float* inp,
                                             const float* weight, int N, int in_dim,
                                             int out_dim) override {
    cpu_.matmul_forward_residual_product_input(real(out), real(residual), real(inp), real(weight),
                                               N, in_dim, out_dim);
  }
  void matmul_backward_product_input(float* dinp, float* dweight, const float* dout,
                                     const float* inp, const float* weight, int N, int in_dim,
                                     int out_dim, bool accumulate) override {
    cpu_.matmul_backward_product_input(real(dinp), real(dweight), real(dout), real(inp),
                                       real(weight), N, in_dim, out_dim, accumulate);
  }
  const float* gelu_backward_product_input(float* grad, const float* inp, float* spare, int N,
                                           int width) override {
    return device_address(
        cpu_.gelu_backward_product_input(real(grad), real(inp), real(spare), N, width));
  }
  const float* rope_backward_product_input(float* dqkv, const float* cos, const float* sin, int B,
                                           int T, int C, int H, int Hkv, float* spare) override {
    return device_address(cpu_.rope_backward_product_input(real(dqkv), real(cos), real(sin), B, T,
                                                           C, H, Hkv, real(spare)));
  }
  void matmul_backward_product_inputs(float* dinp, float* dweight, const float* dout,
                                      const float* inp, const float* weight, int N, int in_dim,
                                      int out_dim, bool accumulate) override {
    cpu_.matmul_backward_product_inputs(real(dinp), real(dweight), real(dout), real(inp),
                                        real(weight), N, in_dim, out_dim, accumulate);
  }
  void attention_forward_product_input(const ops::AttentionArgs<float>& args) override {
    cpu_.attention_forward_product_input(on_host(args));
  }
  void attention_backward_product_input(const ops::AttentionArgs<float>& args) override {
    cpu_.attention_backward_product_input(on_host(args));
  }
  void gate_alpha(float* alpha, const float* w, int H) override {
    cpu_.gate_alpha(real(alpha), real(w), H);
  }
  void gate_backward(float* dw, const float* dalpha, const float* alpha, int N, int H) override {
    cpu_.gate_backward(real(dw), real(dalpha), real(alpha), N, H);
  }
  void sink_backward(float* dsink, const float* dlogit, int B, int H) override {
    cpu_.sink_backward(real(dsink), real(dlogit), B, H);
  }
  double sum(const float* x, size_t n) override { return cpu_.sum(real(x), n); }
  double sum_of_squares(const float* x, size_t n) override {
    return cpu_.sum_of_squares(real(x), n);
  }
  void weights_changed(const float* begin, size_t n) override {
    cpu_.weights_changed(real(begin), n);
  }
  void adamw_update(float* param, const float* grad, float* m, float* v, size_t n,
                    const ops::AdamWSettings& settings) override {
    cpu_.adamw_update(real(param), real(grad), real(m), real(v), n, settings);
  }

 private:
  static ops::AttentionArgs<float> on_host(ops::AttentionArgs<float> a) {
    a.qkv = real(a.qkv), a.y = real(a.y), a.z = real(a.z), a.lse = real(a.lse);
    a.alpha = real(a.alpha), a.sink = real(a.sink), a.dqkv = real(a.dqkv);
    a.d_out = real(a.d_out), a.dalpha = real(a.dalpha), a.dsink = real(a.dsink);
    return a;
  }
  Backend<float>& cpu_;
};

}  // namespace

Backend<float>& isolated_backend(Backend<float>& inner) {
  static IsolatedBackend fp32(cpu_backend<float>());
  if (&inner == &cpu_backend<float>()) return fp32;
  static IsolatedBackend bf16(cpu_bf16_backend());
  return bf16;
}

}  // namespace xsa

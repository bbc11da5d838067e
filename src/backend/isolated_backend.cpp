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
template <typename T>
Tensor<T> real(Tensor<T> t) {
  return {real(t.data), t.storage};
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

  bool memory_info(size_t* free_bytes, size_t* total_bytes) override {
    return cpu_.memory_info(free_bytes, total_bytes);
  }
  PeakFlops peak_flops() const override { return cpu_.peak_flops(); }
  void synchronize() override { cpu_.synchronize(); }

  // The inner backend's table and storage: exactly what it computes, bf16 product inputs included.
  bool supports(Op op, Storage storage) const override { return cpu_.supports(op, storage); }
  Storage product_input_storage(int rows) const override {
    return cpu_.product_input_storage(rows);
  }
  void matmul_forward(float* out, Tensor<const float> inp, const float* weight, MatmulShape shape,
                      bool accumulate) override {
    cpu_.matmul_forward(real(out), real(inp), real(weight), shape, accumulate);
  }
  void matmul_forward_residual(float* out, const float* residual, Tensor<const float> inp,
                               const float* weight, MatmulShape shape) override {
    cpu_.matmul_forward_residual(real(out), real(residual), real(inp), real(weight), shape);
  }
  void matmul_backward(float* dinp, float* dweight, Tensor<const float> dout,
                       Tensor<const float> inp, const float* weight, MatmulShape shape,
                       bool accumulate) override {
    cpu_.matmul_backward(real(dinp), real(dweight), real(dout), real(inp), real(weight), shape,
                         accumulate);
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
  void layernorm_forward(Tensor<float> out, const LayerNormArgs<float>& args) override {
    cpu_.layernorm_forward(real(out), on_host(args));
  }
  void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                          const LayerNormArgs<float>& args) override {
    cpu_.layernorm_backward(real(dinp), real(dweight), real(dbias), real(dout), on_host(args));
  }
  void rope_table(float* cos, float* sin, int T, int D, double theta) override {
    cpu_.rope_table(real(cos), real(sin), T, D, theta);
  }
  void rope_forward(float* qkv, const RopeArgs<float>& args) override {
    cpu_.rope_forward(real(qkv), on_host(args));
  }
  void rope_backward(Tensor<float> out, float* dqkv, const RopeArgs<float>& args) override {
    cpu_.rope_backward(real(out), real(dqkv), on_host(args));
  }
  void xsa_forward(const ops::AttentionArgs<float>& args) override {
    cpu_.xsa_forward(on_host(args));
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
  void gelu_forward(Tensor<float> out, const float* inp, size_t n) override {
    cpu_.gelu_forward(real(out), real(inp), n);
  }
  void gelu_backward(Tensor<float> dinp, const float* inp, const float* dout, size_t n) override {
    cpu_.gelu_backward(real(dinp), real(inp), real(dout), n);
  }
  void crossentropy_forward_backward(float* logits, float* losses, const int32_t* targets, int N,
                                     int V, int Vp, float dloss) override {
    cpu_.crossentropy_forward_backward(real(logits), real(losses), targets, N, V, Vp, dloss);
  }
  void classifier_forward_backward(const ClassifierArgs<float>& a) override {
    ClassifierArgs<float> h = a;  // the targets are host data
    h.logits = real(a.logits), h.losses = real(a.losses), h.inp = real(a.inp);
    h.wte = real(a.wte), h.dinp = real(a.dinp), h.dwte = real(a.dwte);
    cpu_.classifier_forward_backward(h);
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
  void output_gate_forward(float* out, const float* u, const float* pre, size_t n) override {
    cpu_.output_gate_forward(real(out), real(u), real(pre), n);
  }
  void output_gate_backward(float* d_u, float* d_pre, const float* d_out, const float* u,
                            const float* pre, size_t n) override {
    cpu_.output_gate_backward(real(d_u), real(d_pre), real(d_out), real(u), real(pre), n);
  }
  void add_rows(float* dst, size_t dst_stride, const float* src, size_t src_stride, int rows,
                int width) override {
    cpu_.add_rows(real(dst), dst_stride, real(src), src_stride, rows, width);
  }
  void value_mix_forward(const ops::ValueMixArgs<float>& args) override {
    cpu_.value_mix_forward(on_host(args));
  }
  void value_mix_backward(const ops::ValueMixArgs<float>& args) override {
    cpu_.value_mix_backward(on_host(args));
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
  static LayerNormArgs<float> on_host(LayerNormArgs<float> a) {
    a.inp = real(a.inp), a.weight = real(a.weight), a.bias = real(a.bias);
    a.mean = real(a.mean), a.rstd = real(a.rstd);
    return a;
  }
  static RopeArgs<float> on_host(RopeArgs<float> a) {
    a.cos = real(a.cos), a.sin = real(a.sin);
    return a;
  }
  static ops::AttentionArgs<float> on_host(ops::AttentionArgs<float> a) {
    a.qkv = real(a.qkv), a.y = real(a.y), a.z = real(a.z), a.lse = real(a.lse);
    a.alpha = real(a.alpha), a.sink = real(a.sink), a.dqkv = real(a.dqkv);
    a.d_out = real(a.d_out), a.dalpha = real(a.dalpha), a.dsink = real(a.dsink);
    return a;
  }
  static ops::ValueMixArgs<float> on_host(ops::ValueMixArgs<float> a) {
    a.qkv = real(a.qkv), a.v_raw = real(a.v_raw), a.v_first = real(a.v_first);
    a.lambda = real(a.lambda), a.dqkv = real(a.dqkv), a.d_first = real(a.d_first);
    a.dlambda = real(a.dlambda);
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

// `--device isolated`: the CPU's kernels on memory that host code cannot touch, standing in for a
// GPU where there is none. Every pointer this backend hands out is its real address moved by
// kOffset into the non-canonical half of the address space: arithmetic on it works as on a device
// pointer, and any dereference outside the backend faults at once. So a run through it proves
// that the model, the trainer, checkpoints, evaluation, sampling and analysis reach device memory
// only through the Backend seam (HostView, to_host, from_host) — the first thing a GPU run would
// otherwise find out — while computing exactly what the CPU backend computes.
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "xsa/backend/forwarding_backend.h"

namespace xsa {
namespace {

constexpr uintptr_t kOffset = uintptr_t(1) << 62;

// The opposite of DeviceAddresses: an address of the inner backend's memory as this backend hands
// it out.
template <typename T>
T* device_address(T* p) {
  return p ? reinterpret_cast<T*>(reinterpret_cast<uintptr_t>(p) + kOffset) : nullptr;
}

// Every device address of a call moved back to the inner backend's memory: the pointers, the
// tensors and the pointers inside the argument structs (their host parts, token ids and cache
// spans, as they are).
struct DeviceAddresses {
  template <typename T>
  static T* in(T* p) {
    if constexpr (kPassesThrough<T*>)
      return p;
    else
      return p ? reinterpret_cast<T*>(reinterpret_cast<uintptr_t>(p) - kOffset) : nullptr;
  }
  template <typename T>
  static Tensor<T> in(Tensor<T> t) {
    return {in(t.data), t.storage};
  }
  template <typename T>
  static T in(const T& x) {
    static_assert(kPassesThrough<T>, "DeviceAddresses: teach in() this argument's device pointers");
    return x;
  }
  static LayerNormArgs<float> in(LayerNormArgs<float> a) {
    a.inp = in(a.inp), a.weight = in(a.weight), a.bias = in(a.bias);
    a.mean = in(a.mean), a.rstd = in(a.rstd);
    return a;
  }
  static RopeArgs<float> in(RopeArgs<float> a) {
    a.cos = in(a.cos), a.sin = in(a.sin);
    return a;
  }
  static ops::AttentionArgs<float> in(ops::AttentionArgs<float> a) {
    a.qkv = in(a.qkv), a.y = in(a.y), a.z = in(a.z), a.lse = in(a.lse);
    a.alpha = in(a.alpha), a.sink = in(a.sink), a.dqkv = in(a.dqkv);
    a.d_out = in(a.d_out), a.dalpha = in(a.dalpha), a.dsink = in(a.dsink);
    return a;
  }
  static ops::KvCache<float> in(ops::KvCache<float> c) {
    c.k = in(c.k), c.v = in(c.v);
    return c;
  }
  static ops::ValueMixArgs<float> in(ops::ValueMixArgs<float> a) {
    a.qkv = in(a.qkv), a.v_raw = in(a.v_raw), a.v_first = in(a.v_first);
    a.lambda = in(a.lambda), a.dqkv = in(a.dqkv), a.d_first = in(a.d_first);
    a.dlambda = in(a.dlambda);
    return a;
  }
  static ops::QkNormArgs<float> in(ops::QkNormArgs<float> a) {
    a.qkv = in(a.qkv), a.raw = in(a.raw), a.rstd = in(a.rstd);
    a.q_scale = in(a.q_scale), a.k_scale = in(a.k_scale), a.dqkv = in(a.dqkv);
    a.dq_scale = in(a.dq_scale), a.dk_scale = in(a.dk_scale);
    return a;
  }
  static ops::NewtonSchulzArgs<float> in(ops::NewtonSchulzArgs<float> a) {
    a.x = in(a.x), a.next = in(a.next), a.gram = in(a.gram), a.gram2 = in(a.gram2);
    a.poly = in(a.poly);
    return a;
  }
  static ClassifierArgs<float> in(ClassifierArgs<float> a) {
    a.logits = in(a.logits), a.losses = in(a.losses), a.inp = in(a.inp);
    a.wte = in(a.wte), a.dinp = in(a.dinp), a.dwte = in(a.dwte);
    return a;
  }
};

// The inner backend's kernels and storage, exactly what it computes (bf16 product inputs
// included); only memory changes hands here.
class IsolatedBackend final : public ForwardingBackend<float, DeviceAddresses> {
 public:
  using ForwardingBackend::ForwardingBackend;

  Device device() const override { return Device::cpu; }
  bool host_addressable() const override { return false; }
  std::string describe() const override { return "isolated (CPU kernels, memory off limits)"; }

  float* allocate(size_t n, MemoryUse use) override {
    return device_address(inner().allocate(n, use));
  }
  // Host memory on one side: the inner backend's copy, which the host may address.
  void to_host(float* host, const float* src, size_t n) override {
    inner().copy(host, DeviceAddresses::in(src), n);
  }
  void from_host(float* dst, const float* host, size_t n) override {
    inner().copy(DeviceAddresses::in(dst), host, n);
  }
};

}  // namespace

Backend<float>& isolated_backend(Backend<float>& inner) {
  // One wrapper per inner backend, kept for the process (models hold references to it).
  static std::mutex mutex;
  static std::map<Backend<float>*, std::unique_ptr<IsolatedBackend>> wrappers;
  std::lock_guard<std::mutex> lock(mutex);
  auto& wrapper = wrappers[&inner];
  if (!wrapper) wrapper = std::make_unique<IsolatedBackend>(inner);
  return *wrapper;
}

}  // namespace xsa

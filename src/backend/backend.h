// The seam between the model and the hardware. A backend is memory (it owns what it computes on;
// each buffer knows its device and its backend releases it) and a table of kernels: every op of
// the model's forward and backward, the optimizer and the reductions, with the storage each takes
// (supports(); precision is data: ops/tensor.h). The model (model/), the training step (train/)
// and the decoder reach ops only through a Backend; the CPU backend (cpu_backend.cpp), built once
// per CPU level, calls that level's kernels in ops/. Another device (CUDA) is another
// implementation of this interface in its own files. docs/architecture.md ("The backend") gives the
// steps to add an op, a precision or a device.
//
// Conventions: device pointers everywhere, except token ids (inputs, targets), which stay on the
// host — a device backend copies the B·T ids itself. Sizes and layouts as in ops/ops.h.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "xsa/backend/generated/op_families.h"
#include "xsa/ops/ops.h"
#include "xsa/util/error.h"
#include "xsa/util/precision.h"

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

// A device's dense peak arithmetic rates in FLOP/s (0 where not known: a CPU), for model FLOPs
// utilisation, and where they come from: the vendor's data sheet for a known GPU model, else
// derived from the SM count and clock (gpu_peaks.h).
struct PeakFlops {
  double bf16 = 0, tf32 = 0, fp32 = 0;
  std::string source;
};

// The ranks of a data-parallel job as a device's collectives see them when they start: this
// rank, their number, and how the root's bytes reach every rank (the host communicator's
// broadcast: MPI), which bootstraps the device's own connections.
struct CollectiveJob {
  int rank = 0, size = 1;
  std::function<void(void* data, size_t bytes)> broadcast_from_root;
};

// Elements [begin, end) of a buffer: a rank's shard.
struct BufferSlice {
  size_t begin = 0, end = 0;
  size_t size() const { return end - begin; }
};

// Sums and copies among the ranks of a data-parallel job directly on device memory (NCCL on
// NVIDIA GPUs), queued on the backend's stream in order with its kernels. Every rank gets the same
// bits; the order of the additions is the library's (not rank order, as the host's over MPI is).
class DeviceCollectives {
 public:
  virtual ~DeviceCollectives() = default;
  virtual std::string describe() const = 0;
  // In place: every rank's `values` become the sum over ranks.
  virtual void all_reduce(float* values, size_t n) = 0;
  // In place: rank r's slice shards[r] of `values` becomes that slice's sum over ranks; the rest
  // is left as it was or overwritten with partial sums.
  virtual void reduce_scatter(float* values, const std::vector<BufferSlice>& shards) = 0;
  // In place: rank r's slice shards[r] to every rank.
  virtual void all_gather(float* values, const std::vector<BufferSlice>& shards) = 0;
  // The root's n values to every rank.
  virtual void broadcast(float* values, size_t n, int root) = 0;
};

using ops::Storage;
using ops::Tensor;

// The argument structs of the table's entries (ops/args.h, ops/attention.h), as its list names
// them.
using ops::AdamWSettings;
using ops::AttentionArgs;
using ops::KvCache;
using ops::LayerNormArgs;
using ops::MatmulShape;
using ops::MuonSettings;
using ops::NewtonSchulzArgs;
using ops::NewtonSchulzCoefficients;
using ops::QkNormArgs;
using ops::RopeArgs;
using ops::ValueMixArgs;

// The floats of the qkv rows RoPE rotates.
template <typename Real>
size_t rope_rows_size(const RopeArgs<Real>& a) {
  const int Hkv = a.Hkv > 0 ? a.Hkv : a.H;
  return (size_t)a.B * a.T * (a.C + 2 * Hkv * (a.C / a.H));
}

// The tied classifier on `rows` rows: logits [rows, Vp] (scratch) = inp · wteᵀ, the fused
// softmax-cross-entropy over the V real columns into losses, and with dloss ≠ 0 its backward:
// dinp = dlogits · wte, dwte += dlogitsᵀ · inp (= when not accumulate). With softcap c > 0 the
// logits are soft-capped first (crossentropy_softcap).
template <typename Real>
struct ClassifierArgs {
  Real* logits = nullptr;
  Real* losses = nullptr;
  const int32_t* targets = nullptr;  // host
  const Real* inp = nullptr;
  const Real* wte = nullptr;
  Real* dinp = nullptr;
  Real* dwte = nullptr;
  int rows = 0, C = 0, V = 0, Vp = 0;
  Real dloss = 0;
  Real softcap = 0;
  bool accumulate = false;
};

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
  // One line for logs and benchmarks: the device and how it computes.
  virtual std::string describe() const { return to_string(device()); }
  // Collectives on this device's memory among the ranks of `job` (every rank calls it at the same
  // point: it sends a bootstrap id through job.broadcast_from_root), or null with `why` where the
  // device has none (the CPU: the host communicator sums host memory itself).
  virtual std::unique_ptr<DeviceCollectives> open_collectives(const CollectiveJob& job,
                                                              std::string* why) {
    (void)job;
    if (why) *why = "the " + describe() + " backend has no collectives of its own";
    return nullptr;
  }
  // Every weight changed (weights_changed below, begin == nullptr).
  void weights_changed() { weights_changed(nullptr, 0); }

  // The device and its memory, then the kernel table: one entry per op and direction, all from
  // the one list of ops (src/ops/op_list.txt, which documents them; scripts/generate_ops.py).
#include "xsa/backend/generated/backend_entries.h"
};

// The refusal of an op given a storage the backend does not take (its supports() says no): one
// line naming the backend, the op and the storage. Every backend calls it before such an op.
template <typename Real>
void refuse_unsupported(const Backend<Real>& backend, Op op, Storage storage) {
  if (!backend.supports(op, storage))
    fail("the {} backend does not take {} activations for {} (its supports() says no)",
         to_string(backend.device()), ops::to_string(storage), to_string(op));
}

// out = residual + inp · weightᵀ as a copy and an accumulating product, for a backend that
// cannot add the residual inside the product.
template <typename Real>
void matmul_residual_by_copy(Backend<Real>& backend, Real* out, const Real* residual,
                             Tensor<const Real> inp, const Real* weight, MatmulShape shape) {
  backend.copy(out, residual, (size_t)shape.N * shape.out_dim);
  backend.matmul_forward(out, inp, weight, shape, /*accumulate=*/true);
}

// The classifier as its three ops, for a backend that does not fuse them.
template <typename Real>
void classifier_by_ops(Backend<Real>& backend, const ClassifierArgs<Real>& a) {
  const MatmulShape shape{a.rows, a.C, a.Vp};
  backend.matmul_forward(a.logits, a.inp, a.wte, shape, false);
  if (a.softcap > Real(0))
    backend.crossentropy_softcap(a.logits, a.losses, a.targets, a.rows, a.V, a.Vp, a.dloss,
                                 a.softcap);
  else
    backend.crossentropy_forward_backward(a.logits, a.losses, a.targets, a.rows, a.V, a.Vp,
                                          a.dloss);
  if (a.dloss != Real(0))
    backend.matmul_backward(a.dinp, a.dwte, a.logits, a.inp, a.wte, shape, a.accumulate);
}

// Muon's Newton–Schulz iteration (docs/SPEC.md §11) through the backend's own products (bf16
// where its products are), the batch's matrices one after the other: X = U / (‖U‖_F + 1e-7), then
// kNewtonSchulzSteps times A = X Xᵀ, X ← a X + (b A + c A²) X; a matrix with more rows than columns
// iterates on Xᵀ X from the right, X ← X (a + b B + c B²), B = XᵀX, which is the transpose's
// iteration without transposing. A² is A Aᵀ (A is symmetric). Every scratch matrix a product reads
// as its weight is written between products, so the backend hears of it (weights_changed) and keeps
// no stale copy.
template <typename Real>
void newton_schulz_by_ops(Backend<Real>& be, const ops::NewtonSchulzArgs<Real>& batch) {
  if (batch.count > 1) {
    for (int i = 0; i < batch.count; i++) newton_schulz_by_ops(be, batch.one(i));
    return;
  }
  const ops::NewtonSchulzArgs<Real>& a = batch;
  const size_t n = (size_t)a.rows * a.cols;
  const bool wide = a.rows <= a.cols;
  const int k = wide ? a.rows : a.cols;
  const double norm = std::sqrt(be.sum_of_squares(a.x, n));
  ops::MuonSettings scale;
  scale.keep = 1 / (norm + 1e-7), scale.step = 0;
  be.muon_apply(a.x, a.x, n, scale);  // x = x / (‖x‖ + 1e-7)
  // x is read as a product's weight below: a backend that keeps converted copies of weights (bf16)
  // must not use one made from what this memory held before (the previous matrix or step).
  be.weights_changed(a.x, n);
  Real* x = a.x;
  Real* next = a.next;
  const ops::NewtonSchulzCoefficients coefficients;
  for (int i = 0; i < ops::kNewtonSchulzSteps; i++) {
    if (wide)
      be.matmul_forward(a.gram, x, x, {a.rows, a.cols, a.rows}, false);  // X Xᵀ
    else
      be.matmul_backward(nullptr, a.gram, x, x, nullptr, {a.rows, a.cols, a.cols}, false);  // XᵀX
    be.weights_changed(a.gram, (size_t)k * k);
    be.matmul_forward(a.gram2, a.gram, a.gram, {k, k, k}, false);
    be.newton_schulz_poly(a.poly, a.gram, a.gram2, k, coefficients);
    be.weights_changed(a.poly, (size_t)k * k);
    if (wide)  // P X: matmul_backward's dinp = dout · W with dout P [rows, rows], W X
      be.matmul_backward(next, nullptr, a.poly, nullptr, x, {a.rows, a.cols, a.rows}, false);
    else  // X P = X Pᵀ
      be.matmul_forward(next, x, a.poly, {a.rows, a.cols, a.cols}, false);
    std::swap(x, next);
    be.weights_changed(x, n);
  }
  if (x != a.x) be.copy(a.x, x, n);
}

// Whether p lies in the range [begin, begin + n) given to weights_changed (begin == nullptr: all).
template <typename Real>
bool in_changed_range(const Real* p, const Real* begin, size_t n) {
  const auto at = reinterpret_cast<uintptr_t>(p), from = reinterpret_cast<uintptr_t>(begin);
  return !begin || (at >= from && at - from < n * sizeof(Real));
}

// The process's CPU backend (OpenBLAS products, OpenMP kernels).
template <typename Real>
Backend<Real>& cpu_backend();

// The CPU backend in a precision (util/precision.h): fp32 is cpu_backend<float>(); bf16 adds
// mixed-precision products: matrix products take bf16 copies of their inputs (weights converted
// once per weights_changed(), activations on each call) and accumulate in fp32 (oneDNN); every
// other op, the master weights, the gradients and the optimizer stay fp32. Products of one row
// (decoding) stay fp32: they are bound by reading the weights. Throws Error in one line where this
// CPU cannot compute in it (bf16_products_available).
Backend<float>& cpu_backend(Precision precision);
// `inner`'s kernels on memory that host code cannot dereference (`--device isolated`): a test
// device standing in for a GPU, on which every access outside the backend faults.
Backend<float>& isolated_backend(Backend<float>& inner);
// Whether bf16 products can run here: a build with oneDNN and a CPU with AVX512_BF16 or AMX-BF16.
// When not, `why` says what is missing.
bool bf16_products_available(std::string* why);

}  // namespace xsa

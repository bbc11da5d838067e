// The CUDA backend: device memory, one stream, products through cuBLASLt (bf16 inputs with fp32
// accumulation, or fp32), and the kernels of kernels.h. Built as the module libxsa_cuda.so
// (plugin.h); nothing here is linked into xsa itself.
//
// Master weights, gradients, AdamW moments and activations are fp32 in device memory, as on the
// CPU, so checkpoints and every host-side tool are the same for both devices. With bf16 products
// the weights' bf16 copies are kept until weights_changed() (one conversion per optimizer step)
// and activations are converted per product into a scratch buffer.
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <numeric>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "xsa/backend/cuda/kernels.h"
#include "xsa/backend/cuda/launch.h"
#include "xsa/backend/cuda/nccl.h"
#include "xsa/backend/cuda/plugin.h"
#include "xsa/backend/gpu_peaks.h"
#include "xsa/util/error.h"
#include "xsa/util/fmt.h"

namespace xsa::cuda {
namespace {

const char* to_string(MemoryUse use) {
  switch (use) {
    case MemoryUse::weights:
    case MemoryUse::inference_weights:
      return "weights";
    case MemoryUse::gradients:
      return "gradients";
    case MemoryUse::optimizer:
      return "optimizer state";
    case MemoryUse::activations:
      return "activations";
  }
  return "memory";
}

// One line for a failed call: what xsa was doing, the call, and CUDA's words.
[[noreturn]] void cuda_failed(const char* what, const char* call, const char* error) {
  throw Error(std::string("CUDA error in ") + what + ": " + call + ": " + error);
}
void check(cudaError_t status, const char* what, const char* call) {
  if (status != cudaSuccess) cuda_failed(what, call, cudaGetErrorString(status));
}
void check(cublasStatus_t status, const char* what, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS) cuda_failed(what, call, cublasLtGetStatusString(status));
}
#define XSA_CUDA(call, what) check((call), what, #call)
// After a kernel launch (launch.h): the op, and its shape as fmt's format and arguments.
#define XSA_LAUNCHED(what, ...) launched(stream_, what, [&] { return fmt::format(__VA_ARGS__); })

// Device memory that grows on demand (scratch and uploads); contents are not kept across growth.
template <typename T>
class Scratch {
 public:
  ~Scratch() {
    if (data_) cudaFree(data_);
  }
  T* get(size_t n, const char* what) {
    if (n <= size_) return data_;
    if (data_) XSA_CUDA(cudaFree(data_), what);
    data_ = nullptr, size_ = 0;
    XSA_CUDA(cudaMalloc(reinterpret_cast<void**>(&data_), std::max<size_t>(n, 1) * sizeof(T)),
             what);
    size_ = n;
    return data_;
  }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
};

class CudaBackend final : public Backend<float> {
 public:
  explicit CudaBackend(const CudaOptions& options) : options_(options) {
    XSA_CUDA(cudaSetDevice(options.device), "opening the GPU");
    XSA_CUDA(cudaGetDeviceProperties(&props_, options.device), "opening the GPU");
    XSA_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "opening the GPU");
    XSA_CUDA(cublasLtCreate(&lt_), "opening cuBLASLt");
    XSA_CUDA(cudaMalloc(&lt_workspace_, kLtWorkspace), "allocating cuBLASLt's workspace");
  }
  ~CudaBackend() override {
    for (auto& [key, plan] : plans_) destroy(plan);
    for (auto& [weight, copy] : weights_) cudaFree(copy.data);
    cudaFree(lt_workspace_);
    cublasLtDestroy(lt_);
    cudaStreamDestroy(stream_);
  }

  Device device() const override { return Device::cuda; }
  bool host_addressable() const override { return false; }
  std::string describe() const override {
    char line[512];
    std::snprintf(line, sizeof line, "cuda:%d %s (sm_%d%d, %.0f GiB), %s products%s",
                  options_.device, props_.name, props_.major, props_.minor,
                  props_.totalGlobalMem / 1073741824.0,
                  bf16() ? "bf16" : (options_.tf32 ? "tf32" : "fp32"),
                  options_.deterministic ? ", deterministic attention backward" : "");
    return line;
  }
  bool memory_info(size_t* free_bytes, size_t* total_bytes) override {
    XSA_CUDA(cudaMemGetInfo(free_bytes, total_bytes), "reading the GPU's free memory");
    return true;
  }
  PeakFlops peak_flops() const override {
    int khz = 0;
    cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, options_.device);
    return gpu_peak_flops(props_.name, props_.multiProcessorCount, khz,
                          props_.major * 10 + props_.minor);
  }
  std::unique_ptr<DeviceCollectives> open_collectives(const CollectiveJob& job,
                                                      std::string* why) override {
    return open_nccl(job, options_.device, stream_, why);
  }
  void synchronize() override { XSA_CUDA(cudaStreamSynchronize(stream_), "running the step"); }

  // ---- memory ----
  float* allocate(size_t n, MemoryUse use) override {
    float* p = nullptr;
    const cudaError_t status = cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(float));
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // clear it
      size_t free_bytes = 0, total = 0;
      cudaMemGetInfo(&free_bytes, &total);
      // The model's weights, gradients, moments and activations are all allocated when it is
      // made, before the first step, so a run that does not fit stops here, having written
      // nothing.
      char line[512];
      std::snprintf(line, sizeof line,
                    "the run does not fit the GPU's memory: %.0f MiB more of %s were needed with "
                    "%.0f MiB free of %.0f MiB (%s); try a smaller --batch, --seq-len or model",
                    n * 4.0 / 1048576, to_string(use), free_bytes / 1048576.0, total / 1048576.0,
                    props_.name);
      throw Error(line);
    }
    XSA_CUDA(status, "allocating device memory");
    XSA_CUDA(cudaMemsetAsync(p, 0, n * sizeof(float), stream_), "allocating device memory");
    return p;
  }
  void release(float* p, size_t n) override {
    for (auto it = weights_.begin(); it != weights_.end();) {
      if (it->first >= p && it->first < p + n) {
        cudaFree(it->second.data);
        it = weights_.erase(it);
      } else {
        ++it;
      }
    }
    cudaStreamSynchronize(stream_);  // work queued on it may still read p
    cudaFree(p);
  }
  void fill_zero(float* p, size_t n) override {
    if (n == 0) return;
    XSA_CUDA(cudaMemsetAsync(p, 0, n * sizeof(float), stream_), "zeroing device memory");
  }
  void copy(float* dst, const float* src, size_t n) override {
    if (dst != src && n > 0)
      XSA_CUDA(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, stream_),
               "copying on the GPU");
  }
  void to_host(float* host, const float* src, size_t n) override {
    if (n == 0) return;  // (an empty buffer's pointers are null)
    XSA_CUDA(cudaMemcpyAsync(host, src, n * sizeof(float), cudaMemcpyDeviceToHost, stream_),
             "copying from the GPU");
    synchronize();
  }
  void from_host(float* dst, const float* host, size_t n) override {
    // From pageable memory: returns once the host buffer is staged, so the caller may reuse it.
    if (n == 0) return;
    XSA_CUDA(cudaMemcpyAsync(dst, host, n * sizeof(float), cudaMemcpyHostToDevice, stream_),
             "copying to the GPU");
  }
  void copy_rows(float* dst, size_t dst_stride, const float* src, size_t src_stride, int rows,
                 int width) override {
    if (rows <= 0 || width <= 0) return;
    XSA_CUDA(cudaMemcpy2DAsync(dst, dst_stride * sizeof(float), src, src_stride * sizeof(float),
                               width * sizeof(float), rows, cudaMemcpyDeviceToDevice, stream_),
             "copying rows on the GPU");
  }
  void gather_rows(float* dst, const float* table, const int* index, int n, int width) override {
    if (n <= 0) return;
    cuda::gather_rows(dst, table, upload(index, n, index_), n, width, stream_);
    XSA_LAUNCHED("gather_rows", "n {} width {}", n, width);
  }

  // ---- the kernel table: fp32 activations (bf16 products convert their inputs per call) ----
  // XSA's rivals are CPU-only for now (docs/gpus.md): refused before a model is built.
  bool supports(Op op, Storage storage) const override {
    return op != Op::rivals && op != Op::qk_norm && storage == Storage::fp32;
  }
  Storage product_input_storage(int) const override { return Storage::fp32; }

  // ---- products ----
  void matmul_forward(float* out, Tensor<const float> inp, const float* weight, MatmulShape shape,
                      bool accumulate) override {
    refuse_unsupported(*this, Op::matmul, inp.storage);
    if (shape.N <= 0) return;
    forward(out, activation_operand(inp.data, (size_t)shape.N * shape.in_dim, act_a_), weight,
            shape, accumulate);
  }
  void matmul_forward_residual(float* out, const float* residual, Tensor<const float> inp,
                               const float* weight, MatmulShape shape) override {
    matmul_residual_by_copy(*this, out, residual, inp, weight, shape);
  }
  void matmul_backward(float* dinp, float* dweight, Tensor<const float> dout,
                       Tensor<const float> inp, const float* weight, MatmulShape shape,
                       bool accumulate) override {
    refuse_unsupported(*this, Op::matmul, dout.storage);
    refuse_unsupported(*this, Op::matmul, inp.storage);
    if (shape.N <= 0) return;
    const size_t N = shape.N;
    const Operand x = dweight ? activation_operand(inp.data, N * shape.in_dim, act_a_) : Operand{};
    backward(dinp, dweight, activation_operand(dout.data, N * shape.out_dim, act_b_), x, weight,
             shape, accumulate);
  }
  void bias_forward(float* out, const float* bias, int N, int D) override {
    if (N <= 0) return;
    cuda::bias_forward(out, bias, N, D, stream_);
    XSA_LAUNCHED("bias_forward", "N {} D {}", N, D);
  }
  void bias_backward(float* dbias, const float* dout, int N, int D) override {
    if (N <= 0) return;
    float* scratch = scratch_.get(bias_backward_scratch(N, D), "bias_backward");
    cuda::bias_backward(dbias, dout, N, D, scratch, stream_);
    XSA_LAUNCHED("bias_backward", "N {} D {}", N, D);
  }

  // ---- embeddings: token ids and positions arrive on the host ----
  void encoder_forward(float* out, const int32_t* tokens, const float* wte, int N, int C) override {
    if (N <= 0) return;
    embedding_forward(out, upload(tokens, N, index_), wte, N, C, false, stream_);
    XSA_LAUNCHED("encoder_forward", "N {} C {}", N, C);
  }
  void embedding_add(float* out, const int32_t* index, const float* table, int N, int C) override {
    if (N <= 0) return;
    embedding_forward(out, upload(index, N, index_), table, N, C, true, stream_);
    XSA_LAUNCHED("embedding_add", "N {} C {}", N, C);
  }
  void encoder_backward(float* dwte, const float* dout, const int32_t* tokens, int N,
                        int C) override {
    if (N <= 0) return;
    // Group the rows by the table row they read, in row order within a group (on the host, where
    // the ids are), so each table row's sum has one fixed order: deterministic without atomics.
    // packed_: the rows sorted by token (stable), then the groups' starts, then their table rows.
    packed_.resize(N);
    std::iota(packed_.begin(), packed_.end(), 0);
    std::stable_sort(packed_.begin(), packed_.end(),
                     [&](int32_t a, int32_t b) { return tokens[a] < tokens[b]; });
    table_rows_.clear();
    for (int i = 0; i < N; i++)
      if (i == 0 || tokens[packed_[i]] != tokens[packed_[i - 1]]) {
        table_rows_.push_back(tokens[packed_[i]]);
        packed_.push_back(i);  // this group's start
      }
    packed_.push_back(N);
    const size_t G = table_rows_.size();
    packed_.insert(packed_.end(), table_rows_.begin(), table_rows_.end());
    const int32_t* d = upload(packed_.data(), packed_.size(), groups_);
    embedding_backward(dwte, dout, d, d + N, d + N + G + 1, (int)G, C, stream_);
    XSA_LAUNCHED("encoder_backward", "N {} C {}, {} rows of the table", N, C, G);
  }

  // ---- LayerNorm, RoPE, GELU ----
  void layernorm_forward(Tensor<float> out, const LayerNormArgs<float>& args) override {
    refuse_unsupported(*this, Op::layernorm, out.storage);
    if (args.N <= 0) return;
    cuda::layernorm_forward(out.data, args, stream_);
    XSA_LAUNCHED("layernorm_forward", "N {} C {}", args.N, args.C);
  }
  void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                          const LayerNormArgs<float>& args) override {
    if (args.N <= 0) return;
    float* scratch = scratch_.get(layernorm_backward_scratch(args.N, args.C), "layernorm_backward");
    cuda::layernorm_backward({dinp, dweight, dbias, scratch}, dout, args, stream_);
    XSA_LAUNCHED("layernorm_backward", "N {} C {}", args.N, args.C);
  }
  void rope_table(float* cos, float* sin, int T, int D, double theta) override {
    // In double on the host, as ops::rope_table, so both devices rotate by the same floats.
    const int half = D / 2;
    std::vector<float> c((size_t)T * half), s((size_t)T * half);
    for (int t = 0; t < T; t++)
      for (int j = 0; j < half; j++) {
        const double angle = t * std::pow(theta, -2.0 * j / D);
        c[(size_t)t * half + j] = (float)std::cos(angle);
        s[(size_t)t * half + j] = (float)std::sin(angle);
      }
    from_host(cos, c.data(), c.size());
    from_host(sin, s.data(), s.size());
  }
  void rope_forward(float* qkv, const RopeArgs<float>& args) override {
    cuda::rope_forward(qkv, args, stream_);
    XSA_LAUNCHED("rope_forward", "B {} T {} C {} H {} Hkv {}", args.B, args.T, args.C, args.H,
                 args.Hkv);
  }
  void rope_backward(Tensor<float> out, float* dqkv, const RopeArgs<float>& args) override {
    refuse_unsupported(*this, Op::rope, out.storage);
    copy(out.data, dqkv, rope_rows_size(args));
    cuda::rope_backward(out.data, args, stream_);
    XSA_LAUNCHED("rope_backward", "B {} T {} C {} H {} Hkv {}", args.B, args.T, args.C, args.H,
                 args.Hkv);
  }

  // ---- attention ----
  void attention_forward(const ops::AttentionArgs<float>& args) override {
    refuse_unsupported(*this, Op::attention, args.z.storage);
    if (args.no_self) refuse_unsupported(*this, Op::rivals, Storage::fp32);
    cuda::attention_forward(args, bf16(), stream_);
    XSA_LAUNCHED("attention_forward", "{}", attention_shape(args));
  }
  void attention_backward(const ops::AttentionArgs<float>& args) override {
    refuse_unsupported(*this, Op::attention, args.z.storage);
    if (args.no_self) refuse_unsupported(*this, Op::rivals, Storage::fp32);
    if (args.exclusive && args.z.data) xsa_forward(args);  // z again
    float* workspace = scratch_.get(attention_backward_workspace(args, options_.deterministic),
                                    "attention_backward");
    cuda::attention_backward(args, bf16(), options_.deterministic, workspace, stream_);
    XSA_LAUNCHED("attention_backward", "{}{}", attention_shape(args),
                 options_.deterministic ? ", deterministic" : "");
  }
  void attention_forward_cached(const ops::AttentionArgs<float>& args,
                                const ops::KvCache<float>& cache) override {
    refuse_unsupported(*this, Op::attention, args.z.storage);
    if (args.no_self) refuse_unsupported(*this, Op::rivals, Storage::fp32);
    ops::KvCache<float> on_device = cache;
    if (cache.spans) {
      static_assert(sizeof(ops::SlotSpan) == 3 * sizeof(int32_t));
      on_device.spans = reinterpret_cast<const ops::SlotSpan*>(
          upload(reinterpret_cast<const int32_t*>(cache.spans), 3 * (size_t)args.T, spans_));
    }
    cuda::attention_forward_cached(args, on_device, stream_);
    XSA_LAUNCHED("attention_forward_cached", "{}, slot0 {}", attention_shape(args), cache.slot0);
  }
  void xsa_forward(const ops::AttentionArgs<float>& args) override {
    refuse_unsupported(*this, Op::attention, args.z.storage);
    cuda::xsa_forward(args, stream_);
    XSA_LAUNCHED("xsa_forward", "{}", attention_shape(args));
  }

  // ---- the classifier and its loss ----
  void crossentropy_forward_backward(float* logits, float* losses, const int32_t* targets, int N,
                                     int V, int Vp, float dloss) override {
    if (N <= 0) return;
    cuda::crossentropy_forward_backward(
        {logits, losses, upload(targets, N, targets_), N, V, Vp, dloss, nullptr}, stream_);
    XSA_LAUNCHED("crossentropy_forward_backward", "N {} V {} Vp {}", N, V, Vp);
  }
  void crossentropy_softcap(float* logits, float* losses, const int32_t* targets, int N, int V,
                            int Vp, float dloss, float cap) override {
    if (N <= 0) return;
    cuda::CrossEntropyArgs args{logits, losses, upload(targets, N, targets_), N, V, Vp,
                                dloss,  nullptr};
    args.softcap = cap;
    cuda::crossentropy_forward_backward(args, stream_);
    XSA_LAUNCHED("crossentropy_softcap", "N {} V {} Vp {} cap {}", N, V, Vp, cap);
  }
  void softcap_forward(float* logits, int N, int V, int Vp, float cap) override {
    cuda::softcap_forward(logits, N, V, Vp, cap, stream_);
    XSA_LAUNCHED("softcap_forward", "N {} V {} cap {}", N, V, cap);
  }
  // With bf16 products the cross-entropy writes its gradient in bf16 for the backward's products
  // (no separate conversion pass over the rows × Vp logits).
  void classifier_forward_backward(const ClassifierArgs<float>& a) override {
    if (!bf16() || a.dloss == 0.0f || a.softcap > 0.0f) return classifier_by_ops(*this, a);
    if (a.rows <= 0) return;
    const MatmulShape shape{a.rows, a.C, a.Vp};
    const Operand x = activation_operand(a.inp, (size_t)a.rows * a.C, act_a_);  // both products
    forward(a.logits, x, a.wte, shape, false);
    bf16_bits* dlogits = dlogits_.get((size_t)a.rows * a.Vp, "the classifier");
    cuda::crossentropy_forward_backward({a.logits, a.losses, upload(a.targets, a.rows, targets_),
                                         a.rows, a.V, a.Vp, a.dloss, dlogits},
                                        stream_);
    XSA_LAUNCHED("crossentropy_forward_backward", "N {} V {} Vp {}, bf16 gradient", a.rows, a.V,
                 a.Vp);
    backward(a.dinp, a.dwte, Operand{dlogits, true}, x, a.wte, shape, a.accumulate);
  }

  // ---- reductions and the optimizer ----
  double sum(const float* x, size_t n) override { return reduce(x, n, false); }
  double sum_of_squares(const float* x, size_t n) override { return reduce(x, n, true); }
  void weights_changed(const float* begin, size_t n) override {
    for (auto& [weight, copy] : weights_)
      if (in_changed_range(weight, begin, n)) copy.fresh = false;
  }
  // Muon's iteration: its products cuBLAS's (bf16 where the backend's products are), its
  // elementwise steps among the generated entries below.
  void newton_schulz(const ops::NewtonSchulzArgs<float>& args) override {
    newton_schulz_by_ops(*this, args);
  }

  // The entries the list of ops launches or refuses as they are (src/ops/op_list.txt's
  // cuda-launch and cuda-refuses rows: GELU, ReLU², the gates and sinks, add_rows, AdamW, Muon's
  // elementwise steps; XSA's rivals and QK-norm refused until a GPU has run them), generated by
  // scripts/generate_ops.py.
#include "xsa/backend/generated/cuda_entries.h"

 private:
  static constexpr size_t kLtWorkspace = 32 << 20;  // cuBLASLt's, as llm.c gives it

  // A product's operand: fp32, or bf16 when the backend's products are.
  struct Operand {
    const void* data;
    bool bf16;
  };

  const int32_t* upload(const int32_t* host, size_t n, Scratch<int32_t>& buffer) {
    int32_t* d = buffer.get(n, "copying token ids to the GPU");
    XSA_CUDA(cudaMemcpyAsync(d, host, n * sizeof(int32_t), cudaMemcpyHostToDevice, stream_),
             "copying token ids to the GPU");
    return d;
  }
  double reduce(const float* x, size_t n, bool squares) {
    if (n == 0) return 0;
    double* partials = reduce_scratch_.get(sum_scratch(n) + 1, "a reduction");
    cuda::sum(partials, x, n, squares, partials + 1, stream_);
    XSA_LAUNCHED("sum", "n {}", n);
    double result = 0;
    XSA_CUDA(cudaMemcpyAsync(&result, partials, sizeof(double), cudaMemcpyDeviceToHost, stream_),
             "reading a sum from the GPU");
    synchronize();
    return result;
  }

  // A weight matrix as the products read it: itself, or its bf16 copy made on first use after
  // weights_changed().
  Operand weight_operand(const float* weight, int in_dim, int out_dim) {
    if (!bf16()) return {weight, false};
    const size_t n = (size_t)in_dim * out_dim;
    WeightCopy& copy = weights_[weight];
    if (copy.size != n) {
      if (copy.data) XSA_CUDA(cudaFree(copy.data), "a bf16 weight copy");
      copy.data = nullptr;
      XSA_CUDA(cudaMalloc(reinterpret_cast<void**>(&copy.data), n * sizeof(bf16_bits)),
               "a bf16 weight copy");
      copy.size = n, copy.fresh = false;
    }
    if (!copy.fresh) {
      to_bf16(copy.data, weight, n, stream_);
      XSA_LAUNCHED("to_bf16", "n {}", n);
      copy.fresh = true;
    }
    return {copy.data, true};
  }
  Operand activation_operand(const float* x, size_t n, Scratch<bf16_bits>& buffer) {
    if (!bf16()) return {x, false};
    bf16_bits* converted = buffer.get(n, "converting to bf16");
    to_bf16(converted, x, n, stream_);
    XSA_LAUNCHED("to_bf16", "n {}", n);
    return {converted, true};
  }

  // out_cm [out × N] = W_cmᵀ · inp_cm, the row-major arrays read as column-major.
  void forward(float* out, Operand inp, const float* weight, MatmulShape shape, bool accumulate) {
    const int N = shape.N, in_dim = shape.in_dim, out_dim = shape.out_dim;
    gemm({"matmul_forward", true, false, out_dim, N, in_dim},
         {weight_operand(weight, in_dim, out_dim), in_dim, inp, in_dim, out, out_dim},
         accumulate ? 1.0f : 0.0f);
  }
  void backward(float* dinp, float* dweight, Operand dout, Operand inp, const float* weight,
                MatmulShape shape, bool accumulate) {
    const int N = shape.N, in_dim = shape.in_dim, out_dim = shape.out_dim;
    // dinp_cm [in × N] = W_cm [in × out] · dout_cm [out × N]
    if (dinp)
      gemm({"matmul_backward (input)", false, false, in_dim, N, out_dim},
           {weight_operand(weight, in_dim, out_dim), in_dim, dout, out_dim, dinp, in_dim}, 0.0f);
    // dW_cm [in × out] (+)= inp_cm [in × N] · dout_cmᵀ
    if (dweight)
      gemm({"matmul_backward (weight)", false, true, in_dim, out_dim, N},
           {inp, in_dim, dout, out_dim, dweight, in_dim}, accumulate ? 1.0f : 0.0f);
  }

  // A cuBLASLt plan per product shape: descriptors and the heuristic's algorithm, made once.
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  // The shape, the types, and each operand's alignment (A, B, D): cuBLASLt's heuristic assumes
  // 256-byte aligned buffers unless told otherwise, and an algorithm it picks may then fail on a
  // view into an arena (views start on 64-byte boundaries), so a plan is made for the alignment
  // its operands really have.
  using PlanKey = std::tuple<bool, bool, int, int, int, int, int, int, bool, bool, uint32_t,
                             uint32_t, uint32_t>;

  // The largest power of two, up to 256, that divides the address.
  static uint32_t alignment(const void* p) {
    const uintptr_t address = reinterpret_cast<uintptr_t>(p);
    uint32_t bytes = 256;
    while (bytes > 1 && address % bytes != 0) bytes /= 2;
    return bytes;
  }

  // A product's shape, column-major: op(A) [m × k] · op(B) [k × n]; `what` names it in errors.
  struct GemmShape {
    const char* what;
    bool trans_a, trans_b;
    int m, n, k;
  };
  // Its operands and their leading dimensions.
  struct GemmOperands {
    Operand A;
    int lda;
    Operand B;
    int ldb;
    float* D;
    int ldc;
  };
  // D [m × n] (column-major, ldc) = op(A) op(B) + beta·D, in fp32 accumulation.
  void gemm(const GemmShape& shape, const GemmOperands& o, float beta) {
    const char* what = shape.what;
    const bool trans_a = shape.trans_a, trans_b = shape.trans_b;
    const int m = shape.m, n = shape.n, k = shape.k, lda = o.lda, ldb = o.ldb, ldc = o.ldc;
    const Operand A = o.A, B = o.B;
    float* D = o.D;
    const PlanKey key{
        trans_a,           trans_b,           m,           n, k, lda, ldb, ldc, A.bf16, B.bf16,
        alignment(A.data), alignment(B.data), alignment(D)};
    auto found = plans_.find(key);
    if (found == plans_.end()) found = plans_.emplace(key, make_plan(what, key)).first;
    Plan& plan = found->second;
    const float alpha = 1.0f;
    XSA_CUDA(cublasLtMatmul(lt_, plan.desc, &alpha, A.data, plan.a, B.data, plan.b, &beta, D,
                            plan.c, D, plan.c, &plan.algo, lt_workspace_, kLtWorkspace, stream_),
             what);
  }
  Plan make_plan(const char* what, const PlanKey& key) {
    const auto [trans_a, trans_b, m, n, k, lda, ldb, ldc, a_bf16, b_bf16, align_a, align_b,
                align_d] = key;
    // Both operands in one type: mixed fp32 and bf16 inputs are not a cuBLASLt combination.
    if (a_bf16 != b_bf16) cuda_failed(what, "cublasLtMatmul", "mixed fp32 and bf16 operands");
    Plan plan;
    const cublasComputeType_t compute =
        !a_bf16 && !b_bf16 && options_.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    XSA_CUDA(cublasLtMatmulDescCreate(&plan.desc, compute, CUDA_R_32F), what);
    const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    XSA_CUDA(
        cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a),
        what);
    XSA_CUDA(
        cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b),
        what);
    // Stored shapes: op(A) is m × k, op(B) is k × n.
    XSA_CUDA(cublasLtMatrixLayoutCreate(&plan.a, a_bf16 ? CUDA_R_16BF : CUDA_R_32F, trans_a ? k : m,
                                        trans_a ? m : k, lda),
             what);
    XSA_CUDA(cublasLtMatrixLayoutCreate(&plan.b, b_bf16 ? CUDA_R_16BF : CUDA_R_32F, trans_b ? n : k,
                                        trans_b ? k : n, ldb),
             what);
    XSA_CUDA(cublasLtMatrixLayoutCreate(&plan.c, CUDA_R_32F, m, n, ldc), what);
    cublasLtMatmulPreference_t preference;
    XSA_CUDA(cublasLtMatmulPreferenceCreate(&preference), what);
    const size_t workspace = kLtWorkspace;
    XSA_CUDA(
        cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                             &workspace, sizeof workspace),
        what);
    // C is D (the products accumulate in place).
    const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] = {
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_a},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_b},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_d},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_d}};
    for (const auto& [attribute, bytes] : alignments)
      XSA_CUDA(cublasLtMatmulPreferenceSetAttribute(preference, attribute, &bytes, sizeof bytes),
               what);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
        lt_, plan.desc, plan.a, plan.b, plan.c, plan.c, preference, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(preference);
    check(status, what, "cublasLtMatmulAlgoGetHeuristic");
    if (found == 0) cuda_failed(what, "cublasLtMatmulAlgoGetHeuristic", "no algorithm");
    plan.algo = result.algo;
    return plan;
  }
  static void destroy(Plan& plan) {
    cublasLtMatrixLayoutDestroy(plan.a);
    cublasLtMatrixLayoutDestroy(plan.b);
    cublasLtMatrixLayoutDestroy(plan.c);
    cublasLtMatmulDescDestroy(plan.desc);
  }

  struct WeightCopy {
    bf16_bits* data = nullptr;
    size_t size = 0;
    bool fresh = false;
  };

  // bf16 products (and attention tiles) with fp32 accumulation.
  bool bf16() const {
    return options_.precision == Precision::bf16;
  }
  CudaOptions options_;
  cudaDeviceProp props_{};
  cudaStream_t stream_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  void* lt_workspace_ = nullptr;
  std::map<PlanKey, Plan> plans_;
  std::unordered_map<const float*, WeightCopy> weights_;
  Scratch<bf16_bits> act_a_, act_b_, dlogits_;  // activations converted per product
  Scratch<float> scratch_;                      // kernels' workspaces
  Scratch<double> reduce_scratch_;
  Scratch<int32_t> index_, targets_, groups_, spans_;  // uploads from the host
  std::vector<int32_t> packed_, table_rows_;           // encoder_backward's grouping, kept
};

}  // namespace
}  // namespace xsa::cuda

extern "C" int xsa_cuda_probe(char* why, size_t why_size) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status == cudaSuccess && count > 0) return count;
  if (status == cudaErrorInsufficientDriver)
    std::snprintf(why, why_size,
                  "no usable NVIDIA driver: none is installed, or it is older than CUDA %d.%d, "
                  "which this xsa was built with (%s)",
                  CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10, cudaGetErrorName(status));
  else if (status == cudaErrorNoDevice || status == cudaSuccess)
    std::snprintf(why, why_size, "the NVIDIA driver sees no GPU (cudaErrorNoDevice)");
  else
    std::snprintf(why, why_size, "%s (%s)", cudaGetErrorString(status), cudaGetErrorName(status));
  return -1;
}

extern "C" xsa::Backend<float>* xsa_cuda_open(const xsa::CudaOptions& options, char* why,
                                              size_t why_size) {
  if (options.abi != xsa::kCudaPluginAbi) {
    std::snprintf(why, why_size, "libxsa_cuda.so was built for another version of xsa");
    return nullptr;
  }
  try {
    return new xsa::cuda::CudaBackend(options);
  } catch (const std::exception& e) {
    std::snprintf(why, why_size, "%s", e.what());
    return nullptr;
  }
}

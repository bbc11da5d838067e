#include "xsa/ops/matmul_bf16.h"

#include <omp.h>

#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "xsa/ops/parallel.h"
#include "xsa/util/error.h"

#ifdef XSA_WITH_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace xsa::ops {

namespace {

// Runs fn(begin, end) over [0, n) in one contiguous range per thread, or at once when n is small
// or a parallel region is already running. (An `omp parallel for simd` loop that ends up serial,
// as it does inside the cross-entropy's rows, ran 4× slower than the plain vectorized loop.)
template <typename Fn>
void split_across_threads(size_t n, Fn fn) {
  if (n <= (1 << 16) || omp_in_parallel()) return fn(size_t(0), n);
#pragma omp parallel
  {
    const ThreadShare mine = this_threads_share(n, 16);  // whole cache lines of floats
    fn(mine.begin, mine.end);
  }
}

}  // namespace

void to_bf16(const float* x, bf16* out, size_t n) {
  split_across_threads(n, [&](size_t begin, size_t end) {
#pragma omp simd
    for (size_t i = begin; i < end; i++) out[i] = round_to_bf16(x[i]);
  });
}

void from_bf16(const bf16* x, float* out, size_t n) {
  split_across_threads(n, [&](size_t begin, size_t end) {
#pragma omp simd
    for (size_t i = begin; i < end; i++) {
      const uint32_t u = (uint32_t)x[i] << 16;
      std::memcpy(&out[i], &u, 4);
    }
  });
}

#ifdef XSA_WITH_DNNL
namespace {

using dnnl::memory;

// What a product does with C: writes it, adds to it, or writes a residual R [M, N] plus the
// product (oneDNN's binary post-op: no copy of R into C beforehand).
enum class Epilogue { write, accumulate, add_residual };

// C [M, N] (+)= A [M, K] · B [K, N]; A stored [M, K] or, trans_a, [K, M]; B stored [K, N] or,
// trans_b, [N, K]. One primitive per shape, made once (oneDNN compiles a kernel for it).
struct Product {
  dnnl::matmul prim;
  memory::desc a, b, c, scratch;
};

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

const Product& product(int M, int N, int K, bool trans_a, bool trans_b, Epilogue epilogue) {
  static std::mutex lock;
  static std::map<std::tuple<int, int, int, bool, bool, Epilogue>, Product> made;
  std::lock_guard<std::mutex> guard(lock);
  const auto key = std::make_tuple(M, N, K, trans_a, trans_b, epilogue);
  auto it = made.find(key);
  if (it != made.end()) return it->second;
  using dt = memory::data_type;
  using tag = memory::format_tag;
  Product p;
  p.a = memory::desc({M, K}, dt::bf16, trans_a ? tag::ba : tag::ab);
  p.b = memory::desc({K, N}, dt::bf16, trans_b ? tag::ba : tag::ab);
  p.c = memory::desc({M, N}, dt::f32, tag::ab);
  dnnl::primitive_attr attr;
  // Scratch memory of ours, kept between calls, rather than oneDNN's per call.
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (epilogue != Epilogue::write) {
    dnnl::post_ops ops;
    if (epilogue == Epilogue::accumulate)
      ops.append_sum(1.0f);
    else
      ops.append_binary(dnnl::algorithm::binary_add, p.c);
    attr.set_post_ops(ops);
  }
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(p.a, p.b, p.c), attr, engine());
  p.prim = dnnl::matmul(pd);
  p.scratch = pd.scratchpad_desc();
  return made.emplace(key, std::move(p)).first->second;
}

void run(int M, int N, int K, bool trans_a, bool trans_b, const bf16* A, const bf16* B, float* C,
         bool accumulate, const float* residual = nullptr) {
  const Epilogue epilogue = residual     ? Epilogue::add_residual
                            : accumulate ? Epilogue::accumulate
                                         : Epilogue::write;
  const Product& p = product(M, N, K, trans_a, trans_b, epilogue);
  static thread_local dnnl::stream stream(engine());
  static thread_local std::vector<uint8_t> scratch;
  if (scratch.size() < p.scratch.get_size()) scratch.resize(p.scratch.get_size());
  memory a(p.a, engine(), const_cast<bf16*>(A)), b(p.b, engine(), const_cast<bf16*>(B)),
      c(p.c, engine(), C), pad(p.scratch, engine(), scratch.data());
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}, {DNNL_ARG_SCRATCHPAD, pad}};
  if (residual)
    args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1,
                 memory(p.c, engine(), const_cast<float*>(residual)));
  p.prim.execute(stream, args);
  stream.wait();
}

}  // namespace

bool bf16_available(std::string* why) {
  const bool cpu = dnnl::get_effective_cpu_isa() >= dnnl::cpu_isa::avx512_core_bf16;
  if (!cpu && why)
    *why =
        "this CPU has neither AVX512_BF16 nor AMX-BF16 (Intel since Cooper Lake, AMD since "
        "Zen 4 have them)";
  return cpu;
}

void matmul_forward_bf16(float* out, const bf16* inp, const bf16* weight, int N, int in_dim,
                         int out_dim, bool accumulate) {
  if (N == 0) return;
  run(N, out_dim, in_dim, false, true, inp, weight, out, accumulate);  // inp · Wᵀ
}

void matmul_residual_bf16(float* out, const float* residual, const bf16* inp, const bf16* weight,
                          int N, int in_dim, int out_dim) {
  XSA_CHECK(out != residual, "matmul_residual_bf16 writes a buffer of its own");
  if (N == 0) return;
  run(N, out_dim, in_dim, false, true, inp, weight, out, false, residual);  // residual + inp · Wᵀ
}

void matmul_backward_bf16(float* dinp, float* dweight, const bf16* dout, const bf16* inp,
                          const bf16* weight, int N, int in_dim, int out_dim, bool accumulate) {
  if (N == 0) return;
  if (dinp) run(N, in_dim, out_dim, false, false, dout, weight, dinp, false);         // dout · W
  if (dweight) run(out_dim, in_dim, N, true, false, dout, inp, dweight, accumulate);  // doutᵀ·inp
}

#else

bool bf16_available(std::string* why) {
  if (why) *why = "this xsa was built without oneDNN (apt install libdnnl-dev, then rebuild)";
  return false;
}

void matmul_forward_bf16(float*, const bf16*, const bf16*, int, int, int, bool) {
  XSA_CHECK(false, "bf16 products without oneDNN");
}

void matmul_residual_bf16(float*, const float*, const bf16*, const bf16*, int, int, int) {
  XSA_CHECK(false, "bf16 products without oneDNN");
}

void matmul_backward_bf16(float*, float*, const bf16*, const bf16*, const bf16*, int, int, int,
                          bool) {
  XSA_CHECK(false, "bf16 products without oneDNN");
}

#endif

}  // namespace xsa::ops

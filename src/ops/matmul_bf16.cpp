#include "xsa/ops/matmul_bf16.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "xsa/ops/parallel.h"
#include "xsa/util/blas.h"
#include "xsa/util/cpu.h"
#include "xsa/util/error.h"

#ifdef XSA_WITH_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace xsa::ops {

#ifdef XSA_WITH_DNNL
namespace {

using dnnl::memory;

// What a product does with C: writes it, adds to it, or writes a residual R [M, N] plus the
// product (oneDNN's binary post-op: no copy of R into C beforehand).
enum class Epilogue { write, accumulate, add_residual };

// C [M, N] (+)= A [M, K] · B [K, N]; A stored [M, K] or, trans_a, [K, M]; B stored [K, N] or,
// trans_b, [N, K]. B and C may be a block of columns of wider matrices: their rows are then
// `row_length` long (B's only when not trans_b); a transposed A may be a block of its columns, its
// rows `a_row_length` long. One primitive per shape, made once (oneDNN compiles a kernel for it).
struct Product {
  dnnl::matmul prim;
  memory::desc a, b, c, scratch;
};

// Its shape and layout: C [M, N] (+)= A · B, summed over K; row lengths 0 until run() sets them.
struct ProductShape {
  int M, N, K;
  bool trans_a, trans_b;
  int a_row_length = 0, row_length = 0;
};

// oneDNN's instruction sets held to xsa's level when XSA_CPU lowered it (util/cpu.h), before its
// first use: its products then run as on a CPU of that level. (It reads the limit once; a later
// set_cpu_level leaves oneDNN as it was, and ONEDNN_MAX_CPU_ISA applies when XSA_CPU is unset.)
void limit_onednn_to_level() {
  static const bool done = [] {
    const CpuLevel level = cpu_level();
    if (level < cpu_best_level()) {
      using isa = dnnl::cpu_isa;
      dnnl::set_max_cpu_isa(level == CpuLevel::avx2     ? isa::avx2
                            : level == CpuLevel::avx512 ? isa::avx512_core
                                                        : isa::avx512_core_bf16);
    }
    return true;
  }();
  (void)done;
}

dnnl::engine& engine() {
  limit_onednn_to_level();
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// `one_thread`: the product runs inside a parallel region of ours, one per thread, so oneDNN
// plans it for one thread (it runs single-threaded there whatever it planned).
// `input`: A's and B's type, bf16 or f32 (C is always f32).
// The products made are kept, up to kKeptProducts: a training run uses a few dozen shapes, but
// evaluation's passes bring a new row count each, and each primitive holds its own compiled code.
// Past the limit they are dropped and made again when asked for (the same shape gives the same
// kernel: the results do not change); a caller keeps its own alive while it runs.
std::shared_ptr<const Product> product(memory::data_type input, const ProductShape& s,
                                       Epilogue epilogue, bool one_thread) {
  const int M = s.M, N = s.N, K = s.K, a_row_length = s.a_row_length, row_length = s.row_length;
  const bool trans_a = s.trans_a, trans_b = s.trans_b;
  constexpr size_t kKeptProducts = 512;
  static std::mutex lock;
  static std::map<
      std::tuple<memory::data_type, int, int, int, int, int, bool, bool, Epilogue, bool>,
      std::shared_ptr<const Product>>
      made;
  std::lock_guard<std::mutex> guard(lock);
  const auto key = std::make_tuple(input, M, N, K, a_row_length, row_length, trans_a, trans_b,
                                   epilogue, one_thread);
  auto it = made.find(key);
  if (it != made.end()) return it->second;
  if (made.size() >= kKeptProducts) made.clear();
  using dt = memory::data_type;
  using dims = memory::dims;
  auto made_one = std::make_shared<Product>();
  Product& p = *made_one;
  p.a = memory::desc({M, K}, input, trans_a ? dims{1, a_row_length} : dims{a_row_length, 1});
  p.b = memory::desc({K, N}, input, trans_b ? dims{1, K} : dims{row_length, 1});
  p.c = memory::desc({M, N}, dt::f32, dims{row_length, 1});
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
  const int threads = omp_get_max_threads();
  if (one_thread) omp_set_num_threads(1);  // what oneDNN plans for
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(p.a, p.b, p.c), attr, engine());
  if (one_thread) omp_set_num_threads(threads);
  p.prim = dnnl::matmul(pd);
  p.scratch = pd.scratchpad_desc();
  return made.emplace(key, std::move(made_one)).first->second;
}

template <typename In>
void run_block(const std::shared_ptr<const Product>& made, const In* A, const In* B, float* C,
               const float* residual) {
  const Product& p = *made;
  static thread_local dnnl::stream stream(engine());
  static thread_local std::vector<uint8_t> scratch;
  if (scratch.size() < p.scratch.get_size()) scratch.resize(p.scratch.get_size());
  memory a(p.a, engine(), const_cast<In*>(A)), b(p.b, engine(), const_cast<In*>(B)),
      c(p.c, engine(), C), pad(p.scratch, engine(), scratch.data());
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}, {DNNL_ARG_SCRATCHPAD, pad}};
  if (residual)
    args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1,
                 memory(p.c, engine(), const_cast<float*>(residual)));
  p.prim.execute(stream, args);
  stream.wait();
}

std::atomic<bool> column_blocks{true};  // set_bf16_column_blocks

// oneDNN's ISA values are sets of feature bits: the CPU has an ISA's features when its effective
// ISA holds all of that ISA's bits. (AVX2-VNNI, 0x407, is numerically above AVX512_BF16, 0xe7,
// without its instructions.)
bool cpu_has(dnnl::cpu_isa isa) {
  limit_onednn_to_level();
  const unsigned have = (unsigned)dnnl::get_effective_cpu_isa(), want = (unsigned)isa;
  return (have & want) == want;
}

// Columns of C per thread when the threads each run one single-threaded product on their own
// block of columns; 0 for one product on oneDNN's own threads. Measured on the model's products
// with 2 threads (perf-log #30), oneDNN's threading of one product reached 455-690 GFLOP/s, one
// block of columns per thread 530-755: each thread reads only its part of B and no thread waits
// for another inside the product. Blocks narrower than 128 columns were not measured; they keep
// oneDNN's threading. So do CPUs with AMX, unmeasured: here oneDNN gives a block (C with longer
// rows) its `gemm:jit` kernel instead of the brgemm one, which is where AMX tiles would be used.
int columns_per_thread(int N, int threads) {
  constexpr int kMinColumns = 128, kMultiple = 32;  // 32: whole cache lines of C and of B's rows
  static const bool amx = cpu_has(dnnl::cpu_isa::avx512_core_amx);
  if (threads < 2 || !column_blocks || amx) return 0;
  const int columns = ((N + threads - 1) / threads + kMultiple - 1) / kMultiple * kMultiple;
  return N - (threads - 1) * columns >= kMinColumns / 2 && columns >= kMinColumns ? columns : 0;
}

// Rows of C per thread, for a weight gradient (C = Aᵀ·B, A stored [K, M]) at least four times as
// tall as it is wide (the tied head's, fc's): each thread forms a block of whole rows of C from
// its own columns of A and all of B. A block of columns would read all of A, the larger operand,
// once per thread; measured on `small` and `gpt2` (perf-log #31), the head's weight gradient ran
// 4-5 % faster so, fc's 4-8 %, while on less tall ones (qkv's, 3:1) it made no difference.
int rows_per_thread(int M, int N, bool trans_a, int threads) {
  constexpr int kMinRows = 128, kMultiple = 32;
  // Only in place of blocks of columns, where those were measured against oneDNN's threading:
  // narrower products (the demo model's) keep oneDNN's own, which was faster there.
  if (!trans_a || M < 4 * N || columns_per_thread(N, threads) == 0) return 0;
  const int rows = ((M + threads - 1) / threads + kMultiple - 1) / kMultiple * kMultiple;
  return M - (threads - 1) * rows >= kMinRows / 2 && rows >= kMinRows ? rows : 0;
}

// C [M, N] (+)= A · B (see Product) with In = bf16 or float inputs, one product or blocks of it.
template <typename In>
void run(ProductShape s, const In* A, const In* B, float* C, bool accumulate,
         const float* residual = nullptr) {
  const memory::data_type input =
      std::is_same_v<In, float> ? memory::data_type::f32 : memory::data_type::bf16;
  const Epilogue epilogue = residual     ? Epilogue::add_residual
                            : accumulate ? Epilogue::accumulate
                                         : Epilogue::write;
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const int M = s.M, N = s.N, K = s.K;
  s.a_row_length = s.trans_a ? M : K, s.row_length = N;
  if (const int rows = rows_per_thread(M, N, s.trans_a, threads)) {
#pragma omp parallel num_threads(threads)
    for (int block = omp_get_thread_num(); block < threads; block += omp_get_num_threads()) {
      const int m0 = block * rows;
      ProductShape part = s;
      part.M = std::min(M - m0, rows);
      run_block(product(input, part, epilogue, true), A + m0, B, C + (size_t)m0 * N,
                residual ? residual + (size_t)m0 * N : nullptr);
    }
    return;
  }
  const int columns = columns_per_thread(N, threads);
  if (columns == 0) return run_block(product(input, s, epilogue, false), A, B, C, residual);
#pragma omp parallel num_threads(threads)
  // (A team smaller than asked for takes the blocks in turn.)
  for (int block = omp_get_thread_num(); block < threads; block += omp_get_num_threads()) {
    const int n0 = block * columns;
    ProductShape part = s;
    part.N = std::min(N - n0, columns);
    const In* B_block = B + (s.trans_b ? (size_t)n0 * K : (size_t)n0);
    run_block(product(input, part, epilogue, true), A, B_block, C + n0,
              residual ? residual + n0 : nullptr);
  }
}

}  // namespace

void set_bf16_column_blocks(bool on) {
  column_blocks = on;
}

bool bf16_available(std::string* why) {
  // xsa's own bf16 kernels (attention tiles, conversions) need the avx512_bf16 level too.
  const bool lowered = cpu_level() < CpuLevel::avx512_bf16;
  const bool available = !lowered && cpu_has(dnnl::cpu_isa::avx512_core_bf16);
  if (!available && why)
    *why = lowered && cpu_best_level() >= CpuLevel::avx512_bf16
               ? fmt::format(
                     "xsa runs at the {} level here (XSA_CPU), below the avx512_bf16 "
                     "level that bf16 needs (AVX512_BF16's instructions)",
                     level_name(cpu_level()))
               : "this CPU has neither AVX512_BF16 nor AMX-BF16 (Intel since Cooper Lake, AMD "
                 "since Zen 4 have them)";
  return available;
}

void matmul_forward_bf16(float* out, const bf16* inp, const bf16* weight, int N, int in_dim,
                         int out_dim, bool accumulate) {
  if (N == 0) return;
  run({N, out_dim, in_dim, false, true}, inp, weight, out, accumulate);  // inp · Wᵀ
}

void matmul_residual_bf16(float* out, const float* residual, const bf16* inp, const bf16* weight,
                          int N, int in_dim, int out_dim) {
  if (N == 0) return;
  if (out != residual)
    return run({N, out_dim, in_dim, false, true}, inp, weight, out, false, residual);
  // In place, the product goes to a buffer of its own and is added after, as the epilogue adds it
  // to the finished product: the same bits either way.
  static thread_local std::vector<float> alone;
  const size_t n = (size_t)N * out_dim;
  if (alone.size() < n) alone.resize(n);
  const float* p = alone.data();  // (inside the threads, `alone` names their own)
  run({N, out_dim, in_dim, false, true}, inp, weight, alone.data(), false);
  split_across_threads(n, [&](size_t begin, size_t end) {
#pragma omp simd
    for (size_t i = begin; i < end; i++) out[i] += p[i];
  });
}

void matmul_backward_bf16(float* dinp, float* dweight, const bf16* dout, const bf16* inp,
                          const bf16* weight, MatmulShape shape, bool accumulate) {
  const int N = shape.N, in_dim = shape.in_dim, out_dim = shape.out_dim;
  if (N == 0) return;
  if (dinp) run({N, in_dim, out_dim, false, false}, dout, weight, dinp, false);         // dout · W
  if (dweight) run({out_dim, in_dim, N, true, false}, dout, inp, dweight, accumulate);  // doutᵀ·inp
}

void matmul_forward_onednn(float* out, const float* inp, const float* weight, int N, int in_dim,
                           int out_dim, bool accumulate) {
  if (N == 0) return;
  run({N, out_dim, in_dim, false, true}, inp, weight, out, accumulate);  // inp · Wᵀ
}

void matmul_backward_onednn(float* dinp, float* dweight, const float* dout, const float* inp,
                            const float* weight, MatmulShape shape, bool accumulate) {
  const int N = shape.N, in_dim = shape.in_dim, out_dim = shape.out_dim;
  if (N == 0) return;
  if (dinp) run({N, in_dim, out_dim, false, false}, dout, weight, dinp, false);         // dout · W
  if (dweight) run({out_dim, in_dim, N, true, false}, dout, inp, dweight, accumulate);  // doutᵀ·inp
}

namespace {
std::string onednn_summary() {
  const dnnl_version_t* v = dnnl_version();
  const char* isa = "";
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::avx2:
      isa = "avx2";
      break;
    case dnnl::cpu_isa::avx512_core:
      isa = "avx512_core";
      break;
    case dnnl::cpu_isa::avx512_core_bf16:
      isa = "avx512_core_bf16";
      break;
    case dnnl::cpu_isa::avx512_core_amx:
      isa = "avx512_core_amx";
      break;
    default:
      isa = "other";
  }
  return fmt::format("oneDNN {}.{}.{} ({})", v->major, v->minor, v->patch, isa);
}
}  // namespace

#else

void matmul_forward_onednn(float*, const float*, const float*, int, int, int, bool) {
  XSA_CHECK(false, "oneDNN products in a build without oneDNN");
}
void matmul_backward_onednn(float*, float*, const float*, const float*, const float*, MatmulShape,
                            bool) {
  XSA_CHECK(false, "oneDNN products in a build without oneDNN");
}

bool bf16_available(std::string* why) {
  if (why) *why = "this xsa was built without oneDNN (apt install libdnnl-dev, then rebuild)";
  return false;
}

void matmul_forward_bf16(float*, const bf16*, const bf16*, int, int, int, bool) {
  XSA_CHECK(false, "bf16 products without oneDNN");
}

void set_bf16_column_blocks(bool) {}

void matmul_residual_bf16(float*, const float*, const bf16*, const bf16*, int, int, int) {
  XSA_CHECK(false, "bf16 products without oneDNN");
}

void matmul_backward_bf16(float*, float*, const bf16*, const bf16*, const bf16*, MatmulShape,
                          bool) {
  XSA_CHECK(false, "bf16 products without oneDNN");
}

#endif

ProductLibrary fp32_product_library() {
  static const ProductLibrary library = [] {
#ifdef XSA_WITH_DNNL
    ProductLibrary chosen = ProductLibrary::onednn;
#else
    ProductLibrary chosen = ProductLibrary::blas;
#endif
    const char* value = std::getenv("XSA_GEMM");
    if (!value || !*value) return chosen;
    if (std::strcmp(value, "blas") == 0) return ProductLibrary::blas;
    if (std::strcmp(value, "onednn") != 0)
      fail("XSA_GEMM={}: not a product library (blas or onednn)", value);
#ifndef XSA_WITH_DNNL
    fail("XSA_GEMM=onednn: this xsa was built without oneDNN (apt install libdnnl-dev, rebuild)");
#endif
    return ProductLibrary::onednn;
  }();
  return library;
}

std::string products_summary() {
  const std::string blas = blas_summary();
#ifdef XSA_WITH_DNNL
  if (fp32_product_library() == ProductLibrary::onednn)
    return fmt::format("products: fp32 and bf16 by {}; float64 by {}; attention's tiles by xsa",
                       onednn_summary(), blas);
  return fmt::format("products: fp32 and float64 by {}; bf16 by {}; attention's tiles by xsa", blas,
                     onednn_summary());
#else
  return fmt::format("products: by {}; attention's tiles by xsa", blas);
#endif
}

}  // namespace xsa::ops

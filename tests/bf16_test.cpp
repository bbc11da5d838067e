// bf16 products (ops/matmul_bf16.h): the conversion against rounding done by hand, and the
// products against float64 loops. Two tolerances, both derived rather than tuned:
// - on inputs that are already bf16 the product is exact up to fp32 accumulation over K terms:
//   |error| ≤ K · 2⁻²⁴ · Σ|a·b| (a loose bound on any summation order);
// - against the unrounded fp32 inputs, rounding each factor to bf16 (8 significant bits: relative
//   error ≤ 2⁻⁸) moves each term by at most (2·2⁻⁸ + 2⁻¹⁶)·|a·b|, so |error| ≤ (2⁻⁷ + 2⁻¹⁶)·Σ|a·b|
//   plus the accumulation bound.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "bounds.h"
#include "test_util.h"
#include "xsa/backend/backend.h"
#include "xsa/ops/matmul_bf16.h"
#include "xsa/ops/ops.h"
#include "xsa/ops/reference.h"
#include "xsa/util/threads.h"

namespace xsa {
namespace {

using ops::bf16;

float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// The nearest bf16 to x by comparing the two candidates in double; ties to the even one.
bf16 nearest_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  const bf16 down = (bf16)(u >> 16), up = (bf16)(down + 1);
  const double d_down = std::fabs((double)bits_to_float((uint32_t)down << 16) - x);
  const double d_up = std::fabs((double)bits_to_float((uint32_t)up << 16) - x);
  if (d_down != d_up) return d_down < d_up ? down : up;
  return (down & 1) ? up : down;
}

TEST(Bf16, ConversionRoundsToNearestEven) {
  std::vector<float> x = {1.0f,
                          -2.5f,
                          0.0f,
                          -0.0f,
                          1e-40f,
                          3.0e38f,
                          65504.0f,
                          bits_to_float(0x3f808000u),   // 1 + 2⁻⁸: halfway, even is down
                          bits_to_float(0x3f818000u),   // halfway, even is up
                          bits_to_float(0x3f808001u)};  // just above halfway: up
  for (double v : test::random_vector(2000, 3, 10.0)) x.push_back((float)v);
  std::vector<bf16> b(x.size());
  ops::to_bf16(x.data(), b.data(), x.size());
  for (size_t i = 0; i < x.size(); i++) EXPECT_EQ(b[i], nearest_bf16(x[i])) << x[i];
  EXPECT_EQ(b[7], 0x3f80);
  EXPECT_EQ(b[8], 0x3f82);
  EXPECT_EQ(b[9], 0x3f81);
  // Back to float exactly, and infinities and NaN survive.
  std::vector<float> back(x.size());
  ops::from_bf16(b.data(), back.data(), b.size());
  for (size_t i = 0; i < x.size(); i++) EXPECT_EQ(back[i], bits_to_float((uint32_t)b[i] << 16));
  const float special[3] = {std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN()};
  bf16 sb[3];
  float sf[3];
  ops::to_bf16(special, sb, 3);
  ops::from_bf16(sb, sf, 3);
  EXPECT_EQ(sf[0], special[0]);
  EXPECT_EQ(sf[1], special[1]);
  EXPECT_TRUE(std::isnan(sf[2]));
}

// Arrays past the size at which the conversion splits across threads (and one range ending off a
// 16-element boundary), with ties, NaN and denormals mixed in, against rounding by hand.
TEST(Bf16, LargeConversionSplitAcrossThreadsRoundsTheSame) {
  for (size_t n : {size_t(1 << 16) + 1, size_t(300007)}) {
    std::vector<float> x(n);
    const std::vector<double> r = test::random_vector(n, 11, 100.0);
    for (size_t i = 0; i < n; i++) x[i] = (float)r[i];
    for (size_t i = 0; i < n; i += 97) x[i] = bits_to_float(0x3f808000u + ((uint32_t)i << 17));
    x[n / 3] = std::numeric_limits<float>::quiet_NaN();
    x[n / 2] = 1e-40f;
    std::vector<bf16> b(n);
    ops::to_bf16(x.data(), b.data(), n);
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++)
      wrong += std::isnan(x[i]) ? !std::isnan(bits_to_float((uint32_t)b[i] << 16))
                                : b[i] != nearest_bf16(x[i]);
    EXPECT_EQ(wrong, 0u) << n;
    std::vector<float> back(n);
    ops::from_bf16(b.data(), back.data(), n);
    for (size_t i = 0; i < n; i++) {
      if (std::isnan(x[i])) continue;
      ASSERT_EQ(back[i], bits_to_float((uint32_t)b[i] << 16)) << i;
    }
  }
}

// to_bf16 runs AVX512_BF16's conversion where the CPU has it, which flushes denormals to zero; its
// lanes that hold one fall back to round_to_bf16's arithmetic. Every bit must be round_to_bf16's:
// denormals of both signs and sizes, the boundaries around the smallest normal, signed zeros,
// infinities and NaNs with payloads (quieted, upper half kept), at every position in a vector and
// in the masked tail.
TEST(Bf16, ConversionKeepsRoundToBf16sBits) {
  const uint32_t special[] = {0x00000001u, 0x80000001u, 0x00007fffu, 0x00008000u, 0x00018000u,
                              0x007fffffu, 0x807fffffu, 0x007f8000u, 0x00800000u, 0x80800000u,
                              0x0080ffffu, 0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u,
                              0x7fc00000u, 0xffc00001u, 0x7f800001u, 0x7fa5a5a5u, 0x7f7fffffu,
                              0x3f808000u, 0x3f818000u, 0x00408000u, 0x80418000u};
  const size_t count = sizeof(special) / sizeof(special[0]);
  for (size_t n : {size_t(16), size_t(37), size_t(1000)}) {
    std::vector<float> x(n);
    for (size_t i = 0; i < n; i++) x[i] = bits_to_float(special[(i * 7) % count]);
    std::vector<bf16> b(n);
    ops::to_bf16(x.data(), b.data(), n);
    for (size_t i = 0; i < n; i++) {
      uint32_t u;
      std::memcpy(&u, &x[i], 4);
      ASSERT_EQ(b[i], ops::round_to_bf16(x[i])) << std::hex << u << " at " << std::dec << i;
    }
  }
}

// The bf16 step's cross-entropy over GPT-2's vocabulary writes, bit for bit, the fp32
// cross-entropy's gradient rounded by round_to_bf16, and the same losses. One row spreads its
// logits so far that most of its gradient is denormal (the conversion's fallback), one is ignored,
// one holds a NaN (it propagates to the row's loss and gradient).
TEST(Bf16, CrossEntropyGradientIsTheFp32OneRounded) {
  std::string why;
  if (!ops::bf16_available(&why)) GTEST_SKIP() << "no bf16 products here: " << why;
  const int V = 50257, Vp = 50304, N = 7;
  std::vector<float> logits =
      test::cast_vector<float>(test::random_vector((size_t)N * Vp, 21, 3.0));
  // Row 1: one logit at 0, the others 80-99 below it: p_j · dloss from 3e-36 down to denormals
  // (the exp's floor is about 2⁻¹²⁶), which bf16 keeps down to 2⁻¹³³.
  for (int j = 0; j < V; j++) logits[(size_t)1 * Vp + j] = j == 50 ? 0.0f : -80.0f - j % 20;
  logits[(size_t)5 * Vp + 777] = std::numeric_limits<float>::quiet_NaN();
  const std::vector<int32_t> targets = {0, 50, -1, V - 1, 4242, 17, 31337};
  const float dloss = 1.0f / 6;
  std::vector<float> fp32 = logits, loss_fp32(N), loss_bf16(N);
  ops::crossentropy_forward_backward(fp32.data(), loss_fp32.data(), targets.data(), N, V, Vp,
                                     dloss);
  std::vector<bf16> grad((size_t)N * Vp, 0x5555);
  const std::vector<float> before = logits;
  ops::crossentropy_forward_backward_bf16(logits.data(), grad.data(), loss_bf16.data(),
                                          targets.data(), N, V, Vp, dloss);
  EXPECT_EQ(std::memcmp(logits.data(), before.data(), logits.size() * 4), 0)
      << "the logits are only read";
  EXPECT_EQ(std::memcmp(loss_bf16.data(), loss_fp32.data(), N * 4), 0);
  size_t wrong = 0, denormal = 0;
  for (size_t i = 0; i < grad.size(); i++) {
    wrong += grad[i] != ops::round_to_bf16(fp32[i]);
    denormal += fp32[i] != 0 && std::fabs(fp32[i]) < std::numeric_limits<float>::min();
  }
  EXPECT_EQ(wrong, 0u);
  EXPECT_GT(denormal, 10000u) << "the row meant to reach the fallback did not";
  EXPECT_TRUE(std::isnan(loss_bf16[5]));
  EXPECT_EQ(loss_bf16[2], 0.0f);
}

struct Case {
  int N, in_dim, out_dim;
  int threads = 1;  // past one, wide products run as a block of columns (or rows) per thread
};
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.N << " × " << c.in_dim << " → " << c.out_dim << ", " << c.threads << " thread(s)";
}

// Runs the scope on `threads` threads (the tests' environment sets one).
class ThreadCount {
 public:
  explicit ThreadCount(int threads) : before_(omp_get_max_threads()) { set_thread_count(threads); }
  ~ThreadCount() { set_thread_count(before_); }

 private:
  int before_;
};

class Bf16Products : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    std::string why;
    if (!ops::bf16_available(&why)) GTEST_SKIP() << "no bf16 products here: " << why;
  }
};

// A [M, K] · B, B given [N, K] (trans_b) or [K, N], in double, with Σ|a·b| per entry.
void reference(const std::vector<float>& A, const std::vector<float>& B, int M, int N, int K,
               bool trans_a, bool trans_b, std::vector<double>& out, std::vector<double>& mag) {
  out.assign((size_t)M * N, 0), mag.assign((size_t)M * N, 0);
  for (int m = 0; m < M; m++)
    for (int n = 0; n < N; n++)
      for (int k = 0; k < K; k++) {
        const double a = trans_a ? A[(size_t)k * M + m] : A[(size_t)m * K + k];
        const double b = trans_b ? B[(size_t)n * K + k] : B[(size_t)k * N + n];
        out[(size_t)m * N + n] += a * b, mag[(size_t)m * N + n] += std::fabs(a * b);
      }
}

std::vector<float> rounded(const std::vector<float>& x, std::vector<bf16>& b) {
  b.resize(x.size());
  ops::to_bf16(x.data(), b.data(), x.size());
  std::vector<float> back(x.size());
  ops::from_bf16(b.data(), back.data(), b.size());
  return back;
}

void expect_within(const std::vector<float>& got, const std::vector<double>& exact,
                   const std::vector<double>& bf16_exact, const std::vector<double>& mag, int K,
                   const char* what) {
  const double acc = K * std::ldexp(1.0, -24);
  for (size_t i = 0; i < got.size(); i++) {
    ASSERT_NEAR(got[i], bf16_exact[i], acc * mag[i] + 1e-30) << what << " entry " << i;
    ASSERT_NEAR(got[i], exact[i],
                (std::ldexp(1.0, -7) + std::ldexp(1.0, -16) + acc) * mag[i] + 1e-30)
        << what << " entry " << i;
  }
}

TEST_P(Bf16Products, ForwardAndBackwardAgainstFloat64) {
  const Case c = GetParam();
  const ThreadCount threads(c.threads);
  const std::vector<float> x =
      test::cast_vector<float>(test::random_vector((size_t)c.N * c.in_dim, 1));
  const std::vector<float> w =
      test::cast_vector<float>(test::random_vector((size_t)c.out_dim * c.in_dim, 2, 0.1));
  const std::vector<float> dy =
      test::cast_vector<float>(test::random_vector((size_t)c.N * c.out_dim, 3));
  std::vector<bf16> xb, wb, dyb;
  const std::vector<float> xr = rounded(x, xb), wr = rounded(w, wb), dyr = rounded(dy, dyb);
  std::vector<double> exact, bexact, mag, unused;

  // Forward, then again accumulating onto it.
  std::vector<float> y((size_t)c.N * c.out_dim, 0.0f);
  ops::matmul_forward_bf16(y.data(), xb.data(), wb.data(), c.N, c.in_dim, c.out_dim, false);
  reference(x, w, c.N, c.out_dim, c.in_dim, false, true, exact, mag);
  reference(xr, wr, c.N, c.out_dim, c.in_dim, false, true, bexact, unused);
  expect_within(y, exact, bexact, mag, c.in_dim, "forward");
  ops::matmul_forward_bf16(y.data(), xb.data(), wb.data(), c.N, c.in_dim, c.out_dim, true);
  for (auto* v : {&exact, &bexact, &mag})
    for (double& e : *v) e *= 2;
  expect_within(y, exact, bexact, mag, c.in_dim, "forward, accumulated");

  // Backward: dx = dy · W, dW += dyᵀ · x onto a non-zero dW.
  std::vector<float> dx((size_t)c.N * c.in_dim), dw((size_t)c.out_dim * c.in_dim, 0.5f);
  ops::matmul_backward_bf16(dx.data(), dw.data(), dyb.data(), xb.data(), wb.data(),
                            {c.N, c.in_dim, c.out_dim});
  reference(dy, w, c.N, c.in_dim, c.out_dim, false, false, exact, mag);
  reference(dyr, wr, c.N, c.in_dim, c.out_dim, false, false, bexact, unused);
  expect_within(dx, exact, bexact, mag, c.out_dim, "dinp");
  reference(dy, x, c.out_dim, c.in_dim, c.N, true, false, exact, mag);
  reference(dyr, xr, c.out_dim, c.in_dim, c.N, true, false, bexact, unused);
  for (auto* v : {&exact, &bexact})
    for (double& e : *v) e += 0.5;
  expect_within(dw, exact, bexact, mag, c.N, "dweight");
  // Without dinp only the weight gradient is formed.
  std::vector<float> dw2((size_t)c.out_dim * c.in_dim, 0.5f);
  ops::matmul_backward_bf16(nullptr, dw2.data(), dyb.data(), xb.data(), wb.data(),
                            {c.N, c.in_dim, c.out_dim});
  EXPECT_EQ(dw2, dw);
  // Not accumulating, the weight gradient is the product alone (what was there, NaN here, is not
  // read): to the bit what accumulating onto zeros gives.
  std::vector<float> dw_new(dw.size(), std::numeric_limits<float>::quiet_NaN()),
      dw_onto_zero(dw.size(), 0.0f);
  ops::matmul_backward_bf16(nullptr, dw_new.data(), dyb.data(), xb.data(), wb.data(),
                            {c.N, c.in_dim, c.out_dim}, false);
  ops::matmul_backward_bf16(nullptr, dw_onto_zero.data(), dyb.data(), xb.data(), wb.data(),
                            {c.N, c.in_dim, c.out_dim}, true);
  EXPECT_EQ(dw_new, dw_onto_zero);
}

INSTANTIATE_TEST_SUITE_P(Shapes, Bf16Products,
                         ::testing::Values(Case{1, 16, 8}, Case{7, 33, 5}, Case{64, 64, 192},
                                           Case{130, 96, 384}, Case{130, 288, 384, 2},
                                           Case{130, 288, 384, 3}, Case{70, 384, 2080, 4},
                                           // weight gradients as blocks of rows (4:1 and taller)
                                           Case{40, 256, 1030, 2}, Case{30, 384, 1600, 3}));

// A residual connection formed inside the product (oneDNN's binary post-op) adds the residual to
// the finished product: the bits of the product written alone and then added, on the shapes of
// `gpt2`'s two residual products and on odd ones, one and two threads; through the backend too,
// in place as well. (Accumulating the product onto a copy of the residual, the form it replaced,
// may add partial sums one by one; the products' test holds that form to its tolerance.)
TEST(Bf16, ResidualInsideTheProductIsAddedToTheFinishedProduct) {
  std::string why;
  if (!ops::bf16_available(&why)) GTEST_SKIP() << "no bf16 products here: " << why;
  Backend<float>& be = cpu_backend(Precision::bf16);
  for (const Case c : {Case{7, 33, 5}, Case{130, 96, 384}, Case{1024, 768, 768},
                       Case{1024, 3072, 768}, Case{1024, 768, 768, 2}, Case{1024, 3072, 768, 2}}) {
    SCOPED_TRACE(testing::PrintToString(c));
    const ThreadCount threads(c.threads);
    const std::vector<float> x =
        test::cast_vector<float>(test::random_vector((size_t)c.N * c.in_dim, 41));
    const std::vector<float> w =
        test::cast_vector<float>(test::random_vector((size_t)c.out_dim * c.in_dim, 42, 0.05));
    const std::vector<float> residual =
        test::cast_vector<float>(test::random_vector((size_t)c.N * c.out_dim, 43));
    std::vector<bf16> xb, wb;
    rounded(x, xb), rounded(w, wb);
    std::vector<float> fused(residual.size(), std::numeric_limits<float>::quiet_NaN());
    ops::matmul_residual_bf16(fused.data(), residual.data(), xb.data(), wb.data(), c.N, c.in_dim,
                              c.out_dim);
    std::vector<float> added(residual.size());
    ops::matmul_forward_bf16(added.data(), xb.data(), wb.data(), c.N, c.in_dim, c.out_dim, false);
    for (size_t i = 0; i < added.size(); i++) added[i] += residual[i];
    ASSERT_EQ(fused, added);
    be.weights_changed();
    std::vector<float> through_backend(residual.size()), in_place = residual;
    be.matmul_forward_residual(through_backend.data(), residual.data(), x.data(), w.data(),
                               {c.N, c.in_dim, c.out_dim});
    be.matmul_forward_residual(in_place.data(), in_place.data(), x.data(), w.data(),
                               {c.N, c.in_dim, c.out_dim});
    EXPECT_EQ(through_backend, added);
    EXPECT_EQ(in_place, added);
  }
  be.weights_changed();
}

// Product inputs (backend.h): LayerNorm's and GELU's outputs, and GELU's and RoPE's gradients,
// written as bf16 by the ops that make them and read so by the products must give the products
// exactly the operands that converting the fp32 values gives them: every output and gradient bit
// for bit equal to the plain ops', and the stored halves equal to each fp32 output rounded to the
// nearest bf16 (ties to even, by hand). One row (N = 1) stays fp32, as its products do; 13 rows
// leave a tail outside LayerNorm's row groups.
// XSA's z as a product input: the bf16 backend's attention writes it as bf16 (forward, and again
// in the backward) when only W_o's products read it. Everything else the attention writes keeps
// its bits, z holds each fp32 z rounded by round_to_bf16, and W_o's products (the residual
// forward, the weight gradient) give the bits they give on the fp32 z. Plain and gated XSA with a
// sink, grouped-query heads, head sizes 16 and 64; one row (decoding's shape) keeps fp32.
TEST(Bf16, XsaOutputHeldAsBf16GivesWoTheSameOperand) {
  std::string why;
  if (!ops::bf16_available(&why)) GTEST_SKIP() << "no bf16 products here: " << why;
  Backend<float>& be = cpu_backend(Precision::bf16);
  const auto random = [](size_t n, uint64_t seed, double scale = 1.0) {
    return test::cast_vector<float>(test::random_vector(n, seed, scale));
  };
  struct Shape {
    int B, T, H, Hkv, D;
    bool gated;
  };
  for (const Shape sh : {Shape{2, 37, 4, 2, 16, true}, Shape{1, 70, 2, 2, 64, false},
                         Shape{1, 1, 4, 4, 16, false}}) {
    SCOPED_TRACE(testing::Message() << sh.B << "×" << sh.T << ", D " << sh.D);
    const int C = sh.H * sh.D, N = sh.B * sh.T, QKV = C + 2 * sh.Hkv * sh.D;
    const std::vector<float> qkv = random((size_t)N * QKV, 71),
                             w_o = random((size_t)C * C, 72, 0.1);
    const std::vector<float> residual = random((size_t)N * C, 73), d_y = random((size_t)N * C, 74);
    const std::vector<float> alpha = random(sh.H, 75, 0.5), sink = random(sh.H, 76);
    struct Run {
      std::vector<float> y, z, lse, z_again, d_out, dqkv, dalpha, dsink, out, d_w_o;
    };
    const auto run = [&](bool product_input) {
      const Storage held = product_input ? be.product_input_storage(N) : Storage::fp32;
      Run r{std::vector<float>((size_t)N * C),
            std::vector<float>((size_t)N * C),
            std::vector<float>((size_t)sh.B * sh.H * sh.T),
            std::vector<float>((size_t)N * C),
            d_y,
            std::vector<float>((size_t)N * QKV),
            std::vector<float>((size_t)N * sh.H),
            std::vector<float>((size_t)sh.B * sh.H),
            std::vector<float>((size_t)N * C),
            std::vector<float>((size_t)C * C)};
      ops::AttentionArgs<float> a;
      a.B = sh.B, a.T = sh.T, a.C = C, a.H = sh.H, a.Hkv = sh.Hkv, a.exclusive = true;
      a.qkv = qkv.data(), a.y = r.y.data(), a.z = {r.z.data(), held}, a.lse = r.lse.data();
      a.alpha = sh.gated ? alpha.data() : nullptr, a.sink = sink.data();
      be.attention_forward(a);
      be.matmul_forward_residual(r.out.data(), residual.data(), a.z, w_o.data(), {N, C, C});
      a.z = {r.z_again.data(), held}, a.dqkv = r.dqkv.data(), a.write_dqkv = true;
      a.d_out = r.d_out.data(), a.dalpha = sh.gated ? r.dalpha.data() : nullptr;
      a.dsink = r.dsink.data();
      be.attention_backward(a);
      be.matmul_backward(nullptr, r.d_w_o.data(), d_y.data(), a.z, w_o.data(), {N, C, C}, false);
      return r;
    };
    const Run plain = run(false), held = run(true);
    EXPECT_EQ(held.y, plain.y);
    EXPECT_EQ(held.lse, plain.lse);
    EXPECT_EQ(held.d_out, plain.d_out);
    EXPECT_EQ(held.dqkv, plain.dqkv);
    EXPECT_EQ(held.dalpha, plain.dalpha);
    EXPECT_EQ(held.dsink, plain.dsink);
    EXPECT_EQ(held.out, plain.out);
    EXPECT_EQ(held.d_w_o, plain.d_w_o);
    // What z's buffers hold: the fp32 z rounded (first half), or with one row z itself.
    for (const auto* z : {&held.z, &held.z_again}) {
      if (N == 1) {
        EXPECT_EQ(*z, plain.z);
        continue;
      }
      const bf16* stored = reinterpret_cast<const bf16*>(z->data());
      size_t wrong = 0;
      for (size_t i = 0; i < plain.z.size(); i++)
        wrong += stored[i] != ops::round_to_bf16(plain.z[i]);
      EXPECT_EQ(wrong, 0u);
    }
    EXPECT_EQ(plain.z_again, plain.z) << "the backward writes the forward's z again";
  }
  be.weights_changed();
}

TEST(Bf16, ProductInputsHeldAsBf16GiveTheProductsTheSameOperands) {
  std::string why;
  if (!ops::bf16_available(&why)) GTEST_SKIP() << "no bf16 products here: " << why;
  Backend<float>& be = cpu_backend(Precision::bf16);
  const int C = 96, F = 4 * C;
  const auto random = [](size_t n, uint64_t seed, double scale = 1.0) {
    return test::cast_vector<float>(test::random_vector(n, seed, scale));
  };
  const std::vector<float> ln_w = random(C, 51, 0.5), ln_b = random(C, 52, 0.1);
  const std::vector<float> w_fc = random((size_t)F * C, 53, 0.05),
                           w_proj = random((size_t)C * F, 54, 0.05);
  // RoPE's gradient: 4 query heads of 24 and 2 key/value heads, so qkv rows of 96 + 2·2·24.
  const int H = 4, Hkv = 2, D = C / H, QKV = C + 2 * Hkv * D;
  const std::vector<float> w_qkv = random((size_t)QKV * C, 59, 0.05);
  for (const int N : {1, 2, 13, 256}) {
    SCOPED_TRACE(testing::Message() << N << " rows");
    const std::vector<float> x = random((size_t)N * C, 55), residual = random((size_t)N * C, 56);
    const std::vector<float> d_out = random((size_t)N * C, 57), d_fc = random((size_t)N * F, 58);
    const std::vector<float> d_qkv = random((size_t)N * QKV, 60);
    std::vector<float> cos((size_t)N * D / 2), sin((size_t)N * D / 2);
    be.rope_table(cos.data(), sin.data(), N, D, 10000.0);
    struct Run {
      std::vector<float> ln, mean, rstd, fc, gelu, out, out_in_place, d_ln, d_w_fc, d_gelu,
          d_w_proj;
      // GELU's and RoPE's gradients as the next products find them, and those products' results.
      std::vector<float> gelu_grad, d_ln_via_gelu, d_w_fc_via_gelu, rotated, d_ln_via_qkv, d_w_qkv;
    };
    const auto run = [&](bool product_inputs) {
      const float nan = std::numeric_limits<float>::quiet_NaN();
      Run r{std::vector<float>((size_t)N * C, nan),
            std::vector<float>(N, nan),
            std::vector<float>(N, nan),
            std::vector<float>((size_t)N * F, nan),
            std::vector<float>((size_t)N * F, nan),
            std::vector<float>((size_t)N * C, nan),
            residual,
            std::vector<float>((size_t)N * C, nan),
            std::vector<float>((size_t)F * C, nan),
            std::vector<float>((size_t)N * F, nan),
            std::vector<float>((size_t)C * F, nan),
            {},
            {},
            {},
            {},
            {},
            {}};
      be.weights_changed();
      // The plan's storage for product inputs, or plain fp32.
      const Storage s = product_inputs ? be.product_input_storage(N) : Storage::fp32;
      const Tensor<float> ln{r.ln.data(), s}, gelu{r.gelu.data(), s};
      be.layernorm_forward(
          ln, {x.data(), ln_w.data(), ln_b.data(), r.mean.data(), r.rstd.data(), N, C});
      be.matmul_forward(r.fc.data(), ln, w_fc.data(), {N, C, F}, false);
      be.gelu_forward(gelu, r.fc.data(), (size_t)N * F);
      be.matmul_forward_residual(r.out.data(), residual.data(), gelu, w_proj.data(), {N, F, C});
      be.matmul_forward_residual(r.out_in_place.data(), r.out_in_place.data(), gelu, w_proj.data(),
                                 {N, F, C});
      be.matmul_backward(r.d_gelu.data(), r.d_w_proj.data(), d_out.data(), gelu, w_proj.data(),
                         {N, F, C}, false);
      be.matmul_backward(r.d_ln.data(), r.d_w_fc.data(), d_fc.data(), ln, w_fc.data(), {N, C, F},
                         false);
      r.d_ln_via_gelu.assign((size_t)N * C, nan), r.d_w_fc_via_gelu.assign((size_t)F * C, nan);
      r.d_ln_via_qkv.assign((size_t)N * C, nan), r.d_w_qkv.assign((size_t)QKV * C, nan);
      // The gradients in place (fp32), or as bf16 into a spare buffer, as the model's plan puts
      // them.
      std::vector<float> grad = r.d_gelu, spare((size_t)N * F, nan), rotated = d_qkv;
      const auto target = [&](std::vector<float>& in_place) {
        return s == Storage::fp32 ? Tensor<float>(in_place.data()) : Tensor<float>(spare.data(), s);
      };
      const Tensor<float> g = target(grad);
      be.gelu_backward(g, r.fc.data(), grad.data(), (size_t)N * F);
      be.matmul_backward(r.d_ln_via_gelu.data(), r.d_w_fc_via_gelu.data(), g, ln, w_fc.data(),
                         {N, C, F}, false);
      r.gelu_grad.assign(g.data, g.data + (size_t)N * F);
      const Tensor<float> q = target(rotated);
      be.rope_backward(q, rotated.data(), {cos.data(), sin.data(), 1, N, C, H, Hkv});
      be.matmul_backward(r.d_ln_via_qkv.data(), r.d_w_qkv.data(), q, ln, w_qkv.data(), {N, C, QKV},
                         false);
      r.rotated.assign(q.data, q.data + (size_t)N * QKV);
      return r;
    };
    const Run plain = run(false), held = run(true);
    // Bits, not values: NaN would compare unequal to itself, and -0 equal to 0.
    const auto bits_equal = [](const std::vector<float>& a, const std::vector<float>& b) {
      return a.size() == b.size() && std::memcmp(a.data(), b.data(), 4 * a.size()) == 0;
    };
    EXPECT_TRUE(bits_equal(held.mean, plain.mean));
    EXPECT_TRUE(bits_equal(held.rstd, plain.rstd));
    EXPECT_TRUE(bits_equal(held.fc, plain.fc));
    EXPECT_TRUE(bits_equal(held.out, plain.out));
    EXPECT_TRUE(bits_equal(held.out_in_place, plain.out_in_place));
    EXPECT_TRUE(bits_equal(held.d_gelu, plain.d_gelu));
    EXPECT_TRUE(bits_equal(held.d_w_proj, plain.d_w_proj));
    EXPECT_TRUE(bits_equal(held.d_ln, plain.d_ln));
    EXPECT_TRUE(bits_equal(held.d_w_fc, plain.d_w_fc));
    EXPECT_TRUE(bits_equal(held.d_ln_via_gelu, plain.d_ln_via_gelu));
    EXPECT_TRUE(bits_equal(held.d_w_fc_via_gelu, plain.d_w_fc_via_gelu));
    EXPECT_TRUE(bits_equal(held.d_ln_via_qkv, plain.d_ln_via_qkv));
    EXPECT_TRUE(bits_equal(held.d_w_qkv, plain.d_w_qkv));
    // What the product inputs' buffers hold: one row fp32 as the plain ops write it, more rows
    // each value rounded to bf16 in the buffer's first half.
    const auto stored = [&](const std::vector<float>& buffer, const std::vector<float>& fp32) {
      if (N == 1) return bits_equal(buffer, fp32);
      std::vector<bf16> half(fp32.size());
      std::memcpy(half.data(), buffer.data(), 2 * half.size());
      for (size_t i = 0; i < fp32.size(); i++)
        if (half[i] != nearest_bf16(fp32[i])) return false;
      return true;
    };
    EXPECT_TRUE(stored(held.ln, plain.ln));
    EXPECT_TRUE(stored(held.gelu, plain.gelu));
    EXPECT_TRUE(stored(held.gelu_grad, plain.gelu_grad));
    EXPECT_TRUE(stored(held.rotated, plain.rotated));
  }
  be.weights_changed();
}

// The classifier of the bf16 backend writes its gradient in bf16 from inside the cross-entropy;
// the unfused path (logits, cross-entropy, then the gradient converted for the products) must give
// the same bits: losses, the input gradient and the accumulated weight gradient. One ignored row.
TEST(Bf16, FusedClassifierEqualsTheUnfusedOps) {
  std::string why;
  if (!ops::bf16_available(&why)) GTEST_SKIP() << "no bf16 products here: " << why;
  const int rows = 9, C = 24, V = 70, Vp = 80;
  Backend<float>& be = cpu_backend(Precision::bf16);
  const std::vector<float> inp = test::cast_vector<float>(test::random_vector((size_t)rows * C, 4));
  std::vector<float> wte = test::cast_vector<float>(test::random_vector((size_t)Vp * C, 5, 0.3));
  std::vector<int32_t> targets(rows);
  for (int r = 0; r < rows; r++) targets[r] = (r * 37) % V;
  targets[3] = -1;
  struct Out {
    std::vector<float> logits, losses, dinp, dwte;
  };
  const auto classifier_args = [&](Out& o, bool accumulate) {
    ClassifierArgs<float> a;
    a.logits = o.logits.data(), a.losses = o.losses.data(), a.targets = targets.data();
    a.inp = inp.data(), a.wte = wte.data(), a.dinp = o.dinp.data(), a.dwte = o.dwte.data();
    a.rows = rows, a.C = C, a.V = V, a.Vp = Vp, a.dloss = 1.0f / rows, a.accumulate = accumulate;
    return a;
  };
  auto run = [&](bool fused, bool accumulate) {
    Out o{std::vector<float>((size_t)rows * Vp), std::vector<float>(rows),
          std::vector<float>((size_t)rows * C), std::vector<float>((size_t)Vp * C, 0.25f)};
    be.weights_changed();
    const ClassifierArgs<float> head = classifier_args(o, accumulate);
    fused ? be.classifier_forward_backward(head) : classifier_by_ops(be, head);
    return o;
  };
  const Out fused = run(true, true), plain = run(false, true);
  EXPECT_EQ(fused.losses, plain.losses);
  EXPECT_EQ(fused.dinp, plain.dinp);
  EXPECT_EQ(fused.dwte, plain.dwte);
  // Not accumulating, dwte is overwritten: the accumulated one less the 0.25 it started from.
  // Each is a sum of the rows' products (|∂L/∂logit| ≤ 1/rows each) in fp32, with or without the
  // 0.25, in any order: within γ_{rows+1}·(Σ|terms| + 0.25) of exact, and the test's own + 0.25f
  // rounds once more.
  const Out fresh = run(true, false), fresh_plain = run(false, false);
  EXPECT_EQ(fresh.dwte, fresh_plain.dwte);
  const double u = test::kFloatRoundoff, gamma = (rows + 1) * u / (1 - (rows + 1) * u);
  for (size_t i = 0; i < fresh.dwte.size(); i++) {
    const size_t k = i % C;
    double terms = 0;
    for (int r = 0; r < rows; r++) terms += std::fabs(inp[r * C + k]) * (1 + 0x1p-8) / rows;
    ASSERT_NEAR(fresh.dwte[i] + 0.25f, fused.dwte[i],
                2 * gamma * (terms + 0.25) + u * (std::fabs(fresh.dwte[i]) + 0.25))
        << i;
  }
  EXPECT_EQ(fused.losses[3], 0.0f);
  // And the losses are the fp32 cross-entropy of bf16 logits: each logit within the product
  // bound above (e_j), so log-sum-exp and the target's logit move by at most max_j e_j each.
  const Out fp32 = [&] {
    Out o{std::vector<float>((size_t)rows * Vp), std::vector<float>(rows),
          std::vector<float>((size_t)rows * C), std::vector<float>((size_t)Vp * C, 0.25f)};
    cpu_backend<float>().classifier_forward_backward(classifier_args(o, true));
    return o;
  }();
  for (int r = 0; r < rows; r++) {
    double worst = 0;
    for (int j = 0; j < V; j++) {
      double mag = 0;
      for (int k = 0; k < C; k++) mag += std::fabs((double)inp[r * C + k] * wte[j * C + k]);
      worst = std::max(worst, (std::ldexp(1.0, -7) + std::ldexp(1.0, -16) + C * 0x1p-24) * mag);
    }
    // (and each side's own cross-entropy roundings, test::crossentropy_bounds: the sum of V exps,
    // their 4u, log's 2u and the last subtraction's, relative to the loss and log V)
    const double u = test::kFloatRoundoff;
    EXPECT_NEAR(fused.losses[r], fp32.losses[r],
                2 * worst + 2 * (test::sum_error(V, u) + 8 * u) * (std::log(V) + fp32.losses[r]))
        << r;
  }
}

// Attention with bf16 tile products (the bf16 backend's) against the float64 reference, on inputs
// that are bf16 already, so that the only roundings left are the kernel's own: each probability
// tile p (for p·v and pᵀ·dy) and each score-gradient tile ds (for ds·k and dsᵀ·q) rounded to bf16,
// a relative error ≤ u = 2⁻⁸ per term. So every output entry, a sum of such terms, is within
// u·Σ|terms| of the exact value, plus fp32's own accumulation (≤ 2⁻¹⁶ of the largest entry here,
// well above D·2⁻²⁴ for these head sizes); the row log-sum-exp uses no rounded operand and gets
// only the fp32 slack. The backward reads the reference's y and lse, so it is checked on its own.
// Shapes: head sizes 64 (the models'), 12 and an odd 9 (padded pairs), T cut into uneven tiles and
// odd tiles, grouped-query attention with a sink.
TEST(Bf16, AttentionTilesAgainstFloat64) {
  std::string why;
  if (!ops::bf16_available(&why)) GTEST_SKIP() << "no bf16 products here: " << why;
  struct Shape {
    int B, T, C, H, Hkv;
    bool sink;
  };
  for (Shape s : {Shape{2, 200, 128, 2, 0, false}, Shape{1, 131, 24, 2, 0, false},
                  Shape{1, 67, 18, 2, 0, false}, Shape{2, 97, 64, 4, 2, true}}) {
    SCOPED_TRACE(testing::Message() << "B=" << s.B << " T=" << s.T << " C=" << s.C << " H=" << s.H
                                    << " Hkv=" << s.Hkv << (s.sink ? " sink" : ""));
    const int N = s.B * s.T, D = s.C / s.H, Hk = s.Hkv ? s.Hkv : s.H, W = s.C + 2 * Hk * D;
    auto bf16_exact = [](const std::vector<double>& v) {  // each entry rounded to bf16
      std::vector<bf16> unused;
      return test::cast_vector<double>(rounded(test::cast_vector<float>(v), unused));
    };
    const std::vector<double> qkv = bf16_exact(test::random_vector((size_t)N * W, 11)),
                              dy = bf16_exact(test::random_vector((size_t)N * s.C, 12)),
                              sink = test::random_vector(s.H, 13);
    const double* sink_ref = s.sink ? sink.data() : nullptr;
    std::vector<double> y_ref((size_t)N * s.C), lse_ref((size_t)s.B * s.H * s.T),
        dqkv_ref((size_t)N * W, 0.0), dsink_ref(s.H, 0.0);
    ref::attention_forward(y_ref.data(), lse_ref.data(), qkv.data(),
                           ref::Heads{s.B, s.T, s.C, s.H, s.Hkv}, sink_ref);
    ref::attention_backward(dqkv_ref.data(), dy.data(), qkv.data(),
                            ref::Heads{s.B, s.T, s.C, s.H, s.Hkv}, sink_ref, dsink_ref.data());

    std::vector<double> y_mag, d_mag;
    test::attention_term_magnitudes(qkv, dy, lse_ref, s.B, s.T, s.C, s.H, s.Hkv, y_mag, d_mag);
    auto qkvf = test::cast_vector<float>(qkv), dyf = test::cast_vector<float>(dy),
         yf_ref = test::cast_vector<float>(y_ref), lsef_ref = test::cast_vector<float>(lse_ref),
         sinkf = test::cast_vector<float>(sink);
    std::vector<float> y(y_ref.size()), lse(lse_ref.size()), dqkv(dqkv_ref.size(), 0.0f),
        dsink((size_t)s.B * s.H);
    ops::AttentionArgs<float> args{.B = s.B,
                                   .T = s.T,
                                   .C = s.C,
                                   .H = s.H,
                                   .Hkv = s.Hkv,
                                   .qkv = qkvf.data(),
                                   .y = y.data(),
                                   .lse = lse.data(),
                                   .sink = s.sink ? sinkf.data() : nullptr,
                                   .dqkv = dqkv.data(),
                                   .d_out = dyf.data(),
                                   .dsink = dsink.data()};
    ops::attention_forward(args, Storage::bf16);
    args.y = yf_ref.data(), args.lse = lsef_ref.data();  // the backward on exact y and lse
    ops::attention_backward(args, Storage::bf16);

    const double u = std::ldexp(1.0, -8), slack = std::ldexp(1.0, -16);
    auto expect_within = [&](const std::vector<float>& got, const std::vector<double>& exact,
                             const std::vector<double>& mag, const char* what) {
      double largest = 0;
      for (double e : exact) largest = std::max(largest, std::fabs(e));
      for (size_t i = 0; i < got.size(); i++)
        ASSERT_NEAR(got[i], exact[i], u * mag[i] + slack * largest) << what << " entry " << i;
    };
    expect_within(y, y_ref, y_mag, "y");
    expect_within(lse, lse_ref, std::vector<double>(lse_ref.size(), 0.0), "lse");
    expect_within(dqkv, dqkv_ref, d_mag, "dqkv");
  }
}

// The bf16 backend's AdamW writes each weight's bf16 copy in its own pass: the weights and moments
// are those of the fp32 update to the bit, and the copy is the updated weights rounded (to_bf16,
// tested above), which the next product then uses without converting again.
TEST(Bf16, AdamWWritesTheWeightCopy) {
  std::string why;
  if (!ops::bf16_available(&why)) GTEST_SKIP() << "no bf16 products here: " << why;
  const size_t n = 100003;  // past the conversions' split size, no multiple of a vector
  const std::vector<float> p0 = test::cast_vector<float>(test::random_vector(n, 21)),
                           g = test::cast_vector<float>(test::random_vector(n, 22)),
                           m0 = test::cast_vector<float>(test::random_vector(n, 23, 0.1));
  std::vector<float> v0(n);
  for (size_t i = 0; i < n; i++) v0[i] = 0.01f * std::fabs(m0[i]);
  const ops::AdamWSettings s{1e-3, 0.9, 0.95, 1e-8, 0.1, 0.5, 3};
  std::vector<float> p = p0, m = m0, v = v0, p_ref = p0, m_ref = m0, v_ref = v0;
  std::vector<bf16> copy(n, 0);
  ops::adamw_update(p.data(), g.data(), m.data(), v.data(), n, s, copy.data());
  ops::adamw_update(p_ref.data(), g.data(), m_ref.data(), v_ref.data(), n, s);
  EXPECT_EQ(p, p_ref);
  EXPECT_EQ(m, m_ref);
  EXPECT_EQ(v, v_ref);
  for (size_t i = 0; i < n; i++) ASSERT_EQ(copy[i], nearest_bf16(p_ref[i])) << i;

  // Through the backend: a product after the update uses the updated weights' copy.
  Backend<float>& be = cpu_backend(Precision::bf16);
  const int rows = 3, in = 7, out = 5;
  std::vector<float> w = test::cast_vector<float>(test::random_vector(in * out, 24)),
                     gw = test::cast_vector<float>(test::random_vector(in * out, 25)),
                     mw(in * out, 0.0f), vw(in * out, 0.0f),
                     x = test::cast_vector<float>(test::random_vector(rows * in, 26));
  std::vector<float> y(rows * out), y_fresh(rows * out);
  be.matmul_forward(y.data(), x.data(), w.data(), {rows, in, out}, false);  // makes the copy
  be.adamw_update(w.data(), gw.data(), mw.data(), vw.data(), w.size(), s);
  be.weights_changed();
  be.matmul_forward(y.data(), x.data(), w.data(), {rows, in, out}, false);
  std::vector<float> w_again = w;  // the same values at another address: a copy made afresh
  be.matmul_forward(y_fresh.data(), x.data(), w_again.data(), {rows, in, out}, false);
  EXPECT_EQ(y, y_fresh);
  be.weights_changed();  // whatever comes later at these addresses gets copies of its own
}

// weights_changed(begin, n) drops the copies of the weights in that range only: a second model's
// (outside it) keeps its copy, as two models stepped in turn in one process (compare's arms,
// bench's SA and XSA) must not convert each other's weights again.
TEST(Bf16, WeightsChangedDropsOnlyTheCopiesInItsRange) {
  std::string why;
  if (!ops::bf16_available(&why)) GTEST_SKIP() << "no bf16 products here: " << why;
  Backend<float>& be = cpu_backend(Precision::bf16);
  const int rows = 3, in = 8, out = 4, n = in * out;
  std::vector<float> weights = test::cast_vector<float>(test::random_vector(2 * n, 31));
  const std::vector<float> x = test::cast_vector<float>(test::random_vector(rows * in, 32));
  float* first = weights.data();
  float* second = weights.data() + n;
  auto product = [&](const float* w) {
    std::vector<float> y(rows * out);
    be.matmul_forward(y.data(), x.data(), w, {rows, in, out}, false);
    return y;
  };
  be.weights_changed();
  const std::vector<float> first_before = product(first), second_before = product(second);
  for (int i = 0; i < 2 * n; i++) weights[i] = -weights[i];  // the backend is told of `first` only
  be.weights_changed(first, n);
  std::vector<float> first_negated = first_before, first_after = product(first);
  for (float& v : first_negated) v = -v;
  EXPECT_EQ(first_after, first_negated);      // a fresh copy of the negated weights
  EXPECT_EQ(product(second), second_before);  // still the copy made before
  be.weights_changed();
  std::vector<float> second_negated = second_before;
  for (float& v : second_negated) v = -v;
  EXPECT_EQ(product(second), second_negated);  // every copy dropped
  be.weights_changed();  // whatever comes later at these addresses gets copies of its own
}
// A CPU without the instructions is told apart: oneDNN is held to AVX2, as on a CPU that has
// nothing newer. oneDNN reads that limit once per process, so the check runs in a fresh one (a
// threadsafe death test re-executes this binary), whatever ran before it here.
TEST(Bf16, MissingInstructionsAreNamed) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        ::setenv("ONEDNN_MAX_CPU_ISA", "AVX2", 1);
        ::setenv("DNNL_MAX_CPU_ISA", "AVX2", 1);
        std::string why;
        const bool available = ops::bf16_available(&why);
        std::fprintf(stderr, "why: %s\n", why.c_str());
        std::exit(available ? 1 : 0);
      },
      ::testing::ExitedWithCode(0), "why: .*AVX512_BF16");
}

}  // namespace
}  // namespace xsa

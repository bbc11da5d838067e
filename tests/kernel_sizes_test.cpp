// Every kernel at the production head sizes D = 64 and D = 128 and at model widths (ops_test.cpp
// uses head dims 4-16 only), in float32 against the float64 references of src/ops/reference.h:
//  - every entry within the bound its rounding allows (tests/bounds.h), as in ops_test.cpp;
//  - attention over sequence lengths that cut the 64-row tiles unevenly (T = 65, 130), with SA,
//    XSA, gated XSA, sinks and grouped-query attention;
//  - the cached attention (decoding over a key/value cache) against the tiled forward over the
//    whole sequence and against the float64 reference;
//  - cross-entropy over the GPT-2 vocabulary (V = 50257 padded to 50304).
// Exact checks (==) where the kernel must not change a value at all: v under RoPE, padded columns,
// ignored rows, logits without a gradient.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <limits>
#include <vector>

#include "bounds.h"
#include "matmul_check.h"
#include "test_util.h"
#include "xsa/ops/matmul_bf16.h"
#include "xsa/ops/ops.h"
#include "xsa/ops/reference.h"

namespace xsa {
namespace {

using test::cast_vector;
using test::kFloatRoundoff;
using test::random_vector;
using test::within;
using Vec = std::vector<double>;
using FVec = std::vector<float>;

constexpr int kHeadDims[] = {64, 128};

// ---------------------------------------------------------------- matmul
// The products of a block at C = H·D: qkv (C → 3C), MLP (C → 4C, 4C → C), GPT-2 small's qkv
// (768 → 2304), and one row (decoding's matrix-vector path).
TEST(KernelSizes, MatmulMatchesReference) {
  struct Shape {
    int N, in, out;
  };
  for (Shape s : {Shape{65, 128, 384}, Shape{65, 256, 1024}, Shape{65, 1024, 256},
                  Shape{17, 768, 2304}, Shape{1, 768, 2304}}) {
    SCOPED_TRACE(testing::Message() << "N=" << s.N << " in=" << s.in << " out=" << s.out);
    const test::MatmulCase m = test::check_matmul(s.N, s.in, s.out, 0.02, 0.1);

    // Without dinp only the weight gradient accumulates, the same as with it.
    FVec dw_only = cast_vector<float>(m.dw0);
    ops::matmul_backward<float>(nullptr, dw_only.data(), m.doutf.data(), m.xf.data(), m.wf.data(),
                                {s.N, s.in, s.out});
    EXPECT_TRUE(within(dw_only, m.dw_ref, m.dw_bound, "dw alone"));
  }
}

// (LayerNorm at the production widths: ops_test.cpp, LayerNorm.ForwardBackwardMatchReference.)

// ---------------------------------------------------------------- rope
TEST(KernelSizes, RopeMatchesReference) {
  struct Shape {
    int B, T, H, Hkv;
  };
  for (int D : kHeadDims)
    for (Shape s : {Shape{2, 65, 2, 0}, Shape{1, 130, 4, 2}, Shape{1, 130, 2, 1}}) {
      SCOPED_TRACE(testing::Message() << "D=" << D << " B=" << s.B << " T=" << s.T << " H=" << s.H
                                      << " Hkv=" << s.Hkv);
      const int C = s.H * D, Hk = s.Hkv ? s.Hkv : s.H, W = C + 2 * Hk * D, n = s.B * s.T * W;
      Vec qkv = random_vector(n, 1), grad = random_vector(n, 2);
      Vec fwd_ref = qkv, bwd_ref = grad;
      ref::rope_rotate(fwd_ref.data(), s.B, s.T, C, s.H, 10000.0, +1, s.Hkv);
      ref::rope_rotate(bwd_ref.data(), s.B, s.T, C, s.H, 10000.0, -1, s.Hkv);
      FVec cosf(s.T * D / 2), sinf(s.T * D / 2);
      ops::rope_table(cosf.data(), sinf.data(), s.T, D, 10000.0);
      auto fwd = cast_vector<float>(qkv), bwd = cast_vector<float>(grad);
      ops::rope_forward(fwd.data(), {cosf.data(), sinf.data(), s.B, s.T, C, s.H, s.Hkv});
      ops::rope_backward(bwd.data(), {cosf.data(), sinf.data(), s.B, s.T, C, s.H, s.Hkv});
      const double u = kFloatRoundoff;
      EXPECT_TRUE(
          within(fwd, fwd_ref, test::rope_bound(qkv, s.B, s.T, C, s.H, s.Hkv, 10000.0, u), "fwd"));
      EXPECT_TRUE(
          within(bwd, bwd_ref, test::rope_bound(grad, s.B, s.T, C, s.H, s.Hkv, 10000.0, u), "bwd"));
      // v (and its gradient) is never rotated
      for (int r = 0; r < s.B * s.T; r++)
        for (int c = C + Hk * D; c < W; c++) {
          ASSERT_EQ(fwd[r * W + c], (float)qkv[r * W + c]);
          ASSERT_EQ(bwd[r * W + c], (float)grad[r * W + c]);
        }
    }
}

// ---------------------------------------------------------------- attention
struct AttnCase {
  int B, T, H, Hkv;  // Hkv 0: H
  bool exclusive, gated, sink;
};

std::ostream& operator<<(std::ostream& os, const AttnCase& s) {
  return os << "B=" << s.B << " T=" << s.T << " H=" << s.H << " Hkv=" << s.Hkv
            << (s.exclusive ? (s.gated ? " gated XSA" : " XSA") : " SA") << (s.sink ? " sink" : "");
}

const AttnCase kAttnCases[] = {
    {2, 65, 2, 0, false, false, false},  // SA, two query tiles, the last of 1 row
    {1, 130, 2, 0, true, false, false},  // XSA, three tiles, the last of 2 rows
    {2, 65, 2, 0, true, true, false},    // gated XSA
    {1, 130, 2, 0, false, false, true},  // SA with a sink
    {1, 130, 4, 2, true, true, true},    // gated XSA, sink, grouped-query (2 queries per kv head)
    {2, 65, 2, 1, true, false, false},   // XSA, grouped-query with one kv head
    {1, 128, 2, 0, true, false, true},   // XSA with a sink, T exactly two tiles
};

// The tiled forward and backward in float32 against reference attention (and reference XSA) in
// float64: y, lse, z, the accumulated dqkv, ∂L/∂α per token and ∂L/∂b summed over sequences.
void check_attention(const AttnCase& s, int D) {
  const int C = s.H * D, Hk = s.Hkv ? s.Hkv : s.H, W = C + 2 * Hk * D, N = s.B * s.T;
  Vec qkv = random_vector(N * W, 1), dout = random_vector(N * C, 2),
      dqkv0 = random_vector(N * W, 3, 0.1), sink = random_vector(s.H, 4),
      alpha = random_vector(s.H, 5, 0.5);
  const double* sk = s.sink ? sink.data() : nullptr;
  const double* al = s.gated ? alpha.data() : nullptr;
  Vec y_ref(N * C), lse_ref(s.B * s.H * s.T), z_ref(N * C), dy_ref = dout, dqkv_ref = dqkv0,
                                                            dsink_ref(s.H, 0.0), da_ref(N * s.H);
  ref::attention_forward(y_ref.data(), lse_ref.data(), qkv.data(),
                         ref::Heads{s.B, s.T, C, s.H, s.Hkv}, sk);
  if (s.exclusive) {
    ref::xsa_forward(z_ref.data(), y_ref.data(), qkv.data(), ref::Heads{s.B, s.T, C, s.H, s.Hkv},
                     al);
    ref::xsa_backward(dy_ref.data(), dqkv_ref.data(), dout.data(), y_ref.data(), qkv.data(),
                      ref::Heads{s.B, s.T, C, s.H, s.Hkv}, al, s.gated ? da_ref.data() : nullptr);
  }
  ref::attention_backward(dqkv_ref.data(), dy_ref.data(), qkv.data(),
                          ref::Heads{s.B, s.T, C, s.H, s.Hkv}, sk,
                          s.sink ? dsink_ref.data() : nullptr);

  auto qkvf = cast_vector<float>(qkv), doutf = cast_vector<float>(dout),
       dqkvf = cast_vector<float>(dqkv0), sinkf = cast_vector<float>(sink),
       alphaf = cast_vector<float>(alpha);
  FVec yf(N * C), zf(N * C), lsef(s.B * s.H * s.T), daf(N * s.H), dsink_rows(s.B * s.H);
  ops::AttentionArgs<float> args{.B = s.B,
                                 .T = s.T,
                                 .C = C,
                                 .H = s.H,
                                 .Hkv = s.Hkv,
                                 .exclusive = s.exclusive,
                                 .qkv = qkvf.data(),
                                 .y = yf.data(),
                                 .z = s.exclusive ? zf.data() : nullptr,
                                 .lse = lsef.data(),
                                 .alpha = s.gated ? alphaf.data() : nullptr,
                                 .sink = s.sink ? sinkf.data() : nullptr,
                                 .dqkv = dqkvf.data(),
                                 .d_out = doutf.data(),
                                 .dalpha = s.gated ? daf.data() : nullptr,
                                 .dsink = s.sink ? dsink_rows.data() : nullptr};
  const test::AttentionBounds bound = test::attention_bounds({.B = s.B,
                                                              .T = s.T,
                                                              .C = C,
                                                              .H = s.H,
                                                              .Hkv = s.Hkv,
                                                              .exclusive = s.exclusive,
                                                              .qkv = qkv,
                                                              .sink = s.sink ? sink : Vec{},
                                                              .alpha = s.gated ? alpha : Vec{},
                                                              .dout = dout,
                                                              .dqkv0 = dqkv0},
                                                             kFloatRoundoff);
  ops::attention_forward(args);
  EXPECT_TRUE(within(yf, y_ref, bound.y, "y"));
  EXPECT_TRUE(within(lsef, lse_ref, bound.lse, "lse"));
  if (s.exclusive) {
    EXPECT_TRUE(within(zf, z_ref, bound.z, "z"));
  }
  ops::attention_backward(args);
  EXPECT_TRUE(within(dqkvf, dqkv_ref, bound.dqkv, "dqkv"));
  // With XSA, d_out has been turned into ∂L/∂y in place (XSA's backward: test::xsa_bounds).
  if (s.exclusive) {
    const test::XsaBounds xb = test::xsa_bounds(qkv, y_ref, dout, dqkv0, s.B, s.T, C, s.H, s.Hkv,
                                                s.gated ? alpha : Vec{}, kFloatRoundoff);
    // (y here is the forward's, off by bound.y: ∂L/∂y does not depend on y)
    EXPECT_TRUE(within(doutf, dy_ref, xb.dy, "d_out turned into dy"));
  } else {
    EXPECT_EQ(doutf, cast_vector<float>(dout));
  }
  if (s.gated) {
    EXPECT_TRUE(within(daf, da_ref, bound.dalpha, "dalpha"));
  }
  if (s.sink) {
    Vec dsinkf, dsink_bound;  // ∂L/∂b_h summed over the sequences, as the reference sums it
    test::dsink_summed(dsink_rows, bound.dsink, s.B, s.H, dsinkf, dsink_bound);
    EXPECT_TRUE(within(dsinkf, dsink_ref, dsink_bound, "dsink"));
  }
  // write_dqkv (as a training step runs it): dqkv written over what it held (NaN here), bit for bit
  // what accumulating onto zeros gives, in both tile precisions. With XSA the backward also writes
  // z again (over NaN here): the forward's z to the bit.
  for (bool bf16 : {false, true}) {
    if (bf16 && !ops::bf16_available()) continue;
    FVec onto_zeros(N * W, 0.0f), written(N * W, std::numeric_limits<float>::quiet_NaN());
    FVec z_forward(N * C), z_again(N * C, std::numeric_limits<float>::quiet_NaN());
    for (FVec* out : {&onto_zeros, &written}) {
      FVec d_out = cast_vector<float>(dout);
      const ops::Storage tiles = bf16 ? ops::Storage::bf16 : ops::Storage::fp32;
      args.dqkv = out->data(), args.d_out = d_out.data();
      args.write_dqkv = out == &written;
      args.z = s.exclusive ? z_forward.data() : nullptr;
      ops::attention_forward(args, tiles);
      if (s.exclusive && out == &written) args.z = z_again.data();
      ops::attention_backward(args, tiles);
    }
    for (int i = 0; i < N * W; i++)
      ASSERT_EQ(std::bit_cast<uint32_t>(written[i]), std::bit_cast<uint32_t>(onto_zeros[i]))
          << "bf16 tiles " << bf16 << ", dqkv entry " << i;
    if (s.exclusive) {
      for (int i = 0; i < N * C; i++)
        ASSERT_EQ(std::bit_cast<uint32_t>(z_again[i]), std::bit_cast<uint32_t>(z_forward[i]))
            << "bf16 tiles " << bf16 << ", z entry " << i;
    }
  }
}

TEST(KernelSizes, AttentionMatchesReference) {
  for (int D : kHeadDims)
    for (const AttnCase& s : kAttnCases) {
      SCOPED_TRACE(testing::Message() << "D=" << D << " " << s);
      check_attention(s, D);
    }
}

// ---------------------------------------------------------------- xsa
// The batch XSA kernels, plain and gated, with and without grouped-query attention. y leans on the
// own value (as trained models' outputs do), so the projection removed is large; token 0's value
// vector (its kv head 0) is zero, the floored case.
TEST(KernelSizes, XsaMatchesReference) {
  struct Shape {
    int B, T, H, Hkv;
  };
  for (int D : kHeadDims)
    for (Shape s : {Shape{2, 65, 2, 0}, Shape{1, 130, 4, 2}})
      for (bool gated : {false, true}) {
        SCOPED_TRACE(testing::Message() << "D=" << D << " B=" << s.B << " T=" << s.T << " H=" << s.H
                                        << " Hkv=" << s.Hkv << (gated ? " gated" : ""));
        const int C = s.H * D, N = s.B * s.T, W = C + 2 * (s.Hkv ? s.Hkv : s.H) * D;
        Vec qkv = random_vector(N * W, 1), y = random_vector(N * C, 2),
            dz = random_vector(N * C, 3), dqkv0 = random_vector(N * W, 4, 0.1),
            alpha = random_vector(s.H, 5, 0.5);
        for (int d = 0; d < D; d++) qkv[ref::qkv_offset(0, 2, 0, C, s.H, s.Hkv) + d] = 0;
        for (int n = 0; n < N; n++)
          for (int h = 0; h < s.H; h++)
            for (int d = 0; d < D; d++)  // (rounded: y stays a float)
              y[n * C + h * D + d] =
                  (float)(y[n * C + h * D + d] + qkv[ref::qkv_offset(n, 2, h, C, s.H, s.Hkv) + d]);
        const double* al = gated ? alpha.data() : nullptr;
        Vec z_ref(N * C), dy_ref(N * C), dqkv_ref = dqkv0, da_ref(N * s.H);
        ref::xsa_forward(z_ref.data(), y.data(), qkv.data(), ref::Heads{s.B, s.T, C, s.H, s.Hkv},
                         al);
        ref::xsa_backward(dy_ref.data(), dqkv_ref.data(), dz.data(), y.data(), qkv.data(),
                          ref::Heads{s.B, s.T, C, s.H, s.Hkv}, al, gated ? da_ref.data() : nullptr);

        auto qf = cast_vector<float>(qkv), yf = cast_vector<float>(y), gf = cast_vector<float>(dz),
             af = cast_vector<float>(alpha), dqkvf = cast_vector<float>(dqkv0);
        FVec zf(N * C), dyf(N * C), daf(N * s.H);
        const float* alf = gated ? af.data() : nullptr;
        const test::XsaCall<float> xsa{s.B, s.T, C, s.H, s.Hkv, alf};
        xsa.forward(zf.data(), yf.data(), qf.data());
        xsa.backward(dyf.data(), dqkvf.data(), gf.data(), yf.data(), qf.data(),
                     gated ? daf.data() : nullptr);
        const test::XsaBounds bound = test::xsa_bounds(qkv, y, dz, dqkv0, s.B, s.T, C, s.H, s.Hkv,
                                                       gated ? alpha : Vec{}, kFloatRoundoff);
        EXPECT_TRUE(within(zf, z_ref, bound.z, "z"));
        EXPECT_TRUE(within(dyf, dy_ref, bound.dy, "dy"));
        EXPECT_TRUE(within(dqkvf, dqkv_ref, bound.dqkv, "dqkv"));
        if (gated) {
          EXPECT_TRUE(within(daf, da_ref, bound.dalpha, "dalpha"));
        }
      }
}

// ---------------------------------------------------------------- cached attention
// One sequence of S tokens: qkv [S, W] with W = C + 2·Hkv·D. The key/value cache [slots, Hkv·D]
// holds every row's k and v (the rows of a pass write theirs at slot0 + r before the call, as
// block_forward does). The references are the tiled forward over the whole sequence (float32) and
// reference attention (float64).
struct Sequence {
  int S, C, H, Hkv, D, W, Ck;
  Vec qkv, sink, alpha;
  FVec qkvf, sinkf, alphaf, k_cache, v_cache;
  Sequence(int S_, int H_, int Hkv_, int D_, uint64_t seed)
      : S(S_), C(H_ * D_), H(H_), Hkv(Hkv_), D(D_) {
    Ck = (Hkv ? Hkv : H) * D, W = C + 2 * Ck;
    qkv = random_vector((size_t)S * W, seed), sink = random_vector(H, seed + 1);
    alpha = random_vector(H, seed + 2, 0.5);
    qkvf = cast_vector<float>(qkv), sinkf = cast_vector<float>(sink);
    alphaf = cast_vector<float>(alpha);
    k_cache.resize((size_t)S * Ck), v_cache.resize((size_t)S * Ck);
    for (int r = 0; r < S; r++) {
      std::memcpy(&k_cache[(size_t)r * Ck], &qkvf[(size_t)r * W + C], sizeof(float) * Ck);
      std::memcpy(&v_cache[(size_t)r * Ck], &qkvf[(size_t)r * W + C + Ck], sizeof(float) * Ck);
    }
  }
  // The rows `rows` of this sequence, in order, as a sequence of their own.
  Sequence pick(const std::vector<int>& rows) const {
    Sequence out = *this;
    out.S = (int)rows.size();
    out.qkv.resize((size_t)out.S * W);
    for (int i = 0; i < out.S; i++)
      std::copy(qkv.begin() + (size_t)rows[i] * W, qkv.begin() + (size_t)(rows[i] + 1) * W,
                out.qkv.begin() + (size_t)i * W);
    out.qkvf = cast_vector<float>(out.qkv);
    return out;  // (its cache is not used)
  }
};

struct Outputs {
  FVec y, z;  // float32 tiled forward
  Vec y_ref, z_ref;
  // Bounds of the tiled forward (key tiles of 64) and of the cached one (every key in one pass)
  // against the reference, per entry.
  Vec y_tiled, z_tiled, y_cached, z_cached;
};

// The whole sequence through the tiled forward and through the reference.
Outputs whole_sequence(const Sequence& q, bool exclusive, bool gated, bool sink) {
  Outputs o;
  const int S = q.S, C = q.C;
  o.y.resize((size_t)S * C), o.z.resize((size_t)S * C);
  FVec lse((size_t)q.H * S);
  ops::attention_forward<float>({.B = 1,
                                 .T = S,
                                 .C = C,
                                 .H = q.H,
                                 .Hkv = q.Hkv,
                                 .exclusive = exclusive,
                                 .qkv = q.qkvf.data(),
                                 .y = o.y.data(),
                                 .z = o.z.data(),
                                 .lse = lse.data(),
                                 .alpha = gated ? q.alphaf.data() : nullptr,
                                 .sink = sink ? q.sinkf.data() : nullptr});
  o.y_ref.resize((size_t)S * C), o.z_ref.resize((size_t)S * C);
  Vec lse_ref((size_t)q.H * S);
  ref::attention_forward(o.y_ref.data(), lse_ref.data(), q.qkv.data(),
                         ref::Heads{1, S, C, q.H, q.Hkv}, sink ? q.sink.data() : nullptr);
  if (exclusive)
    ref::xsa_forward(o.z_ref.data(), o.y_ref.data(), q.qkv.data(), ref::Heads{1, S, C, q.H, q.Hkv},
                     gated ? q.alpha.data() : nullptr);
  test::AttentionProblem problem{.B = 1,
                                 .T = S,
                                 .C = C,
                                 .H = q.H,
                                 .Hkv = q.Hkv,
                                 .exclusive = exclusive,
                                 .qkv = q.qkv,
                                 .sink = sink ? q.sink : Vec{},
                                 .alpha = gated ? q.alpha : Vec{},
                                 .dout = Vec((size_t)S * C, 0.0),
                                 .dqkv0 = Vec(q.qkv.size(), 0.0)};
  test::AttentionBounds tiled = test::attention_bounds(problem, kFloatRoundoff);
  problem.key_tile = S;
  test::AttentionBounds cached = test::attention_bounds(problem, kFloatRoundoff);
  o.y_tiled = tiled.y, o.z_tiled = tiled.z, o.y_cached = cached.y, o.z_cached = cached.z;
  return o;
}

// Entries [at, at + count) of a, as doubles.
template <typename T>
Vec part(const std::vector<T>& a, size_t at, size_t count) {
  return Vec(a.begin() + at, a.begin() + at + count);
}
// Two float computations of one exact value: apart by at most the sum of their bounds.
Vec sum_of(const Vec& a, const Vec& b) {
  Vec s(a.size());
  for (size_t i = 0; i < a.size(); i++) s[i] = a[i] + b[i];
  return s;
}

// The cached pass's rows [got_at, got_at + count) of y and z against the whole sequence's rows
// [want_at, ...): within the sum of the cached and tiled bounds of the tiled forward (both float),
// and within the cached bound of the reference.
void expect_cached_rows(const FVec& y, const FVec& z, size_t got_at, const Outputs& want,
                        size_t want_at, size_t count, bool exclusive) {
  const Vec y_cached = part(want.y_cached, want_at, count);
  EXPECT_TRUE(within(part(y, got_at, count), part(want.y, want_at, count),
                     sum_of(y_cached, part(want.y_tiled, want_at, count)), "y vs tiled"));
  EXPECT_TRUE(
      within(part(y, got_at, count), part(want.y_ref, want_at, count), y_cached, "y vs reference"));
  if (!exclusive) return;
  const Vec z_cached = part(want.z_cached, want_at, count);
  EXPECT_TRUE(within(part(z, got_at, count), part(want.z, want_at, count),
                     sum_of(z_cached, part(want.z_tiled, want_at, count)), "z vs tiled"));
  EXPECT_TRUE(
      within(part(z, got_at, count), part(want.z_ref, want_at, count), z_cached, "z vs reference"));
}

// n rows from row `first` of q through the cached forward; out [n, C] each.
void cached_pass(const Sequence& q, int first, int n, int prefix, const ops::SlotSpan* spans,
                 bool exclusive, bool gated, bool sink, float* y, float* z) {
  ops::AttentionArgs<float> args{.B = 1,
                                 .T = n,
                                 .C = q.C,
                                 .H = q.H,
                                 .Hkv = q.Hkv,
                                 .exclusive = exclusive,
                                 .qkv = q.qkvf.data() + (size_t)first * q.W,
                                 .y = y,
                                 .z = exclusive ? z : nullptr,
                                 .alpha = gated ? q.alphaf.data() : nullptr,
                                 .sink = sink ? q.sinkf.data() : nullptr};
  ops::attention_forward_cached(args, ops::KvCache<float>{.k = q.k_cache.data(),
                                                          .v = q.v_cache.data(),
                                                          .prefix = prefix,
                                                          .slot0 = first,
                                                          .spans = spans});
}

const AttnCase kCachedCases[] = {
    // B, T (the whole sequence), H, Hkv, exclusive, gated, sink
    {1, 130, 2, 0, false, false, false}, {1, 130, 2, 0, true, false, false},
    {1, 130, 4, 2, true, true, true},    {1, 130, 2, 1, false, false, true},
    {1, 130, 2, 0, true, true, false},
};

// Decoding continues a cache: a prompt of 64 rows through the tiled forward (as the decoder does
// when the cache is empty), then passes of 1, 17, 47 and 1 rows each seeing the cache before them
// (prefix = slot0 = the length so far). Every row's y (and z) equals the tiled forward over the
// whole sequence.
TEST(KernelSizes, CachedAttentionContinuesTheSequence) {
  for (int D : kHeadDims)
    for (const AttnCase& s : kCachedCases) {
      SCOPED_TRACE(testing::Message() << "D=" << D << " " << s);
      Sequence q(s.T, s.H, s.Hkv, D, 11);
      Outputs whole = whole_sequence(q, s.exclusive, s.gated, s.sink);
      const int C = q.C, first = 64;
      FVec y((size_t)s.T * C, 0.f), z((size_t)s.T * C, 0.f);
      int length = first;
      for (int n : {1, 17, 47, 1}) {
        cached_pass(q, length, n, length, nullptr, s.exclusive, s.gated, s.sink,
                    y.data() + (size_t)length * C, z.data() + (size_t)length * C);
        length += n;
      }
      ASSERT_EQ(length, s.T);
      const size_t at = (size_t)first * C, count = (size_t)(s.T - first) * C;
      expect_cached_rows(y, z, at, whole, at, count, s.exclusive);
    }
}

// Side by side after a shared prefix (the choices of a multiple-choice question): slots [0, 40)
// the prefix, then segment A (rows 40..69, no parent), segment B (rows 70..94, no parent: it must
// not see A) and segment C (rows 95..129, parent A: it sees A but not B), all in one cached pass.
// Each segment's rows equal the whole-sequence forward of the rows it sees, in order.
TEST(KernelSizes, CachedAttentionWithSegmentsMatchesTheirSequences) {
  const int P = 40, a0 = 40, a1 = 70, b1 = 95, c1 = 130;
  auto range = [](int begin, int end) {
    std::vector<int> r;
    for (int i = begin; i < end; i++) r.push_back(i);
    return r;
  };
  auto concat = [](std::vector<int> a, const std::vector<int>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  std::vector<ops::SlotSpan> spans;
  for (int i = a0; i < a1; i++) spans.push_back({0, 0, a0});
  for (int i = a1; i < b1; i++) spans.push_back({0, 0, a1});
  for (int i = b1; i < c1; i++) spans.push_back({a0, a1, b1});
  struct Segment {
    const char* name;
    int begin, end;
    std::vector<int> sees;  // the rows of its sequence: what it sees, itself last
  };
  const Segment segments[] = {
      {"A", a0, a1, range(0, a1)},
      {"B", a1, b1, concat(range(0, P), range(a1, b1))},
      {"C", b1, c1, concat(range(0, a1), range(b1, c1))},
  };
  for (int D : kHeadDims)
    for (const AttnCase& s : kCachedCases) {
      SCOPED_TRACE(testing::Message() << "D=" << D << " " << s);
      Sequence q(c1, s.H, s.Hkv, D, 12);
      const int C = q.C, n = c1 - P;
      FVec y((size_t)n * C), z((size_t)n * C);
      cached_pass(q, P, n, P, spans.data(), s.exclusive, s.gated, s.sink, y.data(), z.data());
      for (const Segment& seg : segments) {
        SCOPED_TRACE(seg.name);
        Outputs want = whole_sequence(q.pick(seg.sees), s.exclusive, s.gated, s.sink);
        const int rows = seg.end - seg.begin, last = (int)seg.sees.size() - rows;
        const size_t got_at = (size_t)(seg.begin - P) * C, want_at = (size_t)last * C,
                     count = (size_t)rows * C;
        expect_cached_rows(y, z, got_at, want, want_at, count, s.exclusive);
      }
    }
}

// ---------------------------------------------------------------- gelu
// The MLP's hidden activations of 65 rows at C = 768 (4C = 3072 per row).
TEST(KernelSizes, GeluMatchesReference) {
  const size_t n = 65 * 4 * 768;
  Vec x = random_vector(n, 1, 3.0), dout = random_vector(n, 2);
  Vec y_ref(n), dx_ref(n);
  ref::gelu_forward(y_ref.data(), x.data(), n);
  ref::gelu_backward(dx_ref.data(), x.data(), dout.data(), n);
  auto xf = cast_vector<float>(x), doutf = cast_vector<float>(dout);
  FVec yf(n), dxf(n);
  ops::gelu_forward(yf.data(), xf.data(), n);
  ops::gelu_backward(dxf.data(), xf.data(), doutf.data(), n);
  Vec y_bound, dx_bound;
  test::gelu_bounds(y_bound, dx_bound, x, dout, kFloatRoundoff);
  EXPECT_TRUE(within(yf, y_ref, y_bound, "y"));
  EXPECT_TRUE(within(dxf, dx_ref, dx_bound, "dx"));
}

// ---------------------------------------------------------------- cross-entropy
// GPT-2's vocabulary: V = 50257 real columns padded to 50304. The padded columns hold logits larger
// than every real one: they must neither win the max nor enter the sum. Targets include the first
// and the last real token and an ignored row.
TEST(KernelSizes, CrossEntropyOverGpt2VocabularyMatchesReference) {
  const int V = 50257, Vp = 50304, N = 5;
  Vec logits = random_vector((size_t)N * Vp, 1, 2.0);
  for (int n = 0; n < N; n++)
    for (int j = V; j < Vp; j++) logits[(size_t)n * Vp + j] = 50.0;
  const std::vector<int32_t> targets = {0, V - 1, -1, 12345, 50000};
  const double dloss = 1.0 / 4;  // the mean over the 4 counted rows
  Vec g_ref = logits, loss_ref(N);
  ref::crossentropy_forward_backward(g_ref.data(), loss_ref.data(), targets.data(), N, V, Vp,
                                     dloss);
  auto gf = cast_vector<float>(logits);
  FVec lossf(N);
  ops::crossentropy_forward_backward(gf.data(), lossf.data(), targets.data(), N, V, Vp,
                                     (float)dloss);
  Vec loss_bound, grad_bound;
  test::crossentropy_bounds(loss_bound, grad_bound, logits, targets, N, V, Vp, dloss,
                            kFloatRoundoff);
  EXPECT_TRUE(within(lossf, loss_ref, loss_bound, "losses"));
  EXPECT_TRUE(within(gf, g_ref, grad_bound, "gradient"));
  for (int n = 0; n < N; n++) {
    for (int j = V; j < Vp; j++)
      ASSERT_EQ(gf[(size_t)n * Vp + j], 0.f) << "padded column " << j << " of row " << n;
    if (targets[n] < 0) {
      EXPECT_EQ(lossf[n], 0.f);
      for (int j = 0; j < Vp; j++) ASSERT_EQ(gf[(size_t)n * Vp + j], 0.f) << "ignored row " << n;
    }
  }
  // Without a gradient: the same losses, and the logits stay exactly as they were.
  auto kept = cast_vector<float>(logits);
  FVec loss_only(N);
  ops::crossentropy_forward_backward(kept.data(), loss_only.data(), targets.data(), N, V, Vp, 0.f);
  EXPECT_TRUE(within(loss_only, loss_ref, loss_bound, "losses without gradient"));
  EXPECT_EQ(kept, cast_vector<float>(logits));
}

}  // namespace
}  // namespace xsa

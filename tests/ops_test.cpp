// Every kernel, forward and backward, against its float64 reference (src/ops/reference.h):
//  - the fast kernel in float32, every entry within the bound its rounding allows (tests/bounds.h:
//    derived from float32's unit roundoff, the lengths of the kernel's sums and the inputs'
//    magnitudes, for any summation order a BLAS or a vector width may use);
//  - the fast kernel in float64 within the same bounds at float64's roundoff;
//  - the reference backward itself against central finite differences of the reference forward
//    (step 1e-6, within 1e-6), so the oracle is checked independently of the code it judges.
// Shapes include T = 1, odd sizes and sizes that are no multiple of any SIMD width or tile.
#include "xsa/ops/ops.h"

#include <gtest/gtest.h>

#include <functional>

#include "bounds.h"
#include "matmul_check.h"
#include "test_util.h"
#include "xsa/ops/reference.h"
#include "xsa/ops/vmath.h"

namespace xsa {
namespace {

using test::cast_vector;
using test::kDoubleRoundoff;
using test::kFloatRoundoff;
using test::max_rel_error;
using test::random_vector;
using test::within;
using Vec = std::vector<double>;

// Central differences with step h = 1e-6 in float64 are off by h²/6·|f‴| (truncation) plus about
// 2^-52·|f|/h (rounding): with |f| and |f‴| below 10² on these small inputs, below 2e-8 of the
// gradients' scale (0.1 or more here); the references are held to 1e-6 of it.
constexpr double kTolFiniteDiff = 1e-6;

// ∂/∂x_i of f by central differences, at every coordinate.
Vec numeric_grad(const std::function<double(const Vec&)>& f, Vec x, double h = 1e-6) {
  Vec g(x.size());
  for (size_t i = 0; i < x.size(); i++) {
    double keep = x[i];
    x[i] = keep + h;
    double up = f(x);
    x[i] = keep - h;
    double down = f(x);
    x[i] = keep;
    g[i] = (up - down) / (2 * h);
  }
  return g;
}

double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); i++) s += a[i] * b[i];
  return s;
}

struct AttnShape {
  int B, T, C, H;
};
const AttnShape kAttnShapes[] = {
    {1, 1, 8, 2}, {2, 7, 12, 3}, {1, 33, 16, 2}, {3, 17, 20, 5}, {2, 64, 32, 4}};

// ---------------------------------------------------------------- matmul
TEST(Matmul, ForwardBackwardMatchReference) {
  struct Shape {
    int N, in, out;
  };
  for (Shape s : {Shape{1, 1, 1}, Shape{1, 5, 3}, Shape{1, 384, 401}, Shape{5, 7, 3},
                  Shape{33, 17, 65}, Shape{64, 48, 144}}) {
    SCOPED_TRACE(testing::Message() << "N=" << s.N << " in=" << s.in << " out=" << s.out);
    const test::MatmulCase m = test::check_matmul(s.N, s.in, s.out);

    // accumulate = false overwrites the weight gradient (what was there, NaN here, is not read):
    // the product alone, to the bit what accumulating onto zeros gives
    std::vector<float> dw_new(m.dw0.size(), std::numeric_limits<float>::quiet_NaN()),
        dw_onto_zero(m.dw0.size(), 0.0f);
    ops::matmul_backward<float>(nullptr, dw_new.data(), m.doutf.data(), m.xf.data(), m.wf.data(),
                                {s.N, s.in, s.out}, false);
    ops::matmul_backward<float>(nullptr, dw_onto_zero.data(), m.doutf.data(), m.xf.data(),
                                m.wf.data(), {s.N, s.in, s.out}, true);
    EXPECT_EQ(dw_new, dw_onto_zero);

    Vec y64(s.N * s.out);
    ops::matmul_forward(y64.data(), m.x.data(), m.w.data(), s.N, s.in, s.out);
    EXPECT_TRUE(
        within(y64, m.y_ref,
               test::matmul_forward_bound(m.x, m.w, s.N, s.in, s.out, nullptr, kDoubleRoundoff),
               "y in float64"));
  }
}

TEST(Matmul, ReferenceBackwardMatchesFiniteDifferences) {
  const int N = 3, in = 4, out = 5;
  Vec x = random_vector(N * in, 1), w = random_vector(out * in, 2),
      probe = random_vector(N * out, 3);
  auto loss = [&](const Vec& xx, const Vec& ww) {
    Vec y(N * out);
    ref::matmul_forward(y.data(), xx.data(), ww.data(), N, in, out);
    return dot(y, probe);
  };
  Vec dx(N * in), dw(out * in, 0.0);
  ref::matmul_backward(dx.data(), dw.data(), probe.data(), x.data(), w.data(), N, in, out);
  EXPECT_LE(max_rel_error(dx, numeric_grad([&](const Vec& v) { return loss(v, w); }, x)),
            kTolFiniteDiff);
  EXPECT_LE(max_rel_error(dw, numeric_grad([&](const Vec& v) { return loss(x, v); }, w)),
            kTolFiniteDiff);
}

// ---------------------------------------------------------------- encoder
TEST(Encoder, ForwardBackwardMatchReference) {
  const int V = 11, C = 19, N = 37;
  std::vector<int32_t> tokens(N);
  for (int n = 0; n < N; n++) tokens[n] = (n * 7 + n / 3) % V;  // repeats, to test accumulation
  Vec wte = random_vector(V * C, 1), dout = random_vector(N * C, 2),
      dwte0 = random_vector(V * C, 3);
  Vec out_ref(N * C), dwte_ref = dwte0;
  ref::encoder_forward(out_ref.data(), tokens.data(), wte.data(), N, C);
  ref::encoder_backward(dwte_ref.data(), dout.data(), tokens.data(), N, C);
  auto wtef = cast_vector<float>(wte), doutf = cast_vector<float>(dout);
  std::vector<float> outf(N * C), dwtef = cast_vector<float>(dwte0);
  ops::encoder_forward(outf.data(), tokens.data(), wtef.data(), N, C);
  ops::encoder_backward(dwtef.data(), doutf.data(), tokens.data(), N, C);
  // The forward copies rows: exact. The backward sums each token's rows onto its gradient row:
  // a sum of (occurrences + 1) terms per entry.
  EXPECT_EQ(cast_vector<double>(outf), cast_vector<double>(cast_vector<float>(out_ref)));
  Vec bound(V * C, 0.0), count(V, 1.0);
  for (int n = 0; n < N; n++) count[tokens[n]]++;
  for (int t = 0; t < V; t++)
    for (int c = 0; c < C; c++) bound[t * C + c] = std::fabs(dwte0[t * C + c]);
  for (int n = 0; n < N; n++)
    for (int c = 0; c < C; c++) bound[tokens[n] * C + c] += std::fabs(dout[n * C + c]);
  for (int t = 0; t < V; t++)
    for (int c = 0; c < C; c++) bound[t * C + c] *= test::sum_error(count[t], kFloatRoundoff);
  EXPECT_TRUE(within(dwtef, dwte_ref, bound, "dwte"));
}

// ---------------------------------------------------------------- layernorm
TEST(LayerNorm, ForwardBackwardMatchReference) {
  struct Shape {
    int N, C;
  };
  // Small and odd widths, and the production widths (128, 256, 768).
  for (Shape s : {Shape{1, 2}, Shape{3, 7}, Shape{17, 64}, Shape{5, 129}, Shape{65, 128},
                  Shape{65, 256}, Shape{33, 768}}) {
    SCOPED_TRACE(testing::Message() << "N=" << s.N << " C=" << s.C);
    Vec x = random_vector(s.N * s.C, 1, 2.0), w = random_vector(s.C, 2), b = random_vector(s.C, 3);
    for (double& v : x) v = (float)(v + 0.5);  // a mean away from zero (still a float)
    Vec dout = random_vector(s.N * s.C, 4), dx0 = random_vector(s.N * s.C, 5);
    Vec dw0 = random_vector(s.C, 6), db0 = random_vector(s.C, 7);
    Vec y_ref(s.N * s.C), mean_ref(s.N), rstd_ref(s.N), dx_ref = dx0, dw_ref = dw0, db_ref = db0;
    ref::layernorm_forward(y_ref.data(), mean_ref.data(), rstd_ref.data(), x.data(), w.data(),
                           b.data(), s.N, s.C);
    ref::layernorm_backward(
        dx_ref.data(), dw_ref.data(), db_ref.data(), dout.data(),
        {x.data(), w.data(), nullptr, mean_ref.data(), rstd_ref.data(), s.N, s.C});

    auto xf = cast_vector<float>(x), wf = cast_vector<float>(w), bf = cast_vector<float>(b),
         doutf = cast_vector<float>(dout);
    std::vector<float> yf(s.N * s.C), mf(s.N), rf(s.N);
    auto dxf = cast_vector<float>(dx0), dwf = cast_vector<float>(dw0),
         dbf = cast_vector<float>(db0);
    ops::layernorm_forward(yf.data(), mf.data(), rf.data(), xf.data(), wf.data(), bf.data(), s.N,
                           s.C);
    ops::layernorm_backward(dxf.data(), dwf.data(), dbf.data(), doutf.data(),
                            {xf.data(), wf.data(), nullptr, mf.data(), rf.data(), s.N, s.C});
    const test::LayerNormBounds bound =
        test::layernorm_bounds(x, w, b, dout, dx0, dw0, db0, s.N, s.C, kFloatRoundoff);
    EXPECT_TRUE(within(yf, y_ref, bound.y, "y"));
    EXPECT_TRUE(within(mf, mean_ref, bound.mean, "mean"));
    EXPECT_TRUE(within(rf, rstd_ref, bound.rstd, "rstd"));
    EXPECT_TRUE(within(dxf, dx_ref, bound.dx, "dx"));
    EXPECT_TRUE(within(dwf, dw_ref, bound.dw, "dw"));
    EXPECT_TRUE(within(dbf, db_ref, bound.db, "db"));
  }
}

TEST(LayerNorm, ReferenceBackwardMatchesFiniteDifferences) {
  const int N = 3, C = 6;
  Vec x = random_vector(N * C, 1), w = random_vector(C, 2), b = random_vector(C, 3),
      probe = random_vector(N * C, 4);
  auto loss = [&](const Vec& xx, const Vec& ww, const Vec& bb) {
    Vec y(N * C), m(N), r(N);
    ref::layernorm_forward(y.data(), m.data(), r.data(), xx.data(), ww.data(), bb.data(), N, C);
    return dot(y, probe);
  };
  Vec y(N * C), m(N), r(N), dx(N * C, 0.0), dw(C, 0.0), db(C, 0.0);
  ref::layernorm_forward(y.data(), m.data(), r.data(), x.data(), w.data(), b.data(), N, C);
  ref::layernorm_backward(dx.data(), dw.data(), db.data(), probe.data(),
                          {x.data(), w.data(), nullptr, m.data(), r.data(), N, C});
  EXPECT_LE(max_rel_error(dx, numeric_grad([&](const Vec& v) { return loss(v, w, b); }, x)),
            kTolFiniteDiff);
  EXPECT_LE(max_rel_error(dw, numeric_grad([&](const Vec& v) { return loss(x, v, b); }, w)),
            kTolFiniteDiff);
  EXPECT_LE(max_rel_error(db, numeric_grad([&](const Vec& v) { return loss(x, w, v); }, b)),
            kTolFiniteDiff);
}

// ---------------------------------------------------------------- rope
TEST(Rope, ForwardBackwardMatchReference) {
  for (AttnShape s : kAttnShapes) {
    SCOPED_TRACE(testing::Message() << "B=" << s.B << " T=" << s.T << " C=" << s.C << " H=" << s.H);
    const int D = s.C / s.H, n = s.B * s.T * 3 * s.C;
    Vec qkv = random_vector(n, 1), grad = random_vector(n, 2);
    Vec fwd_ref = qkv, bwd_ref = grad;
    ref::rope_rotate(fwd_ref.data(), s.B, s.T, s.C, s.H, 10000.0, +1);
    ref::rope_rotate(bwd_ref.data(), s.B, s.T, s.C, s.H, 10000.0, -1);
    std::vector<float> cosf(s.T * D / 2), sinf(s.T * D / 2);
    ops::rope_table(cosf.data(), sinf.data(), s.T, D, 10000.0);
    auto fwd = cast_vector<float>(qkv), bwd = cast_vector<float>(grad);
    ops::rope_forward(fwd.data(), {cosf.data(), sinf.data(), s.B, s.T, s.C, s.H, 0});
    ops::rope_backward(bwd.data(), {cosf.data(), sinf.data(), s.B, s.T, s.C, s.H, 0});
    const double u = kFloatRoundoff;
    EXPECT_TRUE(
        within(fwd, fwd_ref, test::rope_bound(qkv, s.B, s.T, s.C, s.H, 0, 10000.0, u), "fwd"));
    EXPECT_TRUE(
        within(bwd, bwd_ref, test::rope_bound(grad, s.B, s.T, s.C, s.H, 0, 10000.0, u), "bwd"));
    // v is never rotated
    for (int r = 0; r < s.B * s.T; r++)
      for (int c = 2 * s.C; c < 3 * s.C; c++)
        ASSERT_EQ(fwd[r * 3 * s.C + c], (float)qkv[r * 3 * s.C + c]);
  }
}

TEST(Rope, ReferenceBackwardMatchesFiniteDifferences) {
  const int B = 1, T = 5, C = 8, H = 2, n = B * T * 3 * C;
  Vec qkv = random_vector(n, 1), probe = random_vector(n, 2);
  auto loss = [&](const Vec& x) {
    Vec y = x;
    ref::rope_rotate(y.data(), B, T, C, H, 10000.0, +1);
    return dot(y, probe);
  };
  Vec grad = probe;
  ref::rope_rotate(grad.data(), B, T, C, H, 10000.0, -1);
  EXPECT_LE(max_rel_error(grad, numeric_grad(loss, qkv)), kTolFiniteDiff);
}

// ---------------------------------------------------------------- attention
// The tiled kernel's outputs, computed in Real on a float64 problem, as float64.
struct AttentionOutputs {
  Vec y, z, lse, dqkv;
};
template <typename Real>
AttentionOutputs run_tiled_attention(const AttnShape& s, bool exclusive, const Vec& qkv,
                                     const Vec& dout, const Vec& dqkv0) {
  const int N = s.B * s.T;
  auto q = cast_vector<Real>(qkv), d = cast_vector<Real>(dout), dq = cast_vector<Real>(dqkv0);
  std::vector<Real> y(N * s.C), z(N * s.C), lse(s.B * s.H * s.T);
  ops::AttentionArgs<Real> args{.B = s.B,
                                .T = s.T,
                                .C = s.C,
                                .H = s.H,
                                .exclusive = exclusive,
                                .qkv = q.data(),
                                .y = y.data(),
                                .z = z.data(),
                                .lse = lse.data(),
                                .dqkv = dq.data(),
                                .d_out = d.data()};
  ops::attention_forward(args);
  ops::attention_backward(args);
  return {cast_vector<double>(y), cast_vector<double>(z), cast_vector<double>(lse),
          cast_vector<double>(dq)};
}

// The tiled kernel against the full-matrix reference, SA and with XSA (against reference
// attention followed by the reference exclusive step), over shapes that cut tiles unevenly.
TEST(Attention, ForwardBackwardMatchReference) {
  std::vector<AttnShape> shapes(std::begin(kAttnShapes), std::end(kAttnShapes));
  shapes.push_back({1, 130, 16, 2});  // three query tiles, the last of 2 rows
  shapes.push_back({2, 200, 24, 3});  // head dim 8, T no multiple of 64
  for (AttnShape s : shapes) {
    for (bool exclusive : {false, true}) {
      SCOPED_TRACE(testing::Message() << "B=" << s.B << " T=" << s.T << " C=" << s.C << " H=" << s.H
                                      << (exclusive ? " XSA" : " SA"));
      const int N = s.B * s.T;
      Vec qkv = random_vector(N * 3 * s.C, 1), dout = random_vector(N * s.C, 2),
          dqkv0 = random_vector(N * 3 * s.C, 3);
      // Reference: y = attention(qkv), z = xsa(y); backward: dy = xsa_backward(dz), then attention.
      Vec y_ref(N * s.C), lse_ref(s.B * s.H * s.T), z_ref(N * s.C), dy_ref = dout, dqkv_ref = dqkv0;
      ref::attention_forward(y_ref.data(), lse_ref.data(), qkv.data(),
                             ref::Heads{s.B, s.T, s.C, s.H});
      if (exclusive) {
        ref::xsa_forward(z_ref.data(), y_ref.data(), qkv.data(), ref::Heads{s.B, s.T, s.C, s.H});
        ref::xsa_backward(dy_ref.data(), dqkv_ref.data(), dout.data(), y_ref.data(), qkv.data(),
                          ref::Heads{s.B, s.T, s.C, s.H});
      }
      ref::attention_backward(dqkv_ref.data(), dy_ref.data(), qkv.data(),
                              ref::Heads{s.B, s.T, s.C, s.H});

      // The kernel in float32 and in float64, against the reference.
      const test::AttentionProblem problem{.B = s.B,
                                           .T = s.T,
                                           .C = s.C,
                                           .H = s.H,
                                           .exclusive = exclusive,
                                           .qkv = qkv,
                                           .dout = dout,
                                           .dqkv0 = dqkv0};
      for (auto [out, bound] :
           {std::pair{run_tiled_attention<float>(s, exclusive, qkv, dout, dqkv0),
                      test::attention_bounds(problem, kFloatRoundoff)},
            std::pair{run_tiled_attention<double>(s, exclusive, qkv, dout, dqkv0),
                      test::attention_bounds(problem, kDoubleRoundoff)}}) {
        EXPECT_TRUE(within(out.y, y_ref, bound.y, "y"));
        EXPECT_TRUE(within(out.lse, lse_ref, bound.lse, "lse"));
        if (exclusive) {
          EXPECT_TRUE(within(out.z, z_ref, bound.z, "z"));
        }
        EXPECT_TRUE(within(out.dqkv, dqkv_ref, bound.dqkv, "dqkv"));
      }
    }
  }
}

// Grouped-query attention: fewer key/value heads, shared by groups of query heads; XSA removes
// each query head's shared value vector. Tiled kernels (with sink and gate too) vs the reference.
TEST(Attention, GroupedQueryMatchesReference) {
  struct Gqa {
    int B, T, C, H, Hkv;
  };
  for (Gqa s :
       {Gqa{1, 1, 8, 2, 1}, Gqa{2, 7, 24, 6, 2}, Gqa{1, 130, 16, 4, 1}, Gqa{2, 65, 32, 4, 2}}) {
    for (bool exclusive : {false, true}) {
      SCOPED_TRACE(testing::Message() << "B=" << s.B << " T=" << s.T << " C=" << s.C << " H=" << s.H
                                      << " Hkv=" << s.Hkv << (exclusive ? " XSA" : " SA"));
      const int N = s.B * s.T, D = s.C / s.H, W = s.C + 2 * s.Hkv * D;
      Vec qkv = random_vector(N * W, 1), dout = random_vector(N * s.C, 2),
          sink = random_vector(s.H, 3);
      Vec alpha = random_vector(s.H, 4, 0.5);
      Vec y_ref(N * s.C), lse_ref(s.B * s.H * s.T), z_ref(N * s.C),
          dy_ref = dout, dqkv_ref(N * W, 0.0), dsink_ref(s.H, 0.0), da_ref(N * s.H, 0.0);
      ref::attention_forward(y_ref.data(), lse_ref.data(), qkv.data(),
                             ref::Heads{s.B, s.T, s.C, s.H, s.Hkv}, sink.data());
      if (exclusive) {
        ref::xsa_forward(z_ref.data(), y_ref.data(), qkv.data(),
                         ref::Heads{s.B, s.T, s.C, s.H, s.Hkv}, alpha.data());
        ref::xsa_backward(dy_ref.data(), dqkv_ref.data(), dout.data(), y_ref.data(), qkv.data(),
                          ref::Heads{s.B, s.T, s.C, s.H, s.Hkv}, alpha.data(), da_ref.data());
      }
      ref::attention_backward(dqkv_ref.data(), dy_ref.data(), qkv.data(),
                              ref::Heads{s.B, s.T, s.C, s.H, s.Hkv}, sink.data(), dsink_ref.data());
      // RoPE of the grouped layout: q has H heads, k has Hkv.
      Vec rot_ref = qkv;
      ref::rope_rotate(rot_ref.data(), s.B, s.T, s.C, s.H, 10000.0, +1, s.Hkv);

      auto qkvf = cast_vector<float>(qkv), doutf = cast_vector<float>(dout),
           sinkf = cast_vector<float>(sink), af = cast_vector<float>(alpha);
      std::vector<float> yf(N * s.C), zf(N * s.C), lsef(s.B * s.H * s.T), dqkvf(N * W, 0.f),
          dsinkr(s.B * s.H), daf(N * s.H);
      ops::AttentionArgs<float> args{.B = s.B,
                                     .T = s.T,
                                     .C = s.C,
                                     .H = s.H,
                                     .Hkv = s.Hkv,
                                     .exclusive = exclusive,
                                     .qkv = qkvf.data(),
                                     .y = yf.data(),
                                     .z = zf.data(),
                                     .lse = lsef.data(),
                                     .alpha = exclusive ? af.data() : nullptr,
                                     .sink = sinkf.data(),
                                     .dqkv = dqkvf.data(),
                                     .d_out = doutf.data(),
                                     .dalpha = daf.data(),
                                     .dsink = dsinkr.data()};
      ops::attention_forward(args);
      ops::attention_backward(args);
      const test::AttentionBounds bound =
          test::attention_bounds({.B = s.B,
                                  .T = s.T,
                                  .C = s.C,
                                  .H = s.H,
                                  .Hkv = s.Hkv,
                                  .exclusive = exclusive,
                                  .qkv = qkv,
                                  .sink = sink,
                                  .alpha = exclusive ? alpha : Vec{},
                                  .dout = dout,
                                  .dqkv0 = Vec(N * W, 0.0)},
                                 kFloatRoundoff);
      Vec dsinkf, dsink_bound;  // ∂L/∂b_h summed over the sequences, as the reference sums it
      test::dsink_summed(dsinkr, bound.dsink, s.B, s.H, dsinkf, dsink_bound);
      EXPECT_TRUE(within(yf, y_ref, bound.y, "y"));
      EXPECT_TRUE(within(lsef, lse_ref, bound.lse, "lse"));
      EXPECT_TRUE(within(dqkvf, dqkv_ref, bound.dqkv, "dqkv"));
      EXPECT_TRUE(within(dsinkf, dsink_ref, dsink_bound, "dsink"));
      if (exclusive) {
        EXPECT_TRUE(within(zf, z_ref, bound.z, "z"));
        EXPECT_TRUE(within(daf, da_ref, bound.dalpha, "dalpha"));
      }
      std::vector<float> cosf(s.T * D / 2), sinf(s.T * D / 2);
      ops::rope_table(cosf.data(), sinf.data(), s.T, D, 10000.0);
      auto rot = cast_vector<float>(qkv);
      ops::rope_forward(rot.data(), {cosf.data(), sinf.data(), s.B, s.T, s.C, s.H, s.Hkv});
      EXPECT_TRUE(within(rot, rot_ref,
                         test::rope_bound(qkv, s.B, s.T, s.C, s.H, s.Hkv, 10000.0, kFloatRoundoff),
                         "rope"));
    }
  }
}

// GQA with XSA equals ordinary multi-head attention on values repeated per query head: outputs
// equal; q gradients equal; each shared k, v gradient is the sum over its group's copies.
TEST(Attention, GroupedQueryEqualsRepeatedValues) {
  const int B = 2, T = 70, C = 32, H = 4, Hkv = 2, D = C / H, group = H / Hkv, N = B * T,
            W = C + 2 * Hkv * D;
  Vec gqa = random_vector(N * W, 1), dout = random_vector(N * C, 2);
  Vec mha(N * 3 * C);  // the same model with every kv head copied to its query heads
  for (int n = 0; n < N; n++)
    for (int h = 0; h < H; h++)
      for (int d = 0; d < D; d++) {
        mha[n * 3 * C + h * D + d] = gqa[n * W + h * D + d];
        mha[n * 3 * C + C + h * D + d] = gqa[n * W + C + (h / group) * D + d];
        mha[n * 3 * C + 2 * C + h * D + d] = gqa[n * W + C + Hkv * D + (h / group) * D + d];
      }
  Vec y_ref(N * C), lse_ref(B * H * T), z_ref(N * C), dy_ref = dout, dmha(N * 3 * C, 0.0);
  ref::attention_forward(y_ref.data(), lse_ref.data(), mha.data(), ref::Heads{B, T, C, H});
  ref::xsa_forward(z_ref.data(), y_ref.data(), mha.data(), ref::Heads{B, T, C, H});
  ref::xsa_backward(dy_ref.data(), dmha.data(), dout.data(), y_ref.data(), mha.data(),
                    ref::Heads{B, T, C, H});
  ref::attention_backward(dmha.data(), dy_ref.data(), mha.data(), ref::Heads{B, T, C, H});
  Vec dgqa_ref(N * W, 0.0);  // fold the copies back
  for (int n = 0; n < N; n++)
    for (int h = 0; h < H; h++)
      for (int d = 0; d < D; d++) {
        dgqa_ref[n * W + h * D + d] = dmha[n * 3 * C + h * D + d];
        dgqa_ref[n * W + C + (h / group) * D + d] += dmha[n * 3 * C + C + h * D + d];
        dgqa_ref[n * W + C + Hkv * D + (h / group) * D + d] += dmha[n * 3 * C + 2 * C + h * D + d];
      }
  auto qkvf = cast_vector<float>(gqa), doutf = cast_vector<float>(dout);
  std::vector<float> yf(N * C), zf(N * C), lsef(B * H * T), dqkvf(N * W, 0.f);
  ops::AttentionArgs<float> args{.B = B,
                                 .T = T,
                                 .C = C,
                                 .H = H,
                                 .Hkv = Hkv,
                                 .exclusive = true,
                                 .qkv = qkvf.data(),
                                 .y = yf.data(),
                                 .z = zf.data(),
                                 .lse = lsef.data(),
                                 .dqkv = dqkvf.data(),
                                 .d_out = doutf.data()};
  ops::attention_forward(args);
  ops::attention_backward(args);
  // The grouped problem's own bounds: the same arithmetic as the repeated one.
  const test::AttentionBounds bound = test::attention_bounds({.B = B,
                                                              .T = T,
                                                              .C = C,
                                                              .H = H,
                                                              .Hkv = Hkv,
                                                              .exclusive = true,
                                                              .qkv = gqa,
                                                              .dout = dout,
                                                              .dqkv0 = Vec(N * W, 0.0)},
                                                             kFloatRoundoff);
  EXPECT_TRUE(within(yf, y_ref, bound.y, "y"));
  EXPECT_TRUE(within(zf, z_ref, bound.z, "z"));
  EXPECT_TRUE(within(dqkvf, dgqa_ref, bound.dqkv, "dqkv"));
}

TEST(Attention, GroupedQueryReferenceBackwardMatchesFiniteDifferences) {
  const int B = 1, T = 4, C = 8, H = 4, Hkv = 2, D = C / H, N = B * T, W = C + 2 * Hkv * D;
  Vec qkv = random_vector(N * W, 1), probe = random_vector(N * C, 2);
  auto loss = [&](const Vec& x) {
    Vec y(N * C), lse(B * H * T), z(N * C);
    ref::attention_forward(y.data(), lse.data(), x.data(), ref::Heads{B, T, C, H, Hkv},
                           (const double*)nullptr);
    ref::xsa_forward(z.data(), y.data(), x.data(), ref::Heads{B, T, C, H, Hkv},
                     (const double*)nullptr);
    return dot(z, probe);
  };
  Vec y(N * C), lse(B * H * T), dy(N * C), grad(N * W, 0.0);
  ref::attention_forward(y.data(), lse.data(), qkv.data(), ref::Heads{B, T, C, H, Hkv},
                         (const double*)nullptr);
  ref::xsa_backward(dy.data(), grad.data(), probe.data(), y.data(), qkv.data(),
                    ref::Heads{B, T, C, H, Hkv}, (const double*)nullptr, (double*)nullptr);
  ref::attention_backward(grad.data(), dy.data(), qkv.data(), ref::Heads{B, T, C, H, Hkv},
                          (const double*)nullptr, (double*)nullptr);
  EXPECT_LE(max_rel_error(grad, numeric_grad(loss, qkv)), kTolFiniteDiff);
}

// A learned attention sink: the tiled kernel against the reference, and ∂L/∂b_h.
TEST(Attention, SinkMatchesReference) {
  for (AttnShape s : {AttnShape{1, 1, 8, 2}, AttnShape{2, 7, 12, 3}, AttnShape{1, 130, 16, 2}}) {
    SCOPED_TRACE(testing::Message() << "B=" << s.B << " T=" << s.T << " C=" << s.C << " H=" << s.H);
    const int N = s.B * s.T;
    Vec qkv = random_vector(N * 3 * s.C, 1), dy = random_vector(N * s.C, 2),
        sink = random_vector(s.H, 3);
    Vec y_ref(N * s.C), lse_ref(s.B * s.H * s.T), dqkv_ref(N * 3 * s.C, 0.0), dsink_ref(s.H, 0.0);
    ref::attention_forward(y_ref.data(), lse_ref.data(), qkv.data(), ref::Heads{s.B, s.T, s.C, s.H},
                           sink.data());
    ref::attention_backward(dqkv_ref.data(), dy.data(), qkv.data(), ref::Heads{s.B, s.T, s.C, s.H},
                            sink.data(), dsink_ref.data());
    auto qkvf = cast_vector<float>(qkv), dyf = cast_vector<float>(dy),
         sinkf = cast_vector<float>(sink);
    std::vector<float> yf(N * s.C), lsef(s.B * s.H * s.T), dqkvf(N * 3 * s.C, 0.f),
        dsink_rows(s.B * s.H);
    ops::AttentionArgs<float> args{.B = s.B,
                                   .T = s.T,
                                   .C = s.C,
                                   .H = s.H,
                                   .qkv = qkvf.data(),
                                   .y = yf.data(),
                                   .lse = lsef.data(),
                                   .sink = sinkf.data(),
                                   .dqkv = dqkvf.data(),
                                   .d_out = dyf.data(),
                                   .dsink = dsink_rows.data()};
    ops::attention_forward(args);
    ops::attention_backward(args);
    const test::AttentionBounds bound = test::attention_bounds({.B = s.B,
                                                                .T = s.T,
                                                                .C = s.C,
                                                                .H = s.H,
                                                                .qkv = qkv,
                                                                .sink = sink,
                                                                .dout = dy,
                                                                .dqkv0 = Vec(N * 3 * s.C, 0.0)},
                                                               kFloatRoundoff);
    Vec dsinkf, dsink_bound;  // ∂L/∂b_h summed over the sequences, as the reference sums it
    test::dsink_summed(dsink_rows, bound.dsink, s.B, s.H, dsinkf, dsink_bound);
    EXPECT_TRUE(within(yf, y_ref, bound.y, "y"));
    EXPECT_TRUE(within(lsef, lse_ref, bound.lse, "lse"));
    EXPECT_TRUE(within(dqkvf, dqkv_ref, bound.dqkv, "dqkv"));
    EXPECT_TRUE(within(dsinkf, dsink_ref, dsink_bound, "dsink"));
  }
}

TEST(Attention, SinkReferenceBackwardMatchesFiniteDifferences) {
  const int B = 1, T = 5, C = 8, H = 2, N = B * T;
  Vec qkv = random_vector(N * 3 * C, 1), probe = random_vector(N * C, 2), sink = {0.5, -1.0};
  auto loss = [&](const Vec& x, const Vec& b) {
    Vec y(N * C), lse(B * H * T);
    ref::attention_forward(y.data(), lse.data(), x.data(), ref::Heads{B, T, C, H}, b.data());
    return dot(y, probe);
  };
  Vec grad(N * 3 * C, 0.0), dsink(H, 0.0);
  ref::attention_backward(grad.data(), probe.data(), qkv.data(), ref::Heads{B, T, C, H},
                          sink.data(), dsink.data());
  EXPECT_LE(max_rel_error(grad, numeric_grad([&](const Vec& v) { return loss(v, sink); }, qkv)),
            kTolFiniteDiff);
  EXPECT_LE(max_rel_error(dsink, numeric_grad([&](const Vec& v) { return loss(qkv, v); }, sink)),
            kTolFiniteDiff);
}

TEST(Attention, ReferenceBackwardMatchesFiniteDifferences) {
  const int B = 2, T = 5, C = 8, H = 2, N = B * T;
  Vec qkv = random_vector(N * 3 * C, 1), probe = random_vector(N * C, 2);
  auto loss = [&](const Vec& x) {
    Vec y(N * C), lse(B * H * T);
    ref::attention_forward(y.data(), lse.data(), x.data(), ref::Heads{B, T, C, H});
    return dot(y, probe);
  };
  Vec grad(N * 3 * C, 0.0);
  ref::attention_backward(grad.data(), probe.data(), qkv.data(), ref::Heads{B, T, C, H});
  EXPECT_LE(max_rel_error(grad, numeric_grad(loss, qkv)), kTolFiniteDiff);
}

// A large score spread: the online softmax must stay exact where naive exp would overflow.
TEST(Attention, StableForLargeScores) {
  const int B = 1, T = 9, C = 8, H = 1, N = B * T;
  Vec qkv = random_vector(N * 3 * C, 5, 30.0);
  Vec y_ref(N * C), lse_ref(T);
  ref::attention_forward(y_ref.data(), lse_ref.data(), qkv.data(), ref::Heads{B, T, C, H});
  auto qkvf = cast_vector<float>(qkv);
  std::vector<float> yf(N * C), lsef(T);
  ops::attention_forward<float>(
      {.B = B, .T = T, .C = C, .H = H, .qkv = qkvf.data(), .y = yf.data(), .lse = lsef.data()});
  // Scores near 10^3: their rounding (sum_error(D)·Σ|q k|, a few 10^-4) moves the probabilities by
  // as much relative, which the bound carries.
  const test::AttentionBounds bound = test::attention_bounds({.B = B,
                                                              .T = T,
                                                              .C = C,
                                                              .H = H,
                                                              .qkv = qkv,
                                                              .dout = Vec(N * C, 0.0),
                                                              .dqkv0 = Vec(N * 3 * C, 0.0)},
                                                             kFloatRoundoff);
  EXPECT_TRUE(within(yf, y_ref, bound.y, "y"));
  EXPECT_TRUE(within(lsef, lse_ref, bound.lse, "lse"));
}

// ---------------------------------------------------------------- xsa
// The batch XSA kernels in float32 and float64 against the reference, plain (alpha null) or gated
// (z = y − α_h (y·u) u with a gate per head; then ∂L/∂α per token and head too). Token 0 of head 0
// has a zero value vector.
void check_xsa_against_reference(bool gated) {
  for (AttnShape s : kAttnShapes) {
    SCOPED_TRACE(testing::Message() << "B=" << s.B << " T=" << s.T << " C=" << s.C << " H=" << s.H);
    const int N = s.B * s.T, D = s.C / s.H;
    Vec qkv = random_vector(N * 3 * s.C, 1), y = random_vector(N * s.C, 2),
        dz = random_vector(N * s.C, 3);
    for (int d = 0; d < D; d++) qkv[2 * s.C + d] = 0;
    Vec dqkv0 = random_vector(N * 3 * s.C, 4), alpha = random_vector(s.H, 5, 0.5);
    const double* a = gated ? alpha.data() : nullptr;
    Vec z_ref(N * s.C), dy_ref(N * s.C), dqkv_ref = dqkv0, da_ref(N * s.H);
    ref::xsa_forward(z_ref.data(), y.data(), qkv.data(), ref::Heads{s.B, s.T, s.C, s.H}, a);
    ref::xsa_backward(dy_ref.data(), dqkv_ref.data(), dz.data(), y.data(), qkv.data(),
                      ref::Heads{s.B, s.T, s.C, s.H}, a, gated ? da_ref.data() : nullptr);

    // The same kernels in float32 and in float64, each held to the bounds of its roundoff.
    auto check = [&]<typename Real>(Real, double u) {
      const test::XsaBounds bound =
          test::xsa_bounds(qkv, y, dz, dqkv0, s.B, s.T, s.C, s.H, 0, gated ? alpha : Vec{}, u);
      auto q = cast_vector<Real>(qkv), yy = cast_vector<Real>(y), g = cast_vector<Real>(dz),
           al = cast_vector<Real>(alpha), dqkv = cast_vector<Real>(dqkv0);
      std::vector<Real> z(N * s.C), dy(N * s.C), da(N * s.H);
      const Real* ar = gated ? al.data() : nullptr;
      const test::XsaCall<Real> xsa{s.B, s.T, s.C, s.H, 0, ar};
      xsa.forward(z.data(), yy.data(), q.data());
      xsa.backward(dy.data(), dqkv.data(), g.data(), yy.data(), q.data(),
                   gated ? da.data() : nullptr);
      EXPECT_TRUE(within(z, z_ref, bound.z, "z"));
      EXPECT_TRUE(within(dy, dy_ref, bound.dy, "dy"));
      EXPECT_TRUE(within(dqkv, dqkv_ref, bound.dqkv, "dqkv"));
      if (gated) {
        EXPECT_TRUE(within(da, da_ref, bound.dalpha, "dalpha"));
      }
    };
    check(0.0f, kFloatRoundoff);
    check(0.0, kDoubleRoundoff);
  }
}

TEST(Xsa, ForwardBackwardMatchReference) {
  check_xsa_against_reference(false);
}

TEST(Xsa, ReferenceBackwardMatchesFiniteDifferences) {
  const int B = 1, T = 4, C = 8, H = 2, N = B * T;
  Vec qkv = random_vector(N * 3 * C, 1), y = random_vector(N * C, 2),
      probe = random_vector(N * C, 3);
  auto loss = [&](const Vec& yy, const Vec& x) {
    Vec z(N * C);
    ref::xsa_forward(z.data(), yy.data(), x.data(), ref::Heads{B, T, C, H});
    return dot(z, probe);
  };
  Vec dy(N * C), dqkv(N * 3 * C, 0.0);
  ref::xsa_backward(dy.data(), dqkv.data(), probe.data(), y.data(), qkv.data(),
                    ref::Heads{B, T, C, H});
  EXPECT_LE(max_rel_error(dy, numeric_grad([&](const Vec& v) { return loss(v, qkv); }, y)),
            kTolFiniteDiff);
  EXPECT_LE(max_rel_error(dqkv, numeric_grad([&](const Vec& v) { return loss(y, v); }, qkv)),
            kTolFiniteDiff);
}

TEST(Xsa, GatedMatchesReference) {
  check_xsa_against_reference(true);
}

TEST(Xsa, GatedReferenceBackwardMatchesFiniteDifferences) {
  const int B = 1, T = 3, C = 8, H = 2, N = B * T;
  Vec qkv = random_vector(N * 3 * C, 1), y = random_vector(N * C, 2),
      probe = random_vector(N * C, 3);
  Vec alpha = {0.3, -0.7};
  auto loss = [&](const Vec& yy, const Vec& x, const Vec& al) {
    Vec z(N * C);
    ref::xsa_forward(z.data(), yy.data(), x.data(), ref::Heads{B, T, C, H}, al.data());
    return dot(z, probe);
  };
  Vec dy(N * C), dqkv(N * 3 * C, 0.0), da(N * H);
  ref::xsa_backward(dy.data(), dqkv.data(), probe.data(), y.data(), qkv.data(),
                    ref::Heads{B, T, C, H}, alpha.data(), da.data());
  Vec da_sum(H, 0.0);  // ∂L/∂α_h sums over tokens
  for (int n = 0; n < N; n++)
    for (int h = 0; h < H; h++) da_sum[h] += da[n * H + h];
  EXPECT_LE(max_rel_error(dy, numeric_grad([&](const Vec& v) { return loss(v, qkv, alpha); }, y)),
            kTolFiniteDiff);
  EXPECT_LE(max_rel_error(dqkv, numeric_grad([&](const Vec& v) { return loss(y, v, alpha); }, qkv)),
            kTolFiniteDiff);
  EXPECT_LE(
      max_rel_error(da_sum, numeric_grad([&](const Vec& v) { return loss(y, qkv, v); }, alpha)),
      kTolFiniteDiff);
}

// z ⟂ v in float32, for every token and head: |cos(z_i, v_i)| within what z's rounding allows,
// Σ_d δz_d|v_d| / (‖z‖‖v‖) with δz the entries' bounds (tests/bounds.h), here where y leans hard
// on v and z is what is left after a large cancellation.
TEST(Xsa, OutputIsOrthogonalToOwnValue) {
  const int B = 2, T = 50, C = 64, H = 4, D = C / H, N = B * T;
  auto qkv = cast_vector<float>(random_vector(N * 3 * C, 7));
  auto y = cast_vector<float>(random_vector(N * C, 8));
  for (int n = 0; n < N; n++)  // make y lean hard on v, as trained models do
    for (int c = 0; c < C; c++) y[n * C + c] += 3 * qkv[n * 3 * C + 2 * C + c];
  std::vector<float> z(N * C);
  test::XsaCall<float>{B, T, C, H}.forward(z.data(), y.data(), qkv.data());
  const auto yd = cast_vector<double>(y), qd = cast_vector<double>(qkv);
  const test::XsaBounds bound = test::xsa_bounds(qd, yd, Vec(N * C, 0.0), Vec(N * 3 * C, 0.0), B, T,
                                                 C, H, 0, {}, kFloatRoundoff);
  Vec cos_got, cos_bound;
  for (int n = 0; n < N; n++)
    for (int h = 0; h < H; h++) {
      double zv = 0, zz = 0, vv = 0, allowed = 0;
      for (int d = 0; d < D; d++) {
        double zd = z[n * C + h * D + d], vd = qkv[n * 3 * C + 2 * C + h * D + d];
        zv += zd * vd, zz += zd * zd, vv += vd * vd;
        allowed += bound.z[n * C + h * D + d] * std::fabs(vd);
      }
      cos_got.push_back(zv / std::sqrt(zz * vv));
      cos_bound.push_back(allowed / std::sqrt(zz * vv));
    }
  EXPECT_TRUE(within(cos_got, Vec(cos_got.size(), 0.0), cos_bound, "cos(z, v)"));
}

// A zero value vector: u = 0, so z = y, ∂L/∂y = g and the own-value gradient is 0 (SPEC §2).
TEST(Xsa, ZeroValueVectorHandledAsSpecified) {
  const int B = 1, T = 1, C = 4, H = 1;
  std::vector<float> qkv(3 * C, 0.f), y = {1, -2, 3, 0.5f}, dz = {0.3f, 0.1f, -0.2f, 0.7f};
  for (int c = 0; c < 2 * C; c++) qkv[c] = 0.1f * (c + 1);
  std::vector<float> z(C), dy(C), dqkv(3 * C, 0.f);
  const test::XsaCall<float> xsa{B, T, C, H};
  xsa.forward(z.data(), y.data(), qkv.data());
  xsa.backward(dy.data(), dqkv.data(), dz.data(), y.data(), qkv.data());
  for (int c = 0; c < C; c++) {
    EXPECT_EQ(z[c], y[c]);
    EXPECT_EQ(dy[c], dz[c]);
    EXPECT_EQ(dqkv[2 * C + c], 0.f);
    EXPECT_TRUE(std::isfinite(dqkv[2 * C + c]));
  }
  // A tiny but non-zero v (below the 1e-6 floor) stays finite too.
  for (int c = 0; c < C; c++) qkv[2 * C + c] = 1e-9f;
  xsa.forward(z.data(), y.data(), qkv.data());
  xsa.backward(dy.data(), dqkv.data(), dz.data(), y.data(), qkv.data());
  for (int c = 0; c < C; c++)
    EXPECT_TRUE(std::isfinite(z[c]) && std::isfinite(dy[c]) && std::isfinite(dqkv[2 * C + c]));
}

// Under the causal mask position 0 attends only to itself: y_0 = v_0 and z_0 = 0 exactly. (Its
// one probability is fast_exp(0) = 1 exactly and the products add zeros to v_0; then y·v and v·v
// are the same sums of the same numbers, s = 1 exactly, and y − 1·v = 0.)
TEST(Xsa, FirstPositionOutputIsZero) {
  const int B = 2, T = 6, C = 12, H = 3;
  auto qkv = cast_vector<float>(random_vector(B * T * 3 * C, 9));
  std::vector<float> y(B * T * C), lse(B * H * T), z(B * T * C);
  ops::attention_forward<float>({.B = B,
                                 .T = T,
                                 .C = C,
                                 .H = H,
                                 .exclusive = true,
                                 .qkv = qkv.data(),
                                 .y = y.data(),
                                 .z = z.data(),
                                 .lse = lse.data()});
  for (int b = 0; b < B; b++)
    for (int c = 0; c < C; c++) {
      EXPECT_EQ(y[b * T * C + c], qkv[b * T * 3 * C + 2 * C + c]);
      EXPECT_EQ(z[b * T * C + c], 0.f);
    }
}

// ---------------------------------------------------------------- gelu
TEST(Gelu, ForwardBackwardMatchReference) {
  for (int n : {1, 7, 1000}) {
    Vec x = random_vector(n, 1, 3.0), dout = random_vector(n, 2);
    Vec y_ref(n), dx_ref(n);
    ref::gelu_forward(y_ref.data(), x.data(), n);
    ref::gelu_backward(dx_ref.data(), x.data(), dout.data(), n);
    auto xf = cast_vector<float>(x), doutf = cast_vector<float>(dout);
    std::vector<float> yf(n), dxf(n);
    ops::gelu_forward(yf.data(), xf.data(), n);
    ops::gelu_backward(dxf.data(), xf.data(), doutf.data(), n);
    Vec y_bound, dx_bound;
    test::gelu_bounds(y_bound, dx_bound, x, dout, kFloatRoundoff);
    EXPECT_TRUE(within(yf, y_ref, y_bound, "y"));
    EXPECT_TRUE(within(dxf, dx_ref, dx_bound, "dx"));
  }
}

TEST(Gelu, ReferenceBackwardMatchesFiniteDifferences) {
  const int n = 50;
  Vec x = random_vector(n, 1, 3.0), probe = random_vector(n, 2);
  auto loss = [&](const Vec& v) {
    Vec y(n);
    ref::gelu_forward(y.data(), v.data(), n);
    return dot(y, probe);
  };
  Vec dx(n);
  ref::gelu_backward(dx.data(), x.data(), probe.data(), n);
  EXPECT_LE(max_rel_error(dx, numeric_grad(loss, x)), kTolFiniteDiff);
}

// ---------------------------------------------------------------- cross-entropy
TEST(CrossEntropy, ForwardBackwardMatchReference) {
  struct Shape {
    int N, V, Vp;
  };
  for (Shape s : {Shape{1, 5, 64}, Shape{9, 50, 64}, Shape{16, 256, 256}, Shape{7, 100, 128}}) {
    SCOPED_TRACE(testing::Message() << "N=" << s.N << " V=" << s.V << " Vp=" << s.Vp);
    Vec logits = random_vector(s.N * s.Vp, 1, 3.0);
    std::vector<int32_t> targets(s.N);
    for (int n = 0; n < s.N; n++) targets[n] = n % 4 == 3 ? -1 : (n * 13) % s.V;  // some ignored
    const double dloss = 0.37;
    Vec g_ref = logits, loss_ref(s.N);
    ref::crossentropy_forward_backward(g_ref.data(), loss_ref.data(), targets.data(), s.N, s.V,
                                       s.Vp, dloss);
    auto gf = cast_vector<float>(logits);
    std::vector<float> lossf(s.N);
    ops::crossentropy_forward_backward(gf.data(), lossf.data(), targets.data(), s.N, s.V, s.Vp,
                                       (float)dloss);
    Vec loss_bound, grad_bound;
    test::crossentropy_bounds(loss_bound, grad_bound, logits, targets, s.N, s.V, s.Vp, dloss,
                              kFloatRoundoff);
    EXPECT_TRUE(within(lossf, loss_ref, loss_bound, "losses"));
    EXPECT_TRUE(within(gf, g_ref, grad_bound, "gradient"));
    for (int n = 0; n < s.N; n++) {
      for (int j = s.V; j < s.Vp; j++)
        ASSERT_EQ(gf[n * s.Vp + j], 0.f) << "padded column gets no gradient";
      if (targets[n] < 0) {
        EXPECT_EQ(lossf[n], 0.f);
      }
    }
    // Without a gradient the logits stay as they were.
    auto kept = cast_vector<float>(logits);
    ops::crossentropy_forward_backward(kept.data(), lossf.data(), targets.data(), s.N, s.V, s.Vp,
                                       0.f);
    EXPECT_EQ(kept, cast_vector<float>(logits));
  }
}

TEST(CrossEntropy, ReferenceBackwardMatchesFiniteDifferences) {
  const int N = 4, V = 7, Vp = 8;
  Vec logits = random_vector(N * Vp, 1);
  std::vector<int32_t> targets = {2, -1, 6, 0};
  auto loss = [&](const Vec& x) {
    Vec l = x, losses(N);
    ref::crossentropy_forward_backward(l.data(), losses.data(), targets.data(), N, V, Vp, 0.0);
    double s = 0;
    for (double v : losses) s += v;
    return s;
  };
  Vec g = logits, losses(N);
  ref::crossentropy_forward_backward(g.data(), losses.data(), targets.data(), N, V, Vp, 1.0);
  EXPECT_LE(max_rel_error(g, numeric_grad(loss, logits)), kTolFiniteDiff);
}

// ---------------------------------------------------------------- adamw
TEST(AdamW, MatchesReferenceOverSteps) {
  const size_t n = 1001;
  Vec p = random_vector(n, 1), m(n, 0.0), v(n, 0.0);
  auto pf = cast_vector<float>(p);
  std::vector<float> mf(n, 0.f), vf(n, 0.f);
  // The bound runs beside the reference, step by step (tests/bounds.h).
  test::AdamBounds bound{Vec(n, 0.0), Vec(n, 0.0), Vec(n, 0.0)};
  for (int step = 1; step <= 5; step++) {
    Vec g = random_vector(n, 10 + step, 0.1);
    auto gf = cast_vector<float>(g);
    test::adamw_bound_step(bound, p, m, v, g, 3e-3, 0.9, 0.95, 1e-8, 0.1, 0.5, step,
                           kFloatRoundoff);
    ref::adamw_update(p.data(), g.data(), m.data(), v.data(), n,
                      ops::AdamWSettings{3e-3, 0.9, 0.95, 1e-8, 0.1, 0.5, step});
    ops::AdamWSettings s{3e-3, 0.9, 0.95, 1e-8, 0.1, 0.5, step};
    ops::adamw_update(pf.data(), gf.data(), mf.data(), vf.data(), n, s);
  }
  EXPECT_TRUE(within(pf, p, bound.p, "p"));
  EXPECT_TRUE(within(mf, m, bound.m, "m"));
  EXPECT_TRUE(within(vf, v, bound.v, "v"));
}

// The gradient norm's sum of squares in float64: n rounded squares summed, against a plain sum
// (itself rounding): n + 1 terms at 2·2^-53 of Σx².
TEST(AdamW, SumOfSquaresWithinItsRounding) {
  for (size_t n : {size_t(0), size_t(1), size_t(255), size_t(257), size_t(100003)}) {
    Vec x = random_vector(n, 3);
    double want = 0;
    for (double v : x) want += v * v;
    EXPECT_NEAR(ops::sum_of_squares(x.data(), n), want,
                test::sum_error((double)n + 1, kDoubleRoundoff) * want);
  }
}

// fast_exp, which the softmaxes, GELU and the cross-entropy use, within 2 ulp (4u relative) of
// exp over its whole argument range, as tests/bounds.h assumes: 10^7 arguments spread over
// [−87, 88], and the corners.
TEST(Vmath, FastExpWithinFourU) {
  double worst = 0;
  float worst_at = 0;
  auto check = [&](float x) {
    const double want = std::exp((double)x), got = ops::fast_exp(x);
    const double rel = std::fabs(got - want) / want;
    if (rel > worst) worst = rel, worst_at = x;
  };
  const int n = 10000000;
  for (int i = 0; i <= n; i++) check(-87.0f + 175.0f * (float)i / n);
  for (float x : {-87.0f, -86.9999f, -1e-30f, 0.0f, 1e-30f, 0.5f, 0.6931472f, 87.9999f, 88.0f})
    check(x);
  EXPECT_LE(worst, test::exp_error(kFloatRoundoff)) << "at x = " << worst_at;
}

}  // namespace
}  // namespace xsa

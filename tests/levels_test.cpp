// xsa's kernels at every CPU level this machine has (util/cpu.h: set_cpu_level, in one process;
// the other tests run at one level each, XSA_CPU choosing it in scripts/test.sh):
//  - bit for bit the same at every level: the kernels whose sums have one order whatever the
//    vector width (LayerNorm's sums in float64 row by row, the elementwise kernels, the embedding's
//    row sums, attention without XSA: its row maxima and exps are elementwise, its sums run in
//    order: each tile product's over its inner dimension, the softmax's in 16 partial sums per row
//    whatever the vector width);
//  - within their derived bounds of each other (two float computations, each within its bound of
//    exact arithmetic: tests/bounds.h): the kernels with vector-width reductions (XSA's dot
//    products, the cross-entropy's sums, the gradient's sum of squares, the one-row product, the
//    cached attention);
//  - a training step taken from the same state at each level: the loss and the weights after it
//    within the bounds of two ways of summing (tests/step_check.h), over 20 steps of a run.
// oneDNN keeps the instruction sets it chose when first used (XSA_CPU sets them for a process),
// so the products are those of the machine's own level throughout.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "bounds.h"
#include "step_check.h"
#include "test_util.h"
#include "xsa/model/gpt.h"
#include "xsa/ops/ops.h"
#include "xsa/train/step.h"
#include "xsa/util/cpu.h"

namespace xsa {
namespace {

using test::cast_vector;
using test::random_vector;
using Vec = std::vector<double>;
using FVec = std::vector<float>;

// The level this process runs at (the machine's own, or XSA_CPU's), and those below it.
CpuLevel top_level() {
  static const CpuLevel top = cpu_level();
  return top;
}
std::vector<CpuLevel> lower_levels() {
  std::vector<CpuLevel> out;
  for (CpuLevel l : {CpuLevel::avx2, CpuLevel::avx512, CpuLevel::avx512_bf16})
    if (l < top_level()) out.push_back(l);
  return out;
}

// Runs fn at `level`, then back at the top one.
template <typename Fn>
auto at_level(CpuLevel level, Fn fn) {
  set_cpu_level(level);
  auto out = fn();
  set_cpu_level(top_level());
  return out;
}

class Levels : public ::testing::Test {
 protected:
  void SetUp() override {
    if (lower_levels().empty())
      GTEST_SKIP() << "no kernel level below this process's " << level_name(top_level())
                   << ": nothing to compare";
    set_cpu_level(top_level());
  }
  void TearDown() override { set_cpu_level(top_level()); }
};

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

TEST_F(Levels, KernelsWithOneSummationOrderAreBitIdentical) {
  const int N = 65, C = 192, H = 3, T = 65, B = 1;
  const FVec x = cast_vector<float>(random_vector(N * C, 1)),
             w = cast_vector<float>(random_vector(C, 2)),
             b = cast_vector<float>(random_vector(C, 3)),
             g = cast_vector<float>(random_vector(N * C, 4));
  const FVec qkv = cast_vector<float>(random_vector((size_t)N * 3 * C, 5)),
             dout = cast_vector<float>(random_vector((size_t)N * C, 6));
  struct Out {
    FVec ln, mean, rstd, dx, dw, db, gelu, dgelu, rope, y, lse, dqkv, adam, dwte;
  };
  auto run = [&] {
    Out o{FVec(N * C),
          FVec(N),
          FVec(N),
          FVec(N * C, 0.f),
          FVec(C, 0.f),
          FVec(C, 0.f),
          FVec(N * C),
          FVec(N * C),
          qkv,
          FVec(N * C),
          FVec(H * T),
          FVec((size_t)N * 3 * C, 0.f),
          x,
          FVec(11 * C, 0.f)};
    ops::layernorm_forward(o.ln.data(), o.mean.data(), o.rstd.data(), x.data(), w.data(), b.data(),
                           N, C);
    ops::layernorm_backward(o.dx.data(), o.dw.data(), o.db.data(), g.data(),
                            {x.data(), w.data(), nullptr, o.mean.data(), o.rstd.data(), N, C});
    ops::gelu_forward(o.gelu.data(), x.data(), x.size());
    ops::gelu_backward(o.dgelu.data(), x.data(), g.data(), x.size());
    FVec cos(T * 32), sin(T * 32);
    ops::rope_table(cos.data(), sin.data(), T, 64, 10000.0);
    ops::rope_forward(o.rope.data(), {cos.data(), sin.data(), B, T, C, H, 0});
    FVec d = dout;
    ops::AttentionArgs<float> args{.B = B,
                                   .T = T,
                                   .C = C,
                                   .H = H,
                                   .qkv = qkv.data(),
                                   .y = o.y.data(),
                                   .lse = o.lse.data(),
                                   .dqkv = o.dqkv.data(),
                                   .d_out = d.data()};
    ops::attention_forward(args);
    ops::attention_backward(args);
    FVec m(N * C, 0.f), v(N * C, 0.f);
    ops::adamw_update(o.adam.data(), g.data(), m.data(), v.data(), x.size(),
                      ops::AdamWSettings{1e-3, 0.9, 0.95, 1e-8, 0.1, 1.0, 1});
    std::vector<int32_t> tokens(N);
    for (int n = 0; n < N; n++) tokens[n] = (n * 7) % 11;
    ops::encoder_backward(o.dwte.data(), g.data(), tokens.data(), N, C);
    return o;
  };
  const Out best = run();
  for (CpuLevel level : lower_levels()) {
    SCOPED_TRACE(level_name(level));
    const Out o = at_level(level, run);
    EXPECT_TRUE(same_bits(o.ln, best.ln) && same_bits(o.mean, best.mean) &&
                same_bits(o.rstd, best.rstd))
        << "layernorm forward";
    EXPECT_TRUE(same_bits(o.dx, best.dx) && same_bits(o.dw, best.dw) && same_bits(o.db, best.db))
        << "layernorm backward";
    EXPECT_TRUE(same_bits(o.gelu, best.gelu) && same_bits(o.dgelu, best.dgelu)) << "gelu";
    EXPECT_TRUE(same_bits(o.rope, best.rope)) << "rope";
    EXPECT_TRUE(same_bits(o.y, best.y) && same_bits(o.lse, best.lse)) << "attention forward (SA)";
    EXPECT_TRUE(same_bits(o.dqkv, best.dqkv)) << "attention backward (SA)";
    EXPECT_TRUE(same_bits(o.adam, best.adam)) << "adamw";
    EXPECT_TRUE(same_bits(o.dwte, best.dwte)) << "embedding backward";
  }
}

// Vector-width reductions: each level within its derived bound of the reference, so any two
// within the sum of their bounds (here: each checked against the float64 reference).
TEST_F(Levels, KernelsWithVectorSumsStayWithinTheirBounds) {
  const int B = 2, T = 65, C = 128, H = 2, N = B * T, V = 1000, Vp = 1024;
  const Vec qkv = random_vector((size_t)N * 3 * C, 1), y = random_vector((size_t)N * C, 2),
            dz = random_vector((size_t)N * C, 3), logits = random_vector((size_t)N * Vp, 4, 3.0),
            w = random_vector((size_t)C * 384, 5), row = random_vector(384, 6);
  const Vec dqkv0((size_t)N * 3 * C, 0.0);
  std::vector<int32_t> targets(N);
  for (int n = 0; n < N; n++) targets[n] = (n * 37) % V;
  // The references.
  Vec z_ref((size_t)N * C), dy_ref((size_t)N * C), dqkv_ref = dqkv0, g_ref = logits, loss_ref(N),
                                                   mv_ref(C);
  ref::xsa_forward(z_ref.data(), y.data(), qkv.data(), ref::Heads{B, T, C, H});
  ref::xsa_backward(dy_ref.data(), dqkv_ref.data(), dz.data(), y.data(), qkv.data(),
                    ref::Heads{B, T, C, H});
  ref::crossentropy_forward_backward(g_ref.data(), loss_ref.data(), targets.data(), N, V, Vp,
                                     1.0 / N);
  ref::matmul_forward(mv_ref.data(), row.data(), w.data(), 1, 384, C);
  const double u = test::kFloatRoundoff;
  const test::XsaBounds xb = test::xsa_bounds(qkv, y, dz, dqkv0, B, T, C, H, 0, {}, u);
  Vec loss_bound, grad_bound;
  test::crossentropy_bounds(loss_bound, grad_bound, logits, targets, N, V, Vp, 1.0 / N, u);
  const Vec mv_bound = test::matmul_forward_bound(row, w, 1, 384, C, nullptr, u);
  double squares = 0;
  for (double v : logits) squares += v * v;
  for (CpuLevel level : std::vector<CpuLevel>{top_level(), lower_levels()[0]}) {
    SCOPED_TRACE(level_name(level));
    at_level(level, [&] {
      const FVec qf = cast_vector<float>(qkv), yf = cast_vector<float>(y),
                 gf = cast_vector<float>(dz), wf = cast_vector<float>(w),
                 rf = cast_vector<float>(row);
      FVec z((size_t)N * C), dy((size_t)N * C), dqkv((size_t)N * 3 * C, 0.f),
          lg = cast_vector<float>(logits), loss(N), mv(C);
      const test::XsaCall<float> xsa{B, T, C, H};
      xsa.forward(z.data(), yf.data(), qf.data());
      xsa.backward(dy.data(), dqkv.data(), gf.data(), yf.data(), qf.data());
      ops::crossentropy_forward_backward(lg.data(), loss.data(), targets.data(), N, V, Vp,
                                         1.0f / N);
      ops::matmul_forward(mv.data(), rf.data(), wf.data(), 1, 384, C);
      EXPECT_TRUE(test::within(z, z_ref, xb.z, "xsa z"));
      EXPECT_TRUE(test::within(dy, dy_ref, xb.dy, "xsa dy"));
      EXPECT_TRUE(test::within(dqkv, dqkv_ref, xb.dqkv, "xsa dv"));
      EXPECT_TRUE(test::within(loss, loss_ref, loss_bound, "cross-entropy losses"));
      EXPECT_TRUE(test::within(lg, g_ref, grad_bound, "cross-entropy gradient"));
      EXPECT_TRUE(test::within(mv, mv_ref, mv_bound, "one-row product"));
      const FVec lf = cast_vector<float>(logits);
      EXPECT_NEAR(ops::sum_of_squares(lf.data(), lf.size()), squares,
                  test::sum_error((double)lf.size() + 1, test::kDoubleRoundoff) * squares);
      return 0;
    });
  }
}

// A 20-step run at the machine's level; each step taken again from its state at every lower
// level: the loss within twice the forward chain's bound, the weights within test::same_step's.
TEST_F(Levels, TrainingStepsAgreeWithinTheirBounds) {
  for (const char* attn : {"sa", "xsa-gated+sink"}) {
    SCOPED_TRACE(attn);
    ModelConfig cfg;
    cfg.n_layer = 2, cfg.n_head = 4, cfg.n_embd = 64, cfg.seq_len = 32;
    set_attention(cfg, attn);
    const int B = 4, T = 32;
    Gpt<float> model(cfg, B, T), other(cfg, B, T);
    model.params().init(cfg, 9);
    const test::ModelChain chain = test::model_chain(cfg, B, T);
    const double lr = 3e-3;
    std::vector<int32_t> inputs(B * T), targets(B * T);
    TrainStep step(model);
    auto state_of = [](Gpt<float>& g) {
      ParamArena<float>& a = g.params();
      test::CheckpointState s{a.layout, FVec(a.params.data(), a.params.data() + a.params.size()),
                              FVec(a.adam_m.data(), a.adam_m.data() + a.adam_m.size()),
                              FVec(a.adam_v.data(), a.adam_v.data() + a.adam_v.size())};
      return s;
    };
    for (int s = 1; s <= 20; s++) {
      SCOPED_TRACE(testing::Message() << "step " << s);
      for (int i = 0; i < B * T; i++)
        inputs[i] = (i * 5 + s) % 200, targets[i] = (inputs[i] * 3 + 7) % 200;
      const test::CheckpointState before = state_of(model);
      const StepResult want = step.run(inputs.data(), targets.data(), lr, s);
      const test::CheckpointState after = state_of(model);
      for (CpuLevel level : lower_levels()) {
        SCOPED_TRACE(level_name(level));
        ParamArena<float>& o = other.params();
        std::copy(before.params.begin(), before.params.end(), o.params.data());
        std::copy(before.m.begin(), before.m.end(), o.adam_m.data());
        std::copy(before.v.begin(), before.v.end(), o.adam_v.data());
        const StepResult got = at_level(level, [&] {
          TrainStep again(other);
          return again.run(inputs.data(), targets.data(), lr, s);
        });
        EXPECT_NEAR(got.loss, want.loss,
                    2 * test::chain_error(chain.forward, test::kFloatRoundoff) * want.loss);
        EXPECT_TRUE(test::same_step(&before, state_of(other), after, lr, s, chain));
      }
    }
  }
}

}  // namespace
}  // namespace xsa

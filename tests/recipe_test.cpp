// The modern small-model recipe (docs/SPEC.md §11) against independent references: Muon's update
// of one training step, matrix by matrix, against float64 written from the spec (ref::muon_update:
// explicit transposes and matrices), with AdamW's tensors untouched by it; the quintic's band of
// singular values; ReLU² and the soft-capped cross-entropy against central finite differences.
// (The kernels on every backend: backend_ops_test; the whole model's gradient with them:
// model_test's GradCheck; resume and the command line: cli_test; 2 ranks: distributed_test.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "bounds.h"
#include "test_util.h"
#include "xsa/model/gpt.h"
#include "xsa/ops/ops.h"
#include "xsa/ops/reference.h"
#include "xsa/train/step.h"

namespace xsa {
namespace {

// The eigenvalues of the symmetric a [k, k], smallest first: cyclic Jacobi rotations until the
// off-diagonal entries are below 1e-15 of the matrix (Numerical Recipes §11.1's rotation).
std::vector<double> eigenvalues(std::vector<double> a, int k) {
  for (int sweep = 0; sweep < 100; sweep++) {
    double off = 0, total = 0;
    for (int i = 0; i < k; i++)
      for (int j = 0; j < k; j++)
        (i == j ? total : off) += a[(size_t)i * k + j] * a[(size_t)i * k + j];
    if (off <= 1e-30 * (total + off)) break;
    for (int p = 0; p < k; p++)
      for (int q = p + 1; q < k; q++) {
        const double apq = a[(size_t)p * k + q];
        if (apq == 0) continue;
        const double theta = (a[(size_t)q * k + q] - a[(size_t)p * k + p]) / (2 * apq);
        const double t = (theta >= 0 ? 1 : -1) / (std::fabs(theta) + std::sqrt(theta * theta + 1));
        const double c = 1 / std::sqrt(t * t + 1), s = t * c;
        for (int r = 0; r < k; r++) {  // A ← A P
          const double arp = a[(size_t)r * k + p], arq = a[(size_t)r * k + q];
          a[(size_t)r * k + p] = c * arp - s * arq, a[(size_t)r * k + q] = s * arp + c * arq;
        }
        for (int r = 0; r < k; r++) {  // A ← Pᵀ A
          const double apr = a[(size_t)p * k + r], aqr = a[(size_t)q * k + r];
          a[(size_t)p * k + r] = c * apr - s * aqr, a[(size_t)q * k + r] = s * apr + c * aqr;
        }
      }
  }
  std::vector<double> values(k);
  for (int i = 0; i < k; i++) values[i] = a[(size_t)i * k + i];
  std::sort(values.begin(), values.end());
  return values;
}

// The singular values' extremes of o [rows, cols]: the eigenvalues of the smaller Gram matrix.
std::pair<double, double> singular_extremes(const std::vector<double>& o, int rows, int cols) {
  const bool wide = rows <= cols;
  const int k = wide ? rows : cols, other = wide ? cols : rows;
  std::vector<double> g((size_t)k * k, 0.0);
  for (int i = 0; i < k; i++)
    for (int j = 0; j < k; j++)
      for (int l = 0; l < other; l++)
        g[(size_t)i * k + j] += wide ? o[(size_t)i * cols + l] * o[(size_t)j * cols + l]
                                     : o[(size_t)l * cols + i] * o[(size_t)l * cols + j];
  const std::vector<double> values = eigenvalues(g, k);
  return {std::sqrt(values.back()), std::sqrt(std::max(0.0, values.front()))};
}

// The eigenvalue routine itself, on a matrix whose singular values are known: diag(3, 2, 0.5)
// padded with zero columns and turned by a rotation of its rows (so the Gram matrix is not
// diagonal).
TEST(Recipe, SingularExtremesOfAKnownMatrix) {
  std::vector<double> m(3 * 5, 0.0);
  const double c = std::cos(0.3), s = std::sin(0.3);
  m[0 * 5 + 0] = 3 * c, m[1 * 5 + 0] = 3 * s;  // rows 0 and 1 rotated: singular values unchanged
  m[0 * 5 + 1] = -2 * s, m[1 * 5 + 1] = 2 * c;
  m[2 * 5 + 2] = 0.5;
  const auto [largest, smallest] = singular_extremes(m, 3, 5);
  EXPECT_NEAR(largest, 3, 1e-9);
  EXPECT_NEAR(smallest, 0.5, 1e-9);
}

// Newton–Schulz's quintic (a, b, c) = (3.4445, −4.7750, 2.0315) takes every singular value of a
// well-conditioned matrix into a band around 1 in five steps (about 0.7 to 1.2 as Jordan et al.
// plot it; the spec says about 0.5 to 1.5): the float64 reference and the CPU's float kernels, on
// random matrices of aspect 1/3 (condition number about 3), wide and tall.
TEST(Recipe, TheQuinticLeavesEverySingularValueInItsBand) {
  Backend<float>& be = cpu_backend<float>();
  for (const auto [rows, cols] : {std::pair{24, 72}, std::pair{72, 24}, std::pair{40, 120}}) {
    SCOPED_TRACE(testing::Message() << rows << "x" << cols);
    const size_t n = (size_t)rows * cols;
    const std::vector<double> g = test::random_vector(n, 17);
    std::vector<double> w(n, 0.0), m(n, 0.0);
    ref::MuonStep step;
    step.momentum = 0;  // U = G
    const std::vector<double> o = ref::muon_update(w.data(), g.data(), m.data(), rows, cols, step);
    const auto [largest, smallest] = singular_extremes(o, rows, cols);
    EXPECT_GT(smallest, 0.5);
    EXPECT_LT(largest, 1.5);

    const int k = std::min(rows, cols);
    DeviceBuffer<float> x(be, n, MemoryUse::activations), next(be, n, MemoryUse::activations),
        gram(be, (size_t)k * k, MemoryUse::activations),
        gram2(be, (size_t)k * k, MemoryUse::activations),
        poly(be, (size_t)k * k, MemoryUse::activations);
    for (size_t i = 0; i < n; i++) x.data()[i] = (float)g[i];
    be.newton_schulz({x.data(), next.data(), gram.data(), gram2.data(), poly.data(), rows, cols});
    const std::vector<double> of(x.data(), x.data() + n);
    const auto [f_largest, f_smallest] = singular_extremes(of, rows, cols);
    EXPECT_GT(f_smallest, 0.5);
    EXPECT_LT(f_largest, 1.5);
    EXPECT_LT(test::max_rel_error(of, o), 1e-3);  // the float kernels follow the reference
  }
}

// A batch of matrices of one shape (the CPU runs them side by side, each product on one thread)
// gives what each gives alone (products on every thread), to the products' rounding: within 1e-5
// of the largest entry, far below the iteration's own error (1e-3, above).
TEST(Recipe, ABatchOrthogonalisesEachMatrixAsAlone) {
  Backend<float>& be = cpu_backend<float>();
  const int rows = 24, cols = 72, count = 3;
  const size_t n = (size_t)rows * cols, kk = (size_t)rows * rows;
  const std::vector<double> g = test::random_vector(n * count, 23);
  auto buffer = [&](size_t size) { return DeviceBuffer<float>(be, size, MemoryUse::activations); };
  DeviceBuffer<float> x = buffer(n * count), next = buffer(n * count), gram = buffer(kk * count),
                      gram2 = buffer(kk * count), poly = buffer(kk * count);
  for (size_t i = 0; i < n * count; i++) x.data()[i] = (float)g[i];
  be.newton_schulz(
      {x.data(), next.data(), gram.data(), gram2.data(), poly.data(), rows, cols, count});
  for (int b = 0; b < count; b++) {
    DeviceBuffer<float> one = buffer(n), one_next = buffer(n), one_gram = buffer(kk),
                        one_gram2 = buffer(kk), one_poly = buffer(kk);
    for (size_t i = 0; i < n; i++) one.data()[i] = (float)g[b * n + i];
    be.newton_schulz({one.data(), one_next.data(), one_gram.data(), one_gram2.data(),
                      one_poly.data(), rows, cols});
    EXPECT_LT(test::max_rel_error(x.data() + b * n, one.data(), n), 1e-5) << b;
  }
}

// The bf16 backend (--precision bf16) converts each product's weight once and keeps the copy
// until weights_changed(); the iteration reads its own scratch as weights, so matrices
// orthogonalised in turn in the same memory (the batches of one step, or one matrix step after
// step) must each be read afresh, alone (products on every thread) and in a batch (one matrix per
// thread, each thread with its own copies). Wide and tall, 4 rounds each: every result finite,
// its singular values in the quintic's band, and against the float64 reference within 0.1 of the
// largest entry: bf16 products round every input to 8 bits (2⁻⁹ relative) and the quintic
// amplifies small singular directions (slope 3.4 near 0), so no tight bound follows; 8 matrices
// alone gave 0.026-0.041 on 2026-12-07. A stale copy gives NaN or the previous matrix's O, off by
// its whole size. (Training with --optimizer muon --precision bf16 became NaN at its second step
// through this.)
TEST(Recipe, TheBf16IterationReadsEachMatrixAfresh) {
  std::string why;
  if (!bf16_products_available(&why)) GTEST_SKIP() << why;
  Backend<float>& be = cpu_backend(Precision::bf16);
  const int most = 3;
  uint64_t seed = 31;
  for (const auto [rows, cols] : {std::pair{24, 72}, std::pair{72, 24}}) {
    const size_t n = (size_t)rows * cols, kk = (size_t)std::min(rows, cols) * std::min(rows, cols);
    auto buffer = [&](size_t size) {
      return DeviceBuffer<float>(be, size, MemoryUse::activations);
    };
    DeviceBuffer<float> x = buffer(most * n), next = buffer(most * n), gram = buffer(most * kk),
                        gram2 = buffer(most * kk), poly = buffer(most * kk);
    for (const int count : {1, most})
      for (int round = 0; round < 4; round++) {
        std::vector<std::vector<double>> o(count);
        for (int b = 0; b < count; b++, seed++) {
          const std::vector<double> g = test::random_vector(n, seed);
          std::vector<double> w(n, 0.0), m(n, 0.0);
          ref::MuonStep step;
          step.momentum = 0;  // U = G
          o[b] = ref::muon_update(w.data(), g.data(), m.data(), rows, cols, step);
          for (size_t i = 0; i < n; i++) x.data()[b * n + i] = (float)g[i];
        }
        be.newton_schulz(
            {x.data(), next.data(), gram.data(), gram2.data(), poly.data(), rows, cols, count});
        for (int b = 0; b < count; b++) {
          SCOPED_TRACE(testing::Message() << rows << "x" << cols << ", " << count
                                          << " at once, round " << round << ", matrix " << b);
          const std::vector<double> of(x.data() + b * n, x.data() + (b + 1) * n);
          ASSERT_EQ(std::count_if(of.begin(), of.end(), [](double v) { return std::isfinite(v); }),
                    (long)n);  // (max_rel_error passes over a NaN)
          EXPECT_LT(test::max_rel_error(of, o[b]), 0.1);
          const auto [largest, smallest] = singular_extremes(of, rows, cols);
          EXPECT_GT(smallest, 0.5);
          EXPECT_LT(largest, 1.5);
        }
      }
  }
}

// One Muon step of a small model (grouped-query c_attn, so its q, k and v blocks differ in shape;
// gated-attn's c_gate on one layer; tall c_fc and wide c_proj), from the same weights and batch:
// every hidden matrix as ref::muon_update computes it from the step's gradient, clipped as the
// step clips it; every other tensor as AdamW's float64 reference updates it, its AdamW moments
// written and the matrices' left at zero; Muon's momentum (1 − β)·g. Tolerance: the matrices'
// change within 3e-3 of its largest entry (O's float error, check_muon's bound for these
// shapes), the rest within 1e-6 of the learning rate (AdamW's float update).
TEST(Recipe, OneMuonStepMatchesTheSpecMatrixByMatrix) {
  ModelConfig cfg;
  cfg.vocab_size = 50, cfg.padded_vocab = pad_vocab(50);
  cfg.n_layer = 2, cfg.n_head = 4, cfg.n_kv_head = 2, cfg.n_embd = 32, cfg.seq_len = 16;
  set_attention(cfg, "sa,xsa+gated-attn");
  cfg.mlp = MlpActivation::relu2, cfg.logit_softcap = 10;
  const int B = 2, T = 16, N = B * T;
  std::vector<int32_t> inputs(N), targets(N);
  Rng rng(4);
  for (int i = 0; i < N; i++)
    inputs[i] = (int32_t)(rng.next_u64() % 50), targets[i] = (int32_t)(rng.next_u64() % 50);

  // The step's gradient, from a twin.
  Gpt<float> twin(cfg, B, T);
  twin.params().init(cfg, 9);
  twin.forward_backward(inputs.data(), targets.data());
  const ParamArena<float>& ta = twin.params();
  const std::vector<double> w0(ta.params.data(), ta.params.data() + ta.params.size()),
      grad(ta.grads.data(), ta.grads.data() + ta.grads.size());
  double squares = 0;
  for (double g : grad) squares += g * g;
  const double clip = 0.5, norm = std::sqrt(squares), scale = norm > clip ? clip / norm : 1.0;

  Gpt<float> model(cfg, B, T);
  model.params().init(cfg, 9);
  OptimizerSettings settings;
  settings.grad_clip = clip, settings.muon = true, settings.muon_lr = 0.02;
  settings.muon_momentum = 0.95, settings.peak_lr = 1e-3;
  TrainStep step(model, settings);
  step.run(inputs.data(), targets.data(), 1e-3, 1);
  const ParamArena<float>& a = model.params();

  const int C = cfg.n_embd, Ck = cfg.kv_heads() * cfg.head_dim();
  int matrices = 0;
  for (const TensorInfo& t : a.layout) {
    SCOPED_TRACE(t.name);
    const size_t at = t.offset;
    if (!is_hidden_matrix(t.name)) {
      std::vector<double> p(w0.begin() + at, w0.begin() + at + t.numel), m(t.numel, 0.0),
          v(t.numel, 0.0);
      ops::AdamWSettings s{1e-3, 0.9, 0.95, 1e-8, t.decay ? 0.1 : 0.0, scale, 1};
      ref::adamw_update(p.data(), grad.data() + at, m.data(), v.data(), t.numel, s);
      for (size_t i = 0; i < t.numel; i++)  // float's roundings of p and its update: 4u of |p|
        ASSERT_NEAR(a.params.data()[at + i], p[i],
                    4 * test::kFloatRoundoff * std::fabs(p[i]) + 1e-9)
            << i;
      continue;
    }
    const int cols = (int)t.shape[1];
    std::vector<int> blocks = {(int)t.shape[0]};
    if (t.name.find("c_attn") != std::string::npos) blocks = {C, Ck, Ck};
    size_t start = at;
    for (int rows : blocks) {
      matrices++;
      const size_t n = (size_t)rows * cols;
      std::vector<double> w(w0.begin() + start, w0.begin() + start + n), m(n, 0.0);
      ref::MuonStep s;
      s.lr = 0.02, s.weight_decay = 0.1, s.momentum = 0.95, s.grad_scale = scale;
      ref::muon_update(w.data(), grad.data() + start, m.data(), rows, cols, s);
      double largest = 0;
      for (size_t i = 0; i < n; i++) largest = std::max(largest, std::fabs(w[i] - w0[start + i]));
      for (size_t i = 0; i < n; i++) {
        ASSERT_NEAR(a.params.data()[start + i], w[i], 3e-3 * largest)
            << rows << "x" << cols << " " << i;
        ASSERT_NEAR(a.muon_m.data()[start + i], m[i], 1e-6 * std::fabs(m[i]) + 1e-12);
        ASSERT_EQ(a.adam_m.data()[start + i], 0.0f);  // AdamW's moments never touched
      }
      start += n;
    }
  }
  EXPECT_EQ(matrices, 2 * 3 + 2 * 3 + 1);  // per layer q, k, v, c_proj, c_fc, mlp c_proj; a c_gate
}

// ReLU² and the soft-capped cross-entropy (the double kernels and the references) against central
// differences of their own forward, step 1e-6 in double (truncation and rounding ~1e-10):
// Σ dout · relu2(x) away from the kink at 0, and Σ_n loss_n of capped logits, dloss 1.
TEST(Recipe, Relu2AndSoftcapMatchFiniteDifferences) {
  const size_t n = 257;
  std::vector<double> x = test::random_vector(n, 5), dout = test::random_vector(n, 6);
  for (double& v : x)
    if (std::fabs(v) < 1e-3) v = 0.5;
  std::vector<double> din(n), ref_din(n);
  ops::relu2_backward(din.data(), x.data(), dout.data(), n);
  ref::relu2_backward(ref_din.data(), x.data(), dout.data(), n);
  auto relu2_sum = [&](std::vector<double> at) {
    std::vector<double> out(n);
    ops::relu2_forward(out.data(), at.data(), n);
    double s = 0;
    for (size_t i = 0; i < n; i++) s += dout[i] * out[i];
    return s;
  };
  const double h = 1e-6;
  for (size_t i = 0; i < n; i++) {
    std::vector<double> up = x, down = x;
    up[i] += h, down[i] -= h;
    const double numeric = (relu2_sum(up) - relu2_sum(down)) / (2 * h);
    EXPECT_NEAR(din[i], numeric, 1e-7 * (1 + std::fabs(numeric))) << i;
    EXPECT_NEAR(ref_din[i], din[i], 1e-15 * (1 + std::fabs(din[i]))) << i;
  }

  const int N = 4, V = 10, Vp = 16;
  const double cap = 2.0;  // logits of scale 3: well into the cap's bend
  const std::vector<double> logits = test::random_vector((size_t)N * Vp, 7, 3);
  const std::vector<int32_t> targets = {3, -1, 0, 9};
  auto total_loss = [&](std::vector<double> l) {
    std::vector<double> losses(N);
    ops::crossentropy_softcap(l.data(), losses.data(), targets.data(), N, V, Vp, 0.0, cap);
    double s = 0;
    for (double v : losses) s += v;
    return s;
  };
  std::vector<double> grad = logits, ref_grad = logits, losses(N), ref_losses(N);
  ops::crossentropy_softcap(grad.data(), losses.data(), targets.data(), N, V, Vp, 1.0, cap);
  ref::crossentropy_softcap(ref_grad.data(), ref_losses.data(), targets.data(), N, V, Vp, 1.0, cap);
  for (int r = 0; r < N; r++) EXPECT_NEAR(losses[r], ref_losses[r], 1e-13) << r;
  for (size_t i = 0; i < logits.size(); i++) {
    std::vector<double> up = logits, down = logits;
    up[i] += h, down[i] -= h;
    const double numeric = (total_loss(up) - total_loss(down)) / (2 * h);
    EXPECT_NEAR(grad[i], numeric, 1e-8) << i;
    EXPECT_NEAR(ref_grad[i], grad[i], 1e-14) << i;
  }
}

}  // namespace
}  // namespace xsa

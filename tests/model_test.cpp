// The whole model's gradient, in double precision through the same code that trains in float,
// against central finite differences of its loss; SA, XSA and a per-layer mix. And the twin
// property: SA and XSA from one seed start from identical weights.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "bounds.h"
#include "test_util.h"
#include "xsa/model/gpt.h"
#include "xsa/ops/ops.h"
#include "xsa/util/error.h"

namespace xsa {
namespace {

// attn as in --attn; a "gqa:" prefix gives the model one key/value head for its two query heads,
// a "gpt2:" prefix the GPT-2 architecture (learned positions, linear biases), "relu2:" a ReLU² MLP
// and "cap:" logits soft-capped at 3 (docs/SPEC.md §11).
ModelConfig small_config(std::string attn) {
  ModelConfig cfg;
  if (attn.rfind("relu2:", 0) == 0) cfg.mlp = MlpActivation::relu2, attn = attn.substr(6);
  if (attn.rfind("cap:", 0) == 0) cfg.logit_softcap = 3, attn = attn.substr(4);
  if (attn.rfind("gpt2:", 0) == 0) set_architecture(cfg, "gpt2"), attn = attn.substr(5);
  if (attn.rfind("gqa:", 0) == 0) cfg.n_kv_head = 1, attn = attn.substr(4);
  cfg.vocab_size = 50;  // padded to 64: padded rows must stay out of the loss
  cfg.padded_vocab = pad_vocab(cfg.vocab_size);
  cfg.n_layer = 2, cfg.n_head = 2, cfg.n_embd = 16, cfg.seq_len = 8;
  set_attention(cfg, attn);
  return cfg;
}

void fill_batch(std::vector<int32_t>& inputs, std::vector<int32_t>& targets, int B, int T, int V) {
  Rng rng(42);
  inputs.resize(B * T), targets.resize(B * T);
  for (int i = 0; i < B * T; i++) inputs[i] = rng.next_u64() % V, targets[i] = rng.next_u64() % V;
  targets[3] = -1;  // an ignored position
}

class GradCheck : public ::testing::TestWithParam<std::string> {};

// Central differences with step 1e-5 in double: truncation ~1e-10, rounding ~1e-11, so a
// relative agreement of 1e-6 cannot happen by accident and cannot be missed by a correct gradient.
TEST_P(GradCheck, WholeModelGradientMatchesFiniteDifferences) {
  const ModelConfig cfg = small_config(GetParam());
  const int B = 2, T = 7;
  Gpt<double> model(cfg, B, T);
  ParamArena<double>& arena = model.params();
  arena.init(cfg, 7);
  // Perturb LayerNorm parameters away from 1/0 so their gradients are exercised generically.
  Rng rng(3);
  for (const TensorInfo& t : arena.layout)
    if (t.init == Init::ones || t.init == Init::zeros)
      for (size_t i = 0; i < t.numel; i++) arena.params.data()[t.offset + i] += 0.1 * rng.normal();
  // Larger weights than at init, so attention is not uniform and XSA's projection matters.
  for (size_t i = 0; i < arena.params.size(); i++) arena.params.data()[i] *= 5;
  std::vector<int32_t> inputs, targets;
  fill_batch(inputs, targets, B, T, cfg.vocab_size);

  model.forward_backward(inputs.data(), targets.data());
  std::vector<double> grad(arena.grads.data(), arena.grads.data() + arena.grads.size());
  auto loss_at = [&](size_t i, double value) {
    double keep = arena.params.data()[i];
    arena.params.data()[i] = value;
    double loss = model.forward(inputs.data(), targets.data());
    arena.params.data()[i] = keep;
    return loss;
  };
  // ReLU² is C¹ but not C² at 0: central differences across its kink err by O(h) rather than
  // O(h²), so there a smaller step (rounding still ~1e-10 at 1e-6).
  const double h = cfg.mlp == MlpActivation::relu2 ? 1e-6 : 1e-5;
  for (const TensorInfo& t : arena.layout) {
    double scale = 0;
    for (size_t i = 0; i < t.numel; i++) scale = std::max(scale, std::fabs(grad[t.offset + i]));
    // 12 coordinates per tensor, spread over it, plus the first and the last.
    for (int k = 0; k < 14; k++) {
      size_t i = k == 0 ? 0 : k == 13 ? t.numel - 1 : (size_t)(rng.next_u64() % t.numel);
      if (t.name == "transformer.wte.weight")
        i %= (size_t)cfg.vocab_size * cfg.n_embd;  // real rows
      size_t at = t.offset + i;
      double numeric =
          (loss_at(at, arena.params.data()[at] + h) - loss_at(at, arena.params.data()[at] - h)) /
          (2 * h);
      EXPECT_NEAR(grad[at], numeric, 1e-6 * scale + 1e-10) << t.name << "[" << i << "]";
    }
  }
  // All coordinates at once: the directional derivative along a random direction.
  std::vector<double> dir = test::random_vector(arena.params.size(), 11);
  double dir_norm = 0;
  for (double d : dir) dir_norm += d * d;
  for (double& d : dir) d /= std::sqrt(dir_norm);  // a unit step, so h bounds the perturbation
  std::vector<double> base(arena.params.data(), arena.params.data() + arena.params.size());
  auto loss_along = [&](double s) {
    for (size_t i = 0; i < base.size(); i++) arena.params.data()[i] = base[i] + s * dir[i];
    return model.forward(inputs.data(), targets.data());
  };
  double numeric = (loss_along(h) - loss_along(-h)) / (2 * h);
  double analytic = 0;
  for (const TensorInfo& t : arena.layout)
    for (size_t i = 0; i < t.numel; i++) analytic += grad[t.offset + i] * dir[t.offset + i];
  EXPECT_NEAR(analytic, numeric, 1e-6 * std::fabs(numeric));
  // Padded vocabulary rows never receive gradient.
  const TensorInfo& wte = arena.layout[0];
  for (size_t i = (size_t)cfg.vocab_size * cfg.n_embd; i < wte.numel; i++)
    ASSERT_EQ(grad[wte.offset + i], 0.0);
}

INSTANTIATE_TEST_SUITE_P(
    Attention, GradCheck,
    ::testing::Values("sa", "xsa", "sa,xsa", "xsa-gated", "xsa-gated,sa", "xsa+sink",
                      "sa+sink,xsa-gated", "gqa:xsa", "gqa:sa,xsa-gated+sink", "gpt2:sa",
                      "gpt2:xsa", "gpt2:gqa:sa,xsa-gated+sink",
                      // XSA's rivals (docs/SPEC.md §8), alone and with XSA
                      "sa+gated-attn", "xsa+gated-attn", "sa,xsa+gated-attn", "sa+value-residual",
                      "xsa+value-residual", "sa+no-self", "xsa+no-self", "sa+sink+no-self",
                      "gqa:xsa-gated+sink+gated-attn+value-residual+no-self",
                      "gpt2:xsa+gated-attn+value-residual",
                      // a rival on one layer only
                      "sa+no-self,xsa", "sa,xsa+value-residual",
                      "gated-attn+sink,xsa-gated+value-residual",
                      // QK-norm: alone, with GQA, on one layer, without RoPE
                      // and with a qkv bias (gpt2), with the rivals
                      "xsa+qk-norm", "gqa:sa+qk-norm,xsa-gated+qk-norm", "sa+qk-norm,xsa",
                      "gpt2:xsa+qk-norm", "xsa+qk-norm+value-residual+gated-attn",
                      // the recipe's MLP and head (docs/SPEC.md §11), alone and together
                      "relu2:xsa", "cap:sa", "relu2:cap:xsa+qk-norm+gated-attn",
                      // value embeddings: alone, with GQA and the value residual (layer 0's v_0
                      // holds its embedding), on one layer, with a qkv bias (gpt2)
                      "xsa+value-embed", "gqa:sa+value-embed+value-residual,xsa-gated+value-embed",
                      "sa,xsa+value-embed", "gpt2:xsa+value-embed+qk-norm"),
    [](const auto& info) {
      std::string s = info.param;
      for (char& c : s) c = std::isalnum((unsigned char)c) ? c : '_';
      return s;
    });

TEST(Twins, SaAndXsaFromOneSeedStartIdentical) {
  const ModelConfig sa = small_config("sa"), xsa = small_config("xsa");
  Gpt<float> a(sa, 2, 8), b(xsa, 2, 8);
  a.params().init(sa, 1234);
  b.params().init(xsa, 1234);
  ASSERT_EQ(a.params().params.size(), b.params().params.size());
  EXPECT_EQ(0, std::memcmp(a.params().params.data(), b.params().params.data(),
                           sizeof(float) * a.params().params.size()));
  // ... and they are different models: the same batch gives different losses.
  std::vector<int32_t> inputs, targets;
  fill_batch(inputs, targets, 2, 8, sa.vocab_size);
  EXPECT_NE(a.forward(inputs.data(), targets.data()), b.forward(inputs.data(), targets.data()));
  // Another seed gives other weights.
  b.params().init(xsa, 1235);
  EXPECT_NE(0, std::memcmp(a.params().params.data(), b.params().params.data(),
                           sizeof(float) * a.params().params.size()));
}

// The training step scales the loss by the target tokens of the whole step, passed in: a batch
// split into micro-batches that accumulate gradients (as processes whose gradients are summed)
// gives the gradients and loss of the whole batch, though the halves hold different numbers of
// target tokens.
TEST(Model, MicroBatchesScaledByTheStepsTokensSumToTheWholeBatch) {
  for (const char* attn : {"sa", "xsa-gated+sink"}) {
    SCOPED_TRACE(attn);
    const ModelConfig cfg = small_config(attn);
    const int B = 4, T = 7, half = (B / 2) * T;
    Gpt<double> whole(cfg, B, T), part(cfg, B / 2, T);
    whole.params().init(cfg, 5);
    part.params().init(cfg, 5);
    std::vector<int32_t> inputs, targets;
    fill_batch(inputs, targets, B, T, cfg.vocab_size);
    targets[half + 1] = targets[half + 2] = -1;  // the second half scores fewer tokens
    int64_t tokens = 0;
    for (int32_t t : targets) tokens += t >= 0;
    const double loss = whole.forward_backward(inputs.data(), targets.data());
    double sum = part.forward_backward(inputs.data(), targets.data(), tokens);
    sum += part.forward_backward(inputs.data() + half, targets.data() + half, tokens,
                                 /*accumulate=*/true);
    // The same arithmetic in double with the batch's sums split in two: within the model's chain
    // bounds at float64's roundoff (tests/bounds.h), the loss relative to itself, each gradient
    // entry relative to its tensor's norm.
    const test::ModelChain chain = test::model_chain(cfg, B, T);
    const double u = test::kDoubleRoundoff;
    EXPECT_NEAR(sum, loss, test::chain_error(chain.forward, u) * std::fabs(loss));
    const ParamArena<double>&a = whole.params(), &b = part.params();
    for (const TensorInfo& t : a.layout) {
      std::vector<double> ga(a.grads.data() + t.offset, a.grads.data() + t.offset + t.numel),
          gb(b.grads.data() + t.offset, b.grads.data() + t.offset + t.numel);
      double norm = 0;
      for (double g : ga) norm += g * g;
      const double e = test::chain_error(chain.forward + chain.backward, u) * std::sqrt(norm);
      EXPECT_TRUE(test::within(gb, ga, std::vector<double>(t.numel, e), t.name.c_str()));
    }
    std::vector<double> ga(a.grads.data(), a.grads.data() + a.grads.size());
    // Scaled by each half's own count instead, the sum is not the whole batch's gradient.
    part.forward_backward(inputs.data(), targets.data());
    part.forward_backward(inputs.data() + half, targets.data() + half, 0, /*accumulate=*/true);
    std::vector<double> gc(b.grads.data(), b.grads.data() + b.grads.size());
    EXPECT_GT(test::max_rel_error(gc, ga), 1e-3);
  }
}

// A step's first micro-batch overwrites the gradients its products form (the layers' matrices, the
// tied embedding) and zeroes the rest instead of zeroing all and accumulating: whatever the
// gradient buffer held before (NaN here) leaves no trace, to the bit, in fp32 and with bf16
// products. A first micro-batch without targets leaves every gradient zero.
TEST(Model, AFirstMicroBatchReplacesWhatTheGradientsHeld) {
  std::vector<Backend<float>*> backends = {&cpu_backend<float>()};
  if (bf16_products_available(nullptr)) backends.push_back(&cpu_backend(Precision::bf16));
  for (Backend<float>* backend : backends)
    for (const char* attn : {"sa", "gpt2:xsa", "xsa-gated+sink", "gqa:xsa"}) {
      SCOPED_TRACE(testing::Message() << attn << (backend == backends[0] ? "" : ", bf16"));
      const ModelConfig cfg = small_config(attn);
      const int B = 3, T = 7;
      Gpt<float> model(cfg, B, T, GptMode::training, *backend);
      model.params().init(cfg, 9);
      std::vector<int32_t> inputs, targets;
      fill_batch(inputs, targets, B, T, cfg.vocab_size);
      DeviceBuffer<float>& grads = model.params().grads;
      const float loss = (float)model.forward_backward(inputs.data(), targets.data());
      const std::vector<float> fresh(grads.data(), grads.data() + grads.size());
      std::fill(grads.data(), grads.data() + grads.size(), std::nanf(""));
      EXPECT_EQ((float)model.forward_backward(inputs.data(), targets.data()), loss);
      const std::vector<float> again(grads.data(), grads.data() + grads.size());
      ASSERT_EQ(0, std::memcmp(fresh.data(), again.data(), sizeof(float) * fresh.size()));
      // No targets in this micro-batch (the step's count comes from the others): no gradient.
      std::vector<int32_t> none(targets.size(), -1);
      std::fill(grads.data(), grads.data() + grads.size(), std::nanf(""));
      model.forward_backward(inputs.data(), none.data(), /*loss_tokens=*/10);
      for (size_t i = 0; i < grads.size(); i++) ASSERT_EQ(grads.data()[i], 0.0f) << i;
    }
}

TEST(Model, InitMatchesSpec) {
  const ModelConfig cfg = small_config("xsa+gated-attn+value-residual");
  ParamArena<double> arena(cfg);
  arena.init(cfg, 5);
  for (const TensorInfo& t : arena.layout) {
    const double* p = arena.params.data() + t.offset;
    size_t n = t.name == "transformer.wte.weight" ? (size_t)cfg.vocab_size * cfg.n_embd : t.numel;
    double sum = 0, sq = 0;
    for (size_t i = 0; i < n; i++) sum += p[i], sq += p[i] * p[i];
    double mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
    switch (t.init) {
      case Init::ones:
        EXPECT_EQ(mean, 1.0) << t.name;
        break;
      case Init::zeros:
        EXPECT_EQ(sq, 0.0) << t.name;
        break;
      case Init::half:  // value-residual's λ
        EXPECT_EQ(mean, 0.5) << t.name;
        EXPECT_EQ(sq, 0.25 * n) << t.name;
        break;
      // A sample's standard deviation over n draws has a standard error of σ/√(2n): within five
      // of them (the draws are seeded; this holds for any seed but one in a million).
      case Init::normal:
        EXPECT_NEAR(sd, 0.02, 5 * 0.02 / std::sqrt(2.0 * n)) << t.name;
        break;
      case Init::normal_residual: {
        const double sigma = 0.02 / std::sqrt(2.0 * cfg.n_layer);
        EXPECT_NEAR(sd, sigma, 5 * sigma / std::sqrt(2.0 * n)) << t.name;
        break;
      }
    }
    EXPECT_EQ(t.decay, t.shape.size() == 2) << t.name << ": weight decay on 2-D matrices only";
  }
  for (size_t i = (size_t)cfg.vocab_size * cfg.n_embd; i < arena.layout[0].numel; i++)
    ASSERT_EQ(arena.params.data()[i], 0.0) << "padded vocabulary rows start at zero";
}

TEST(Model, ImpossibleConfigIsAnErrorNotACrash) {
  ModelConfig cfg = small_config("sa");
  cfg.n_layer = -1;
  EXPECT_THROW(Gpt<float>(cfg, 1, 4), Error);
  cfg = small_config("sa");
  cfg.n_head = 3;  // 16 % 3 != 0
  EXPECT_THROW(Gpt<float>(cfg, 1, 4), Error);
  EXPECT_THROW(Gpt<float>(small_config("sa"), 1, 9), Error);  // T above the model's context
}

// config.json with a value of the wrong type or an absurd size is an Error naming the file (found
// while fuzzing, fuzz/fuzz_model_config.cpp): not nlohmann's type_error, not a size cut to int or
// a model of terabytes.
TEST(Model, MalformedConfigJsonIsNamed) {
  nlohmann::json good;
  to_json(good, small_config("xsa"));
  EXPECT_EQ(attention_string(model_config_from_json(good, "c.json")), "xsa");
  auto err_with = [&](const char* key, const nlohmann::json& value) {
    nlohmann::json j = good;
    j[key] = value;
    try {
      model_config_from_json(j, "c.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(err_with("format", 5).find("c.json: 'format'"), std::string::npos);
  EXPECT_NE(err_with("n_layer", 4294967298).find("c.json: 'n_layer'"), std::string::npos);
  EXPECT_NE(err_with("n_embd", 1 << 20).find("c.json: --embd 1048576 is more"), std::string::npos);
  EXPECT_NE(err_with("seq_len", 1 << 30).find("c.json: --seq-len"), std::string::npos);
}

TEST(Model, ForwardIsDeterministic) {
  const ModelConfig cfg = small_config("xsa");
  Gpt<float> model(cfg, 2, 8);
  model.params().init(cfg, 9);
  std::vector<int32_t> inputs, targets;
  fill_batch(inputs, targets, 2, 8, cfg.vocab_size);
  double l1 = model.forward_backward(inputs.data(), targets.data());
  std::vector<float> g1(model.params().grads.data(),
                        model.params().grads.data() + model.params().grads.size());
  double l2 = model.forward_backward(inputs.data(), targets.data());
  EXPECT_EQ(l1, l2);
  EXPECT_EQ(0, std::memcmp(g1.data(), model.params().grads.data(), sizeof(float) * g1.size()));
}

}  // namespace
}  // namespace xsa

namespace xsa {
namespace {

// A 50-step AdamW run in double precision (whose kernels match the float64 references, ops_test),
// far from the initial weights by its end; at every step the float model takes its weights
// (rounded to float) and gives the loss and every gradient entry within the chain bounds of float
// rounding (tests/bounds.h): the loss relative to itself, a gradient entry relative to its
// tensor's norm. Each step starts from the double run's state, so that no step's rounding feeds
// the next one's: what is checked is the float arithmetic on trained weights, step by step.
TEST(Model, FloatStepsTrackDoubleOver50Steps) {
  for (const char* attn : {"sa", "xsa"}) {
    SCOPED_TRACE(attn);
    ModelConfig cfg;
    cfg.n_layer = 2, cfg.n_head = 4, cfg.n_embd = 64, cfg.seq_len = 64;
    set_attention(cfg, attn);
    const int B = 4, T = 64;
    Gpt<float> f(cfg, B, T);
    Gpt<double> d(cfg, B, T);
    f.params().init(cfg, 1);
    for (size_t i = 0; i < f.params().params.size(); i++)
      d.params().params.data()[i] = f.params().params.data()[i];
    const test::ModelChain chain = test::model_chain(cfg, B, T);
    const double u = test::kFloatRoundoff, loss_bound = test::chain_error(chain.forward, u),
                 grad_bound = test::chain_error(chain.forward + chain.backward, u);
    std::vector<int32_t> inputs(B * T), targets(B * T);
    for (int step = 1; step <= 50; step++) {
      SCOPED_TRACE(testing::Message() << "step " << step);
      // A small repeating corpus, so the loss falls and the weights move far from init.
      for (int i = 0; i < B * T; i++)
        inputs[i] = (i * 7 + step % 4) % 61, targets[i] = (inputs[i] * 3 + 1) % 61;
      ParamArena<float>& fa = f.params();
      ParamArena<double>& da = d.params();
      for (size_t i = 0; i < da.params.size(); i++)
        fa.params.data()[i] = (float)da.params.data()[i];
      const double lf = f.forward_backward(inputs.data(), targets.data());
      const double ld = d.forward_backward(inputs.data(), targets.data());
      EXPECT_NEAR(lf, ld, loss_bound * ld) << "loss";
      for (const TensorInfo& t : da.layout) {
        std::vector<double> want(da.grads.data() + t.offset, da.grads.data() + t.offset + t.numel),
            got(fa.grads.data() + t.offset, fa.grads.data() + t.offset + t.numel);
        double norm = 0;
        for (double g : want) norm += g * g;
        EXPECT_TRUE(test::within(
            got, want, std::vector<double>(t.numel, grad_bound * std::sqrt(norm)), t.name.c_str()));
      }
      ops::AdamWSettings s{3e-3, 0.9, 0.95, 1e-8, 0.0, 1.0, step};
      for (const TensorInfo& t : da.layout) {
        s.weight_decay = t.decay ? 0.1 : 0.0;
        ops::adamw_update(da.params.data() + t.offset, da.grads.data() + t.offset,
                          da.adam_m.data() + t.offset, da.adam_v.data() + t.offset, t.numel, s);
      }
      if (step == 50) {
        EXPECT_LT(ld, 3.0) << "the model did not learn: the check would be too easy";
      }
    }
  }
}

}  // namespace
}  // namespace xsa

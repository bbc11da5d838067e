// The whole model, forward, backward and AdamW, against an independent PyTorch implementation
// (tests/data/pytorch_tiny.json, docs/SPEC.md §5) on the `tiny` configuration, in float32 and
// float64, SA and XSA. Weights and batch are rebuilt from the file's hash formulas. Every bound is
// derived (tests/bounds.h): from the roundoff, the lengths of the model's sums and AdamW's response
// to its gradients' errors.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "bounds.h"
#include "xsa/model/gpt.h"
#include "xsa/ops/ops.h"

namespace xsa {
namespace {

using nlohmann::json;

json load_golden() {
  std::ifstream in(std::string(XSA_TEST_DATA_DIR) + "/pytorch_tiny.json");
  return json::parse(in);
}

uint32_t lowbias32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

// Golden names ("h.0.attn.W_qkv", layout [in, out]) to ours ("transformer.h.0.attn.c_attn.weight",
// [out, in]).
std::string our_name(const std::string& g) {
  std::string s = g;
  auto replace = [&](const std::string& from, const std::string& to) {
    if (auto p = s.find(from); p != std::string::npos) s.replace(p, from.size(), to);
  };
  replace("attn.W_qkv", "attn.c_attn.weight");
  replace("attn.W_o", "attn.c_proj.weight");
  replace("mlp.W_fc", "mlp.c_fc.weight");
  replace("mlp.W_proj", "mlp.c_proj.weight");
  if (s == "wte") s = "wte.weight";
  return "transformer." + s;
}
bool is_transposed(const std::string& g) {
  return g.find(".W_") != std::string::npos;
}

template <typename Real>
struct GoldenModel {
  ModelConfig cfg;
  std::unique_ptr<Gpt<Real>> model;
  std::vector<int32_t> inputs, targets;
  std::map<std::string, const TensorInfo*> info;  // by golden name

  GoldenModel(const json& golden, AttnKind attn) {
    const json& c = golden["cfg"];
    cfg.vocab_size = cfg.padded_vocab = c["V"];
    cfg.n_layer = c["L"], cfg.n_head = c["H"], cfg.n_embd = c["C"], cfg.seq_len = c["T"];
    for (LayerAttention& a : cfg.attention) a.kind = attn;
    const int B = c["B"], T = c["T"], V = c["V"];
    model = std::make_unique<Gpt<Real>>(cfg, B, T);
    ParamArena<Real>& arena = model->params();
    std::map<std::string, const TensorInfo*> by_ours;
    for (const TensorInfo& t : arena.layout) by_ours[t.name] = &t;
    const auto& order = golden["param_order"];
    for (size_t i = 0; i < order.size(); i++) {
      std::string g = order[i];
      const TensorInfo* t = by_ours.at(our_name(g));
      info[g] = t;
      Real* p = arena.params.data() + t->offset;
      if (g.find("ln_") != std::string::npos) {
        bool weight = g.find("weight") != std::string::npos;
        for (size_t j = 0; j < t->numel; j++) p[j] = weight ? 1 : 0;
        continue;
      }
      bool residual = g.find("W_o") != std::string::npos || g.find("W_proj") != std::string::npos;
      double std_dev = residual ? 0.02 / std::sqrt(2.0 * cfg.n_layer) : 0.02;
      for (size_t j = 0; j < t->numel; j++) {
        uint32_t h = lowbias32((uint32_t)(j + i * 0x9E3779B9ull));
        double u = (h >> 8) / 16777216.0;
        Real w = (Real)((2 * u - 1) * std_dev * std::sqrt(3.0));
        p[our_index(g, j)] = w;
      }
    }
    inputs.resize(B * T), targets.resize(B * T);
    for (int b = 0; b < B; b++)
      for (int t = 0; t <= T; t++) {
        uint32_t tok = lowbias32((uint32_t)(b * (T + 1) + t + 1000ull * 0x9E3779B9ull)) % V;
        if (t < T) inputs[b * T + t] = tok;
        if (t > 0) targets[b * T + t - 1] = tok;
      }
  }
  // Flat index j of the golden [in, out] layout → our [out, in] layout.
  size_t our_index(const std::string& g, size_t j) const {
    if (!is_transposed(g)) return j;
    const TensorInfo* t = info.at(g);
    size_t out = t->shape[0], in = t->shape[1];
    size_t r = j / out, c = j % out;  // golden row r (input), column c (output)
    (void)in;
    return c * t->shape[1] + r;
  }
  const Real* grad(const std::string& g) const {
    return model->params().grads.data() + info.at(g)->offset;
  }
  const Real* param(const std::string& g) const {
    return model->params().params.data() + info.at(g)->offset;
  }
};

struct Case {
  const char* key;  // sa_float32, ...
  AttnKind attn;
  bool use_double;
};

class GoldenTest : public ::testing::TestWithParam<Case> {};

// The reference's float64 values for the case (sa_float32 → sa_float64).
const json& float64_reference(const json& golden, const Case& tc) {
  std::string key = tc.key;
  return golden[key.substr(0, key.find('_')) + "_float64"];
}

// The bounds of a model-level quantity computed in arithmetic of roundoff u (tests/bounds.h): the
// forward's chain (loss, logits) and the backward's (gradients), each relative to the scale of what
// is compared.
struct GoldenBounds {
  double forward, gradient;
  GoldenBounds(const ModelConfig& cfg, int B, int T, double u) {
    const test::ModelChain chain = test::model_chain(cfg, B, T);
    forward = test::chain_error(chain.forward, u);
    gradient = test::chain_error(chain.forward + chain.backward, u);
  }
};

// Loss, the first logits and the gradients at the initial weights, against the reference's float64
// values within the chain bounds: the loss relative to itself (every magnitude on the way to it,
// the logits' log-sum-exp among them, is at most its own), the logits relative to the largest of
// them, a gradient's norm relative to itself and each entry relative to its tensor's norm.
template <typename Real>
void check_initial_step(GoldenModel<Real>& gm, const json& want, const GoldenBounds& bound,
                        const char* who) {
  SCOPED_TRACE(who);
  const double loss = gm.model->forward_backward(gm.inputs.data(), gm.targets.data());
  const double want_loss = want["loss_init"].template get<double>();
  EXPECT_NEAR(loss, want_loss, bound.forward * std::fabs(want_loss)) << "loss at init";
  std::vector<Real> logits(gm.cfg.padded_vocab);
  gm.model->logits_row(0, logits.data());
  const auto& want_logits = want["logits_init_b0_t0_first8"];
  double logit_scale = 0;
  for (const auto& x : want_logits) logit_scale = std::max(logit_scale, std::fabs(x.get<double>()));
  for (int i = 0; i < 8; i++)
    EXPECT_NEAR(logits[i], want_logits[i].template get<double>(), bound.forward * logit_scale)
        << "logit " << i;
  double total_sq = 0;
  for (auto& [g, expected_norm] : want["grad_norms"].items()) {
    const TensorInfo* t = gm.info.at(g);
    double sq = 0;
    for (size_t j = 0; j < t->numel; j++) sq += (double)gm.grad(g)[j] * gm.grad(g)[j];
    total_sq += sq;
    const double norm = std::sqrt(sq), norm_want = expected_norm.template get<double>();
    EXPECT_NEAR(norm, norm_want, bound.gradient * norm_want) << "grad norm of " << g;
    const auto& first = want["grad_first4"][g];
    for (int j = 0; j < 4; j++)
      EXPECT_NEAR(gm.grad(g)[gm.our_index(g, j)], first[j].template get<double>(),
                  bound.gradient * norm_want)
          << g << "[" << j << "]";
  }
  const double total_want = want["grad_norm_total"].template get<double>();
  EXPECT_NEAR(std::sqrt(total_sq), total_want, bound.gradient * total_want) << "total grad norm";
}

// AdamW with the reference's settings: lr 1e-3 constant, weight decay 0.1 on matrices, no clipping.
template <typename Real>
void adamw_step(GoldenModel<Real>& gm, int step) {
  ParamArena<Real>& arena = gm.model->params();
  ops::AdamWSettings s{1e-3, 0.9, 0.95, 1e-8, 0.0, 1.0, step};
  for (const TensorInfo& t : arena.layout) {
    s.weight_decay = t.decay ? 0.1 : 0.0;
    ops::adamw_update(arena.params.data() + t.offset, arena.grads.data() + t.offset,
                      arena.adam_m.data() + t.offset, arena.adam_v.data() + t.offset, t.numel, s);
  }
}

// Float64: the same arithmetic as PyTorch's float64, each rounding at 2^-53 in its own order. Five
// AdamW steps run free; a weight after them is bounded by AdamW's response, step by step, to its
// gradients' bound (tests/bounds.h: adam_update_sensitivity) plus its own roundings.
void run_golden_float64(const json& golden, const Case& tc) {
  const json& ref = golden[tc.key];
  GoldenModel<double> gm(golden, tc.attn);
  for (int i = 0; i < 16; i++)
    ASSERT_EQ(gm.inputs[i], golden["batch_x_row0_first16"][i].template get<int>()) << "batch hash";
  const double u = test::kDoubleRoundoff;
  const GoldenBounds bound(gm.cfg, (int)gm.inputs.size() / gm.cfg.seq_len, gm.cfg.seq_len, u);
  check_initial_step(gm, ref, bound, "initial step against PyTorch float64");
  ParamArena<double>& arena = gm.model->params();
  std::vector<double> weight_bound(arena.params.size(), 0.0);
  const auto& losses = ref["losses"];
  for (int step = 1; step <= 5; step++) {
    for (const TensorInfo& t : arena.layout) {
      double norm = 0;
      for (size_t j = 0; j < t.numel; j++)
        norm += arena.grads.data()[t.offset + j] * arena.grads.data()[t.offset + j];
      const double e = bound.gradient * std::sqrt(norm);
      for (size_t j = 0; j < t.numel; j++) {
        const size_t i = t.offset + j;
        weight_bound[i] =
            weight_bound[i] * (1 - 1e-3 * (t.decay ? 0.1 : 0.0)) +
            1e-3 * test::adam_update_sensitivity(arena.grads.data()[i], arena.adam_m.data()[i],
                                                 arena.adam_v.data()[i], e, 0.9, 0.95, 1e-8, step) +
            4 * u * std::fabs(arena.params.data()[i]);
      }
    }
    adamw_step(gm, step);
    // The loss at the moved weights: its own chain bound, plus the weights' bound through the
    // gradient (first order: Σ |∂L/∂w|·δw).
    const double l = gm.model->forward_backward(gm.inputs.data(), gm.targets.data());
    double through_weights = 0;
    for (size_t i = 0; i < arena.params.size(); i++)
      through_weights += std::fabs(arena.grads.data()[i]) * weight_bound[i];
    const double want = losses[step].template get<double>();
    EXPECT_NEAR(l, want, bound.forward * want + through_weights) << "loss after step " << step;
  }
  for (auto& [g, first] : ref["param_first4_after_5_steps"].items())
    for (int j = 0; j < 4; j++) {
      const size_t i = gm.info.at(g)->offset + gm.our_index(g, j);
      EXPECT_NEAR(gm.param(g)[gm.our_index(g, j)], first[j].template get<double>(), weight_bound[i])
          << g << "[" << j << "] after 5 steps";
    }
}

// Float32: every step of the reference's five-step run from the same state. The float64 model
// (held to PyTorch's float64 by the float64 case) runs the steps; before each, the float32 model
// takes its weights and moments (rounded to float: u more in each, one more rounding per product,
// inside the chain's count), computes the loss and gradients, and makes the AdamW step:
//  - the loss against PyTorch's float64 loss of that step, within the forward chain's bound;
//  - every gradient entry against the float64 model's, within the backward chain's bound of its
//    tensor's norm (and at step 0 the reference's own gradients, as in the float64 case);
//  - the weights after the step against the float64 model's: the step's own roundings
//    (test::adamw_bound_step) and AdamW's response to the gradient's bound
//    (adam_update_sensitivity): one step, so that no step's error feeds the next one's gradients.
// PyTorch's own float32 run lies within the same bounds of its float64 run (checked too): the
// bounds hold for another implementation's summation orders, not only for ours.
void run_golden_float32(const json& golden, const Case& tc) {
  const json& ref32 = golden[tc.key];
  const json& ref64 = float64_reference(golden, tc);
  GoldenModel<double> exact(golden, tc.attn);
  GoldenModel<float> gm(golden, tc.attn);
  for (int i = 0; i < 16; i++)
    ASSERT_EQ(gm.inputs[i], golden["batch_x_row0_first16"][i].template get<int>()) << "batch hash";
  const double u = test::kFloatRoundoff;
  const int T = gm.cfg.seq_len, B = (int)gm.inputs.size() / T;
  const GoldenBounds bound(gm.cfg, B, T, u);
  // PyTorch float32 against PyTorch float64, within the same bounds.
  {
    SCOPED_TRACE("PyTorch float32 against PyTorch float64");
    const double l32 = ref32["loss_init"].get<double>(), l64 = ref64["loss_init"].get<double>();
    EXPECT_NEAR(l32, l64, bound.forward * l64);
    for (auto& [g, norm] : ref64["grad_norms"].items()) {
      const double n64 = norm.get<double>();
      EXPECT_NEAR(ref32["grad_norms"][g].get<double>(), n64, bound.gradient * n64) << g;
      for (int j = 0; j < 4; j++)
        EXPECT_NEAR(ref32["grad_first4"][g][j].get<double>(),
                    ref64["grad_first4"][g][j].get<double>(), bound.gradient * n64)
            << g << "[" << j << "]";
    }
  }
  ParamArena<double>& ea = exact.model->params();
  ParamArena<float>& fa = gm.model->params();
  const auto& losses = ref64["losses"];
  for (int step = 0; step <= 5; step++) {
    SCOPED_TRACE(testing::Message() << "step " << step);
    for (size_t i = 0; i < ea.params.size(); i++) {
      fa.params.data()[i] = (float)ea.params.data()[i];
      fa.adam_m.data()[i] = (float)ea.adam_m.data()[i];
      fa.adam_v.data()[i] = (float)ea.adam_v.data()[i];
    }
    if (step == 0) check_initial_step(gm, ref64, bound, "initial step against PyTorch float64");
    const double l = gm.model->forward_backward(gm.inputs.data(), gm.targets.data());
    exact.model->forward_backward(exact.inputs.data(), exact.targets.data());
    const double want = losses[step].get<double>();
    EXPECT_NEAR(l, want, bound.forward * want) << "loss";
    if (step == 5) break;
    std::vector<double> p0(ea.params.data(), ea.params.data() + ea.params.size()),
        m0(ea.adam_m.data(), ea.adam_m.data() + ea.adam_m.size()),
        v0(ea.adam_v.data(), ea.adam_v.data() + ea.adam_v.size()),
        g0(ea.grads.data(), ea.grads.data() + ea.grads.size());
    std::vector<double> weight_bound(ea.params.size());
    for (const TensorInfo& t : ea.layout) {
      double norm = 0;
      for (size_t j = 0; j < t.numel; j++) norm += g0[t.offset + j] * g0[t.offset + j];
      const double e = bound.gradient * std::sqrt(norm);
      std::vector<double> got(fa.grads.data() + t.offset, fa.grads.data() + t.offset + t.numel);
      std::vector<double> want_g(g0.begin() + t.offset, g0.begin() + t.offset + t.numel);
      EXPECT_TRUE(test::within(got, want_g, std::vector<double>(t.numel, e), t.name.c_str()));
      // the step's roundings, for this tensor's entries (from a zero bound: the state is given)
      const size_t n = t.numel, at = t.offset;
      test::AdamBounds rounding{std::vector<double>(n, 0.0), std::vector<double>(n, 0.0),
                                std::vector<double>(n, 0.0)};
      test::adamw_bound_step(
          rounding, {p0.begin() + at, p0.begin() + at + n}, {m0.begin() + at, m0.begin() + at + n},
          {v0.begin() + at, v0.begin() + at + n}, {g0.begin() + at, g0.begin() + at + n}, 1e-3, 0.9,
          0.95, 1e-8, t.decay ? 0.1 : 0.0, 1.0, step + 1, u);
      for (size_t j = 0; j < n; j++)
        weight_bound[at + j] =
            rounding.p[j] + u * std::fabs(p0[at + j]) +
            1e-3 * test::adam_update_sensitivity(g0[at + j], m0[at + j], v0[at + j], e, 0.9, 0.95,
                                                 1e-8, step + 1);
    }
    adamw_step(gm, step + 1);
    adamw_step(exact, step + 1);
    std::vector<double> got(fa.params.data(), fa.params.data() + fa.params.size());
    EXPECT_TRUE(test::within(
        got, std::vector<double>(ea.params.data(), ea.params.data() + ea.params.size()),
        weight_bound, "weights after the step"));
  }
  // The float64 model's weights after the five steps are PyTorch's float64 ones (within the
  // float64 case's bounds; here to the bound's float32 scale of u|w| per step).
  for (auto& [g, first] : ref64["param_first4_after_5_steps"].items())
    for (int j = 0; j < 4; j++)
      EXPECT_NEAR(exact.param(g)[exact.our_index(g, j)], first[j].get<double>(),
                  5 * u * std::fabs(first[j].get<double>()))
          << g << "[" << j << "] after 5 steps (float64 model)";
}

TEST_P(GoldenTest, MatchesPyTorch) {
  static const json golden = load_golden();
  const Case& tc = GetParam();
  if (tc.use_double)
    run_golden_float64(golden, tc);
  else
    run_golden_float32(golden, tc);
}

INSTANTIATE_TEST_SUITE_P(Tiny, GoldenTest,
                         ::testing::Values(Case{"sa_float32", AttnKind::sa, false},
                                           Case{"xsa_float32", AttnKind::xsa, false},
                                           Case{"sa_float64", AttnKind::sa, true},
                                           Case{"xsa_float64", AttnKind::xsa, true}),
                         [](const auto& info) { return std::string(info.param.key); });

}  // namespace
}  // namespace xsa

// The whole model, forward, backward and AdamW, against an independent PyTorch implementation
// (tests/data/pytorch_tiny.json, docs/SPEC.md §5) on the `tiny` configuration, in float32 and
// float64, SA and XSA. Weights and batch are rebuilt from the file's hash formulas.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

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
    for (auto& a : cfg.layer_attn) a = attn;
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

template <typename Real>
void run_golden(const json& golden, const Case& tc, double tol) {
  const json& ref = golden[tc.key];
  GoldenModel<Real> gm(golden, tc.attn);
  for (int i = 0; i < 16; i++)
    ASSERT_EQ(gm.inputs[i], golden["batch_x_row0_first16"][i].template get<int>()) << "batch hash";

  double loss = gm.model->forward_backward(gm.inputs.data(), gm.targets.data());
  EXPECT_NEAR(loss, ref["loss_init"].template get<double>(),
              tol * std::fabs(ref["loss_init"].template get<double>()))
      << "loss at init";

  std::vector<Real> logits(gm.cfg.padded_vocab);
  gm.model->logits_row(0, logits.data());
  const auto& ref_logits = ref["logits_init_b0_t0_first8"];
  double logit_scale = 0;
  for (const auto& x : ref_logits)
    logit_scale = std::max(logit_scale, std::fabs(x.template get<double>()));
  for (int i = 0; i < 8; i++)
    EXPECT_NEAR(logits[i], ref_logits[i].template get<double>(), tol * logit_scale)
        << "logit " << i;

  double total_sq = 0;
  for (auto& [g, expected_norm] : ref["grad_norms"].items()) {
    const TensorInfo* t = gm.info.at(g);
    double sq = 0;
    for (size_t j = 0; j < t->numel; j++) sq += (double)gm.grad(g)[j] * gm.grad(g)[j];
    total_sq += sq;
    double norm = std::sqrt(sq), want = expected_norm.template get<double>();
    EXPECT_NEAR(norm, want, tol * want) << "grad norm of " << g;
    // First elements: each within tol of the tensor's gradient norm.
    const auto& first = ref["grad_first4"][g];
    for (int j = 0; j < 4; j++)
      EXPECT_NEAR(gm.grad(g)[gm.our_index(g, j)], first[j].template get<double>(), tol * want)
          << g << "[" << j << "]";
  }
  EXPECT_NEAR(std::sqrt(total_sq), ref["grad_norm_total"].template get<double>(),
              tol * ref["grad_norm_total"].template get<double>());

  // Five AdamW steps on the same batch: lr 1e-3 constant, weight decay 0.1 on matrices, no
  // clipping.
  ParamArena<Real>& arena = gm.model->params();
  const auto& losses = ref["losses"];
  for (int step = 1; step <= 5; step++) {
    ops::AdamWSettings s{1e-3, 0.9, 0.95, 1e-8, 0.0, 1.0, step};
    for (const TensorInfo& t : arena.layout) {
      s.weight_decay = t.decay ? 0.1 : 0.0;
      ops::adamw_update(arena.params.data() + t.offset, arena.grads.data() + t.offset,
                        arena.adam_m.data() + t.offset, arena.adam_v.data() + t.offset, t.numel, s);
    }
    double l = gm.model->forward_backward(gm.inputs.data(), gm.targets.data());
    EXPECT_NEAR(l, losses[step].template get<double>(), tol * losses[step].template get<double>())
        << "loss after step " << step;
  }
  // Weights after 5 steps, against the float64 reference. Adam divides each gradient by its own
  // running scale, so float32 rounding of tiny gradients shows up in the weights: in float32 we
  // allow three times the reference's own float32 error on that weight, plus tol of the scale of
  // two steps' movement (Adam moves a weight by about lr = 1e-3 per step). (With half that floor,
  // one weight of the XSA float32 case passed with gcc and missed by 6 % with clang, whose
  // floating-point contraction differs: rounding noise, not an error.)
  std::string key64 = tc.key;  // sa_float32 → sa_float64
  key64 = key64.substr(0, key64.find('_')) + "_float64";
  const json& ref64 = golden[key64];
  for (auto& [g, first] : ref["param_first4_after_5_steps"].items()) {
    for (int j = 0; j < 4; j++) {
      double want = ref64["param_first4_after_5_steps"][g][j].template get<double>();
      double ref_error = std::fabs(first[j].template get<double>() - want);
      EXPECT_NEAR(gm.param(g)[gm.our_index(g, j)], want,
                  3 * ref_error + tol * std::max(std::fabs(want), 1e-2))
          << g << "[" << j << "] after 5 steps";
    }
  }
}

TEST_P(GoldenTest, MatchesPyTorch) {
  static const json golden = load_golden();
  const Case& tc = GetParam();
  // float32: every figure within 1e-5 relative (the float32/float64 gap of the reference itself
  // is below 1e-6). float64: the same arithmetic in another implementation, to 1e-10.
  if (tc.use_double)
    run_golden<double>(golden, tc, 1e-10);
  else
    run_golden<float>(golden, tc, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Tiny, GoldenTest,
                         ::testing::Values(Case{"sa_float32", AttnKind::sa, false},
                                           Case{"xsa_float32", AttnKind::xsa, false},
                                           Case{"sa_float64", AttnKind::sa, true},
                                           Case{"xsa_float64", AttnKind::xsa, true}),
                         [](const auto& info) { return std::string(info.param.key); });

}  // namespace
}  // namespace xsa

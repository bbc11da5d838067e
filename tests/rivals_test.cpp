// XSA's rivals (docs/SPEC.md §8: gated-attn, value-residual, no-self), alone and combined with XSA:
// the whole model's loss against a naive float64 model written here from the definitions (the
// gradients are held to finite differences in model_test's GradCheck), the twins' shared tensors,
// the parameter counts, config.json and the refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "test_util.h"
#include "xsa/io/interop.h"
#include "xsa/model/gpt.h"
#include "xsa/research/compare.h"
#include "xsa/util/error.h"

namespace xsa {
namespace {

using Mat = std::vector<double>;  // row-major

// "gqa:" gives one key/value head for the two query heads.
ModelConfig rival_config(std::string attn) {
  ModelConfig cfg;
  if (attn.rfind("gqa:", 0) == 0) cfg.n_kv_head = 1, attn = attn.substr(4);
  cfg.vocab_size = 40, cfg.padded_vocab = pad_vocab(40);
  cfg.n_layer = 3, cfg.n_head = 2, cfg.n_embd = 16, cfg.seq_len = 12;
  set_attention(cfg, attn);
  return cfg;
}

// ---- the naive model: one loop per definition, nothing shared with the engine ----

// out [N, out] = x [N, in] · Wᵀ, W [out, in].
Mat linear(const Mat& x, const double* W, int N, int in, int out) {
  Mat y((size_t)N * out, 0.0);
  for (int n = 0; n < N; n++)
    for (int o = 0; o < out; o++)
      for (int i = 0; i < in; i++) y[(size_t)n * out + o] += x[(size_t)n * in + i] * W[o * in + i];
  return y;
}

Mat layernorm(const Mat& x, const double* w, const double* b, int N, int C) {
  Mat y(x.size());
  for (int n = 0; n < N; n++) {
    double mean = 0, var = 0;
    for (int c = 0; c < C; c++) mean += x[(size_t)n * C + c] / C;
    for (int c = 0; c < C; c++) var += std::pow(x[(size_t)n * C + c] - mean, 2) / C;
    for (int c = 0; c < C; c++)
      y[(size_t)n * C + c] = (x[(size_t)n * C + c] - mean) / std::sqrt(var + 1e-5) * w[c] + b[c];
  }
  return y;
}

// Rotate-half RoPE of one head vector at position t.
void rotate(double* x, int D, int t, double theta) {
  for (int j = 0; j < D / 2; j++) {
    const double angle = t / std::pow(theta, 2.0 * j / D), a = x[j], b = x[j + D / 2];
    x[j] = std::cos(angle) * a - std::sin(angle) * b;
    x[j + D / 2] = std::sin(angle) * a + std::cos(angle) * b;
  }
}

double sigmoid(double x) {
  return 1 / (1 + std::exp(-x));
}

// The mean loss of one sequence of T tokens (targets −1 ignored).
double naive_loss(const ModelConfig& cfg, const std::map<std::string, const double*>& p,
                  const std::vector<int32_t>& in, const std::vector<int32_t>& tgt) {
  const int T = (int)in.size(), C = cfg.n_embd, H = cfg.n_head, D = C / H, Hk = cfg.kv_heads();
  const int Ck = Hk * D, QKV = C + 2 * Ck;
  Mat x((size_t)T * C);
  for (int t = 0; t < T; t++)
    for (int c = 0; c < C; c++)
      x[(size_t)t * C + c] = p.at("transformer.wte.weight")[in[t] * C + c];
  Mat v_first;
  for (int l = 0; l < cfg.n_layer; l++) {
    const std::string pre = "transformer.h." + std::to_string(l) + ".";
    auto P = [&](const std::string& name) { return p.at(pre + name); };
    const Mat ln1 = layernorm(x, P("ln_1.weight"), P("ln_1.bias"), T, C);
    Mat qkv = linear(ln1, P("attn.c_attn.weight"), T, C, QKV);
    const LayerAttention& a = cfg.attention[l];
    if (a.value_embed)  // each token's row of E joins its values (before the mix)
      for (int t = 0; t < T; t++)
        for (int c = 0; c < Ck; c++)
          qkv[(size_t)t * QKV + C + Ck + c] += P("attn.value_embed.weight")[in[t] * Ck + c];
    if (a.qk_norm)  // each q and k head: x / √(mean(x²) + 1e-6) ⊙ g, before RoPE
      for (int t = 0; t < T; t++)
        for (int h = 0; h < H + Hk; h++) {
          double* q = &qkv[(size_t)t * QKV + h * D];
          const double* g = P(h < H ? "attn.q_norm.weight" : "attn.k_norm.weight");
          double ms = 0;
          for (int d = 0; d < D; d++) ms += q[d] * q[d] / D;
          for (int d = 0; d < D; d++) q[d] = q[d] / std::sqrt(ms + 1e-6) * g[d];
        }
    for (int t = 0; t < T; t++) {
      for (int h = 0; h < H; h++) rotate(&qkv[(size_t)t * QKV + h * D], D, t, cfg.rope_theta);
      for (int g = 0; g < Hk; g++) rotate(&qkv[(size_t)t * QKV + C + g * D], D, t, cfg.rope_theta);
    }
    // value-residual: v' = λ v + (1 − λ) v_first on layers ≥ 1.
    Mat v((size_t)T * Ck);
    for (int t = 0; t < T; t++)
      for (int c = 0; c < Ck; c++) v[(size_t)t * Ck + c] = qkv[(size_t)t * QKV + C + Ck + c];
    if (l == 0) v_first = v;
    if (l > 0 && a.value_residual) {
      const double lambda = P("attn.value_lambda")[0];
      for (size_t i = 0; i < v.size(); i++) v[i] = lambda * v[i] + (1 - lambda) * v_first[i];
    }
    Mat u((size_t)T * C, 0.0);
    for (int h = 0; h < H; h++) {
      const int g = h / (H / Hk);
      for (int i = 0; i < T; i++) {
        // Keys j ≤ i, or j < i with no-self; the sink joins with its logit and a zero value.
        const int last = a.no_self ? i - 1 : i;
        std::vector<double> s;
        double mx = a.sink ? P("attn.sink")[h] : -INFINITY;
        for (int j = 0; j <= last; j++) {
          double dot = 0;
          for (int d = 0; d < D; d++)
            dot += qkv[(size_t)i * QKV + h * D + d] * qkv[(size_t)j * QKV + C + g * D + d];
          s.push_back(dot / std::sqrt((double)D));
          mx = std::max(mx, s.back());
        }
        double sum = a.sink ? std::exp(P("attn.sink")[h] - mx) : 0.0;
        for (double& e : s) sum += (e = std::exp(e - mx));
        double* y = &u[(size_t)i * C + h * D];
        for (int j = 0; j <= last; j++)
          for (int d = 0; d < D; d++) y[d] += s[j] / sum * v[(size_t)j * Ck + g * D + d];
        if (a.kind == AttnKind::xsa) {  // remove the own (mixed) value's direction
          const double* own = &v[(size_t)i * Ck + g * D];
          double yv = 0, vv = 0;
          for (int d = 0; d < D; d++) yv += y[d] * own[d], vv += own[d] * own[d];
          for (int d = 0; d < D; d++) y[d] -= yv / vv * own[d];
        }
      }
    }
    if (a.output_gate) {  // y ⊙ σ(LN1(x) W_gᵀ)
      const Mat gate = linear(ln1, P("attn.c_gate.weight"), T, C, C);
      for (size_t i = 0; i < u.size(); i++) u[i] *= sigmoid(gate[i]);
    }
    const Mat o = linear(u, P("attn.c_proj.weight"), T, C, C);
    for (size_t i = 0; i < x.size(); i++) x[i] += o[i];
    const Mat ln2 = layernorm(x, P("ln_2.weight"), P("ln_2.bias"), T, C);
    Mat fc = linear(ln2, P("mlp.c_fc.weight"), T, C, 4 * C);
    for (double& a : fc)
      a = 0.5 * a * (1 + std::tanh(std::sqrt(2 / M_PI) * (a + 0.044715 * a * a * a)));
    const Mat m = linear(fc, P("mlp.c_proj.weight"), T, 4 * C, C);
    for (size_t i = 0; i < x.size(); i++) x[i] += m[i];
  }
  const Mat lnf =
      layernorm(x, p.at("transformer.ln_f.weight"), p.at("transformer.ln_f.bias"), T, C);
  const Mat logits = linear(lnf, p.at("transformer.wte.weight"), T, C, cfg.vocab_size);
  double loss = 0;
  int count = 0;
  for (int t = 0; t < T; t++) {
    if (tgt[t] < 0) continue;
    double mx = -INFINITY, sum = 0;
    for (int v = 0; v < cfg.vocab_size; v++)
      mx = std::max(mx, logits[(size_t)t * cfg.vocab_size + v]);
    for (int v = 0; v < cfg.vocab_size; v++)
      sum += std::exp(logits[(size_t)t * cfg.vocab_size + v] - mx);
    loss += mx + std::log(sum) - logits[(size_t)t * cfg.vocab_size + tgt[t]];
    count++;
  }
  return loss / count;
}

// Weights larger than at initialisation (attention far from uniform, gates far from 0.5, λ away
// from 0.5), the same for the engine and the naive model.
template <typename Real>
void spread_weights(const ModelConfig& cfg, ParamArena<Real>& arena) {
  arena.init(cfg, 17);
  Rng rng(5);
  for (const TensorInfo& t : arena.layout)
    for (size_t i = 0; i < t.numel; i++) {
      Real& w = arena.params.data()[t.offset + i];
      w = t.init == Init::normal || t.init == Init::normal_residual ? Real(w * 8)
                                                                    : Real(w + 0.3 * rng.normal());
    }
}

class RivalForward : public ::testing::TestWithParam<std::string> {};

// The naive model's loss equals the engine's: in double to 1e-12 of it, in float to 1e-5 (a
// tolerance far above float's rounding through three layers here and far below any effect of a
// wrong mask, gate or mix). SA and XSA alone check the naive model against the proven path.
TEST_P(RivalForward, LossEqualsTheNaiveFloat64Model) {
  const ModelConfig cfg = rival_config(GetParam());
  const int B = 2, T = 11;
  std::vector<int32_t> inputs(B * T), targets(B * T);
  Rng rng(9);
  for (int i = 0; i < B * T; i++)
    inputs[i] = rng.next_u64() % cfg.vocab_size, targets[i] = rng.next_u64() % cfg.vocab_size;
  targets[5] = -1;
  Gpt<double> model(cfg, B, T, GptMode::inference);
  spread_weights(cfg, model.params());
  std::map<std::string, const double*> named;
  for (const TensorInfo& t : model.params().layout)
    named[t.name] = model.params().params.data() + t.offset;
  double expected = 0;  // the engine averages over the batch's targets: weigh each sequence so
  int targets_total = 0;
  for (int b = 0; b < B; b++) {
    const std::vector<int32_t> in(inputs.begin() + b * T, inputs.begin() + (b + 1) * T),
        tgt(targets.begin() + b * T, targets.begin() + (b + 1) * T);
    int count = 0;
    for (int32_t t : tgt) count += t >= 0;
    expected += naive_loss(cfg, named, in, tgt) * count;
    targets_total += count;
  }
  expected /= targets_total;
  const double got = model.forward(inputs.data(), targets.data());
  EXPECT_NEAR(got, expected, 1e-12 * expected);

  Gpt<float> single(cfg, B, T, GptMode::inference);
  for (size_t i = 0; i < single.params().params.size(); i++)
    single.params().params.data()[i] = (float)model.params().params.data()[i];
  single.params().params.backend()->weights_changed();
  EXPECT_NEAR(single.forward(inputs.data(), targets.data()), expected, 1e-5 * expected);
}

INSTANTIATE_TEST_SUITE_P(Rivals, RivalForward,
                         ::testing::Values("sa", "xsa", "sa+gated-attn", "xsa+gated-attn",
                                           "sa+value-residual", "xsa+value-residual", "sa+no-self",
                                           "xsa+no-self", "sa+sink+no-self",
                                           "gqa:xsa+gated-attn+value-residual+no-self",
                                           // a rival on some layers only (comma lists)
                                           "sa+no-self,xsa+gated-attn,sa+value-residual",
                                           "gated-attn,xsa,xsa+no-self+value-residual+sink",
                                           "xsa-last2+value-residual",
                                           // QK-norm (not a rival), alone, with GQA and rivals,
                                           // on some layers
                                           "xsa+qk-norm", "gqa:sa+qk-norm+sink",
                                           "sa,xsa+qk-norm+value-residual+gated-attn,sa+qk-norm",
                                           // value embeddings, with the value residual, GQA
                                           "xsa+value-embed",
                                           "gqa:xsa+value-embed+value-residual+qk-norm",
                                           "sa+value-embed,xsa,xsa+value-embed+value-residual"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s) c = std::isalnum((unsigned char)c) ? c : '_';
                           return s;
                         });

// No-self's first token sees no key: its attention output is exactly zero (no NaN from an empty
// softmax), in the tiled kernel across tile edges, in float and double.
TEST(Rivals, NoSelfFirstTokenIsZeroAndLaterRowsFinite) {
  const int B = 1, T = 130, C = 16, H = 2;
  const std::vector<double> qkv = test::random_vector((size_t)B * T * 3 * C, 3);
  std::vector<double> y((size_t)T * C, 7.0), z((size_t)T * C), lse(H * T);
  ops::AttentionArgs<double> a;
  a.B = B, a.T = T, a.C = C, a.H = H, a.no_self = true, a.exclusive = true;
  a.qkv = qkv.data(), a.y = y.data(), a.z = z.data(), a.lse = lse.data();
  ops::attention_forward(a);
  for (int c = 0; c < C; c++) EXPECT_EQ(y[c], 0.0) << c;
  for (int c = 0; c < C; c++) EXPECT_EQ(z[c], 0.0) << c;
  for (double v : y) ASSERT_TRUE(std::isfinite(v));
  // Row 1 sees key 0 alone: y_1 = v_0 exactly (a softmax over one key).
  for (int h = 0; h < H; h++)
    for (int d = 0; d < C / H; d++)
      EXPECT_NEAR(y[C + h * (C / H) + d], qkv[2 * C + h * (C / H) + d], 1e-15);
}

// No-self across query and key tiles (T = 130: three query tiles), SA and XSA, in double: y
// against a naive softmax over the keys j < i, and the backward against the directional
// derivative of Σ dout·out along a random direction (central differences, step 1e-6).
TEST(Rivals, NoSelfTiledKernelAcrossTilesMatchesNaiveAndFiniteDifferences) {
  const int B = 1, T = 130, C = 16, H = 2, D = C / H, ld = 3 * C;
  const std::vector<double> qkv = test::random_vector((size_t)T * ld, 4),
                            dout = test::random_vector((size_t)T * C, 5),
                            dir = test::random_vector((size_t)T * ld, 6);
  for (bool exclusive : {false, true}) {
    SCOPED_TRACE(exclusive ? "xsa" : "sa");
    auto run = [&](const std::vector<double>& in, std::vector<double>* dqkv) {
      std::vector<double> y((size_t)T * C), z((size_t)T * C), lse(H * T), d = dout;
      ops::AttentionArgs<double> a;
      a.B = B, a.T = T, a.C = C, a.H = H, a.no_self = true, a.exclusive = exclusive;
      a.qkv = in.data(), a.y = y.data(), a.lse = lse.data();
      if (exclusive) a.z = z.data();
      ops::attention_forward(a);
      if (dqkv) {
        dqkv->assign(in.size(), 0.0);
        a.dqkv = dqkv->data(), a.write_dqkv = true, a.d_out = d.data();
        ops::attention_backward(a);
      }
      return exclusive ? z : y;
    };
    std::vector<double> dqkv;
    const std::vector<double> out = run(qkv, &dqkv);
    if (!exclusive)
      for (int i = 1; i < T; i += 7)
        for (int h = 0; h < H; h++) {
          std::vector<double> w;
          double mx = -INFINITY, sum = 0;
          for (int j = 0; j < i; j++) {
            double dot = 0;
            for (int d = 0; d < D; d++)
              dot += qkv[i * ld + h * D + d] * qkv[j * ld + C + h * D + d];
            w.push_back(dot / std::sqrt((double)D)), mx = std::max(mx, w.back());
          }
          for (double& e : w) sum += (e = std::exp(e - mx));
          for (int d = 0; d < D; d++) {
            double y = 0;
            for (int j = 0; j < i; j++) y += w[j] / sum * qkv[j * ld + 2 * C + h * D + d];
            EXPECT_NEAR(out[i * C + h * D + d], y, 1e-13) << i << " " << h << " " << d;
          }
        }
    auto objective = [&](double step) {
      std::vector<double> moved = qkv;
      for (size_t k = 0; k < moved.size(); k++) moved[k] += step * dir[k];
      const std::vector<double> o = run(moved, nullptr);
      double sum = 0;
      for (size_t k = 0; k < o.size(); k++) sum += o[k] * dout[k];
      return sum;
    };
    const double h = 1e-6, numeric = (objective(h) - objective(-h)) / (2 * h);
    double analytic = 0;
    for (size_t k = 0; k < dqkv.size(); k++) analytic += dqkv[k] * dir[k];
    EXPECT_NEAR(analytic, numeric, 1e-6 * std::fabs(numeric));
  }
}

// Twins from one seed share every tensor they both have, bit for bit; the rivals' own tensors are
// W_g (C² per layer) and λ (one per layer after the first).
TEST(Rivals, TwinsShareEveryCommonTensorAndCountTheirOwn) {
  const ModelConfig sa = rival_config("sa");
  ParamArena<float> base(sa);
  base.init(sa, 99);
  std::map<std::string, std::vector<float>> shared;
  for (const TensorInfo& t : base.layout)
    shared[t.name].assign(base.params.data() + t.offset, base.params.data() + t.offset + t.numel);
  const int64_t C = sa.n_embd, L = sa.n_layer;
  for (auto [spec, extra] :
       {std::pair{"xsa+gated-attn", L * C * C}, std::pair{"sa+value-residual", L - 1},
        std::pair{"sa+no-self", int64_t{0}},
        std::pair{"xsa+gated-attn+value-residual+no-self", L * C * C + L - 1}}) {
    SCOPED_TRACE(spec);
    const ModelConfig cfg = rival_config(spec);
    EXPECT_EQ(parameter_count(cfg) - parameter_count(sa), extra);
    ParamArena<float> twin(cfg);
    twin.init(cfg, 99);
    int common = 0;
    for (const TensorInfo& t : twin.layout) {
      if (!shared.count(t.name)) {
        EXPECT_TRUE(t.name.find("c_gate") != std::string::npos ||
                    t.name.find("value_lambda") != std::string::npos)
            << t.name;
        continue;
      }
      common++;
      EXPECT_EQ(0, std::memcmp(shared[t.name].data(), twin.params.data() + t.offset,
                               sizeof(float) * t.numel))
          << t.name;
    }
    EXPECT_EQ(common, (int)shared.size());
  }
}

// config.json: version 3 when every layer has the same rivals (as older files), version 4 when
// they differ by layer, each read back equal; older models keep their version; an unknown rival or
// a missing flag is named.
TEST(Rivals, ConfigJsonRoundTripsAndRefusesWhatItDoesNotKnow) {
  const ModelConfig cfg =
      rival_config("sa+gated-attn+no-self,xsa+gated-attn+no-self,xsa+no-self+gated-attn");
  nlohmann::json j = cfg;
  EXPECT_EQ(j["version"], 3);
  EXPECT_EQ(j["rivals"],
            nlohmann::json({{"gated_attn", true}, {"value_residual", false}, {"no_self", true}}));
  const ModelConfig back = model_config_from_json(j, "config.json");
  EXPECT_EQ(attention_string(back),
            "sa+gated-attn+no-self,xsa+gated-attn+no-self,xsa+gated-attn+no-self");
  for (int l = 0; l < 3; l++) EXPECT_EQ(back.attention[l], cfg.attention[l]) << l;
  EXPECT_EQ(nlohmann::json(rival_config("xsa"))["version"], 1);
  const ModelConfig per_layer = rival_config("sa,xsa+value-residual,gated-attn+sink");
  const nlohmann::json j4 = per_layer;
  EXPECT_EQ(j4["version"], 4);
  EXPECT_FALSE(j4.contains("rivals"));
  const ModelConfig back4 = model_config_from_json(j4, "config.json");
  EXPECT_EQ(attention_string(back4), "sa,xsa+value-residual,sa+sink+gated-attn");
  for (int l = 0; l < 3; l++) EXPECT_EQ(back4.attention[l], per_layer.attention[l]) << l;
  nlohmann::json short_list = j4;
  short_list["layer_rivals"].erase(2);
  EXPECT_THROW(model_config_from_json(short_list, "config.json"), Error);
  nlohmann::json unknown = j;
  unknown["rivals"]["talking_heads"] = true;
  EXPECT_THROW(
      {
        try {
          model_config_from_json(unknown, "config.json");
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("rivals.talking_heads is not known"),
                    std::string::npos)
              << e.what();
          throw;
        }
      },
      Error);
  nlohmann::json missing = j;
  missing["rivals"].erase("no_self");
  EXPECT_THROW(model_config_from_json(missing, "config.json"), Error);
}

// QK-norm: version 5 (readers that do not know it refuse), the rivals per layer beside it, read
// back equal; a missing or short list is named.
TEST(Rivals, QkNormConfigJsonIsVersion5) {
  const ModelConfig cfg = rival_config("sa+qk-norm,xsa+qk-norm+gated-attn,xsa");
  const nlohmann::json j = cfg;
  EXPECT_EQ(j["version"], 5);
  EXPECT_EQ(j["layer_qk_norm"], nlohmann::json({true, true, false}));
  EXPECT_EQ(j["layer_rivals"][1]["gated_attn"], true);
  const ModelConfig back = model_config_from_json(j, "config.json");
  EXPECT_EQ(attention_string(back), "sa+qk-norm,xsa+gated-attn+qk-norm,xsa");
  for (int l = 0; l < 3; l++) EXPECT_EQ(back.attention[l], cfg.attention[l]) << l;
  EXPECT_EQ(nlohmann::json(rival_config("xsa+qk-norm"))["version"], 5);
  nlohmann::json missing = j;
  missing.erase("layer_qk_norm");
  try {
    model_config_from_json(missing, "config.json");
    ADD_FAILURE() << "read a version 5 config without layer_qk_norm";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'layer_qk_norm' must list"), std::string::npos)
        << e.what();
  }
  nlohmann::json future = j;
  future["version"] = 8;  // past the newest this reader knows
  EXPECT_THROW(model_config_from_json(future, "config.json"), Error);
}

// Value embeddings: version 6 with "layer_value_embed", QK-norm's list beside it where a layer has
// it, read back equal; a version-6 file without the list is named.
TEST(Rivals, ValueEmbedConfigJsonIsVersion6) {
  const ModelConfig cfg = rival_config("sa+value-embed,xsa+qk-norm+value-embed,xsa");
  const nlohmann::json j = cfg;
  EXPECT_EQ(j["version"], 6);
  EXPECT_EQ(j["layer_value_embed"], nlohmann::json({true, true, false}));
  EXPECT_EQ(j["layer_qk_norm"], nlohmann::json({false, true, false}));
  const ModelConfig back = model_config_from_json(j, "config.json");
  for (int l = 0; l < 3; l++) EXPECT_EQ(back.attention[l], cfg.attention[l]) << l;
  const nlohmann::json alone = rival_config("xsa+value-embed");
  EXPECT_FALSE(alone.contains("layer_qk_norm"));
  EXPECT_TRUE(model_config_from_json(alone, "config.json").attention[2].value_embed);
  nlohmann::json missing = j;
  missing.erase("layer_value_embed");
  try {
    model_config_from_json(missing, "config.json");
    ADD_FAILURE() << "read a version 6 config without layer_value_embed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'layer_value_embed' must list"), std::string::npos)
        << e.what();
  }
  // The table [V, Hkv·D] per layer, zero at the start: the twin starts as its base model.
  ParamArena<double> arena(rival_config("gqa:xsa+value-embed"), false);
  arena.init(rival_config("gqa:xsa+value-embed"), 3);
  int tables = 0;
  for (const TensorInfo& t : arena.layout)
    if (t.name.find("attn.value_embed.weight") != std::string::npos) {
      tables++;
      EXPECT_EQ(t.shape, (std::vector<int64_t>{40, 8})) << t.name;
      EXPECT_TRUE(t.decay);
      for (size_t i = 0; i < t.numel; i++) ASSERT_EQ(arena.params.data()[t.offset + i], 0.0);
    }
  EXPECT_EQ(tables, 3);
}

// Formats that cannot compute a rival (or QK-norm) refuse it rather than export another model.
TEST(Rivals, ExportsRefuseThem) {
  for (const char* attn : {"sa+gated-attn", "sa+qk-norm", "sa+value-embed"}) {
    SCOPED_TRACE(attn);
    ModelConfig cfg = rival_config(attn);
    set_architecture(cfg, "gpt2");
    ParamArena<float> arena(cfg, false);
    arena.init(cfg, 1);
    namespace fs = std::filesystem;
    const fs::path dir = test::temp_dir("rival_exports");
    for (auto write : {+[](const ModelConfig&c, const ParamArena<float>&a, const fs::path&f) {
                         export_hf(c, a.layout, a.params.data(), f);
                       },
                       +[](const ModelConfig&c, const ParamArena<float>&a, const fs::path&f) {
                         export_llmc(c, a.layout, a.params.data(), f, false);
                       }}) {
      try {
        write(cfg, arena, dir / "out");
        ADD_FAILURE() << "exported a " << attn << " model";
      } catch (const Error& e) {
        const std::string a = attn, what = e.what();
        EXPECT_NE(what.find(a == "sa+qk-norm"       ? "QK-norm"
                            : a == "sa+value-embed" ? "value embeddings"
                                                    : "gated-attn"),
                  std::string::npos)
            << what;
      }
      EXPECT_FALSE(fs::exists(dir / "out"));
    }
  }
}

// compare's names: the rivals alone (on SA) and with XSA or any other variant, their models.
TEST(Rivals, CompareVariantsNameThem) {
  const Variant gated = parse_variant("gated-attn", 4);
  EXPECT_TRUE(gated.attention[3].output_gate);
  EXPECT_EQ(gated.attention[3].kind, AttnKind::sa);
  const Variant both = parse_variant("xsa+gated-attn", 4);
  EXPECT_TRUE(both.attention[0].output_gate && !both.attention[0].no_self);
  EXPECT_EQ(both.attention[0].kind, AttnKind::xsa);
  const Variant many = parse_variant("xsa-last2+value-residual+no-self+sink@bf16", 4);
  for (int l = 0; l < 4; l++)
    EXPECT_TRUE(many.attention[l].value_residual && many.attention[l].no_self &&
                many.attention[l].sink);
  EXPECT_EQ(many.attention[1].kind, AttnKind::sa);
  EXPECT_EQ(many.attention[2].kind, AttnKind::xsa);
  EXPECT_EQ(many.precision, Precision::bf16);
  EXPECT_THROW(parse_variant("xsa+gated", 4), Error);
}

}  // namespace
}  // namespace xsa

// The research tools: variants, statistics, the similarity-bias analysis against an independent
// float64 computation, and xsa compare end to end, including the proof that twins are twins.
#include "xsa/research/compare.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "bounds.h"
#include "xsa/analysis/similarity_bias.h"
#include "xsa/dist/comm.h"
#include "xsa/eval/evaluate.h"
#include "xsa/io/checkpoint.h"
#include "xsa/ops/reference.h"
#include "xsa/report/equal_loss.h"
#include "xsa/research/compare_parts.h"
#include "xsa/train/training_run.h"
#include "xsa/util/error.h"
#include "xsa/util/files.h"
#include "xsa/util/stats.h"

namespace xsa {
namespace {

namespace fs = std::filesystem;

// The parsing of --seeds (the sequential test itself: sequential_test).
TEST(Compare, SeedsParsing) {
  CompareConfig cfg;
  parse_seeds("auto", 7, cfg);
  EXPECT_TRUE(cfg.seeds_auto);
  EXPECT_EQ(cfg.seeds, 7);
  parse_seeds("3", 7, cfg);
  EXPECT_FALSE(cfg.seeds_auto);
  EXPECT_EQ(cfg.seeds, 3);
  for (const char* bad : {"0", "x", "3x", "-2", ""})
    EXPECT_THROW(parse_seeds(bad, 7, cfg), Error) << bad;
  EXPECT_THROW(parse_seeds("auto", 0, cfg), Error);
  EXPECT_THROW(parse_seeds("auto", 2, cfg), Error);  // the first look is after 3 seeds
  EXPECT_EQ(parse_tune_lrs("1e-3,2e-3,4e-3"), (std::vector<double>{1e-3, 2e-3, 4e-3}));
  for (const char* bad : {"1e-3", "2e-3,1e-3", "1e-3,1e-3", "0,1e-3", "x,1e-3", "1e-3,"})
    EXPECT_THROW(parse_tune_lrs(bad), Error) << bad;
}

TEST(Variants, LayerSelections) {
  auto layers = [](const std::string& name) {
    Variant v = parse_variant(name, 4);
    std::string s;
    for (int l = 0; l < 4; l++) s += v.attention[l].kind == AttnKind::xsa ? 'X' : 's';
    return s;
  };
  EXPECT_EQ(layers("sa"), "ssss");
  EXPECT_EQ(layers("xsa"), "XXXX");
  EXPECT_EQ(layers("xsa-last2"), "ssXX");
  EXPECT_EQ(layers("xsa-first1"), "Xsss");
  EXPECT_EQ(layers("xsa-layers-0.3"), "XssX");
  EXPECT_EQ(parse_variant("xsa-gated-one", 4).attention[2].kind, AttnKind::xsa_gated_one);
  EXPECT_TRUE(parse_variant("xsa-last1+sink", 4).attention[0].sink);
  const Variant twin = parse_variant("xsa-last1+sink@bf16", 4);
  EXPECT_EQ(twin.precision, Precision::bf16);
  EXPECT_TRUE(twin.attention[0].sink);
  EXPECT_EQ(twin.attention[3].kind, AttnKind::xsa);
  EXPECT_FALSE(parse_variant("xsa", 4).precision.has_value());
  for (const char* bad : {"xsa-last5", "xsa-last0", "xsa-first", "xsa-layers-4", "xsa-layers-1.x",
                          "gated", "xsa@fp16", "xsa@", "@bf16", "xsa@0", "xsa@-1e-3",
                          "xsa@1e-3@2e-3", "xsa@bf16@bf16", "xsa@inf"})
    EXPECT_THROW(parse_variant(bad, 4), Error) << bad;
  // A variant at its own rate, in any order with a precision; its model is the name before @.
  const Variant rated = parse_variant("xsa@bf16@4e-3", 4);
  EXPECT_EQ(rated.lr, 4e-3);
  EXPECT_EQ(rated.precision, Precision::bf16);
  EXPECT_EQ(rated.model_name, "xsa");
  EXPECT_EQ(parse_variant("sa+qk-norm@2e-3", 4).lr, 2e-3);
  EXPECT_EQ(parse_variant("sa+qk-norm@2e-3", 4).model_name, "sa+qk-norm");
  EXPECT_FALSE(parse_variant("sa", 4).lr.has_value());
}

// The baseline is the first variant whatever its spelling, and it must be standard attention.
TEST(Variants, TheBaselineIsTheFirstVariant) {
  CompareConfig cfg;
  cfg.model.n_layer = 4;
  for (const auto& ok :
       std::vector<std::vector<std::string>>{{"sa", "xsa"},
                                             {"sa+qk-norm", "xsa"},
                                             {"sa@2e-3", "sa@4e-3", "xsa@4e-3"},
                                             {"sa+gated-attn", "xsa+gated-attn"}}) {
    cfg.variants = ok;
    EXPECT_NO_THROW(comparison::parse_variants(cfg)) << ok[0];
  }
  for (const auto& bad : std::vector<std::vector<std::string>>{
           {"xsa", "sa"}, {"xsa-last1", "sa"}, {"xsa-gated", "sa"}, {}, {"sa", "sa"}}) {
    cfg.variants = bad;
    EXPECT_THROW(comparison::parse_variants(cfg), Error) << (bad.empty() ? "" : bad[0]);
  }
  // Own rates: the run's for the others; none at all: the run's rate for every arm.
  cfg.variants = {"sa", "sa@4e-3", "xsa@4e-3"};
  EXPECT_EQ(comparison::variant_rates(comparison::parse_variants(cfg), 2e-3),
            (std::vector<double>{2e-3, 4e-3, 4e-3}));
  cfg.variants = {"sa", "xsa"};
  EXPECT_TRUE(comparison::variant_rates(comparison::parse_variants(cfg), 2e-3).empty());
  // An own rate with --tune-lr: one of the two decides.
  cfg.variants = {"sa", "xsa@4e-3"};
  cfg.tune_lrs = {1e-3, 2e-3};
  EXPECT_THROW(comparison::parse_variants(cfg), Error);
}

// A comparison's results made up, for its statistics: `seeds` seeds of sa and xsa, validated at
// the steps `at`, SA's curve falling, XSA's SA's plus delta(seed, step); each final score the
// curve's end.
CompareResult made_up_results(int seeds, const std::vector<int64_t>& at,
                              const std::function<double(int, int64_t)>& delta) {
  CompareResult r;
  for (int i = 0; i < seeds; i++)
    for (const char* v : {"sa", "xsa"}) {
      ArmResult a;
      a.variant = v, a.seed = 1 + i;
      for (int64_t step : at) {
        const double sa = 3 - step / 100.0 + 0.01 * i;
        a.val_curve.push_back({step, sa + (a.variant == "xsa" ? delta(i, step) : 0)});
      }
      a.val_loss = a.train_loss = a.val_curve.back().second;
      a.step_ms = {10, 10, 10};
      set_robust_timing(a, 4096);
      r.arms.push_back(a);
    }
  return r;
}

// Settledness by the rule fixed in advance (docs/comparing.md): per seed the least-squares slope of
// Δ over the last quarter's validation points, times a quarter of the run; moving when its 95 %
// interval over seeds excludes 0, and then no difference is called, however small p is.
TEST(Compare, ADifferenceStillMovingIsNotCalled) {
  CompareConfig cfg;
  cfg.model.n_layer = 2;
  cfg.variants = {"sa", "xsa"};
  cfg.run.steps = 200;
  comparison::Setup s;
  s.variants = comparison::parse_variants(cfg);
  const std::vector<int64_t> every25 = {0, 25, 50, 75, 100, 125, 150, 175, 200};
  const std::vector<std::vector<double>> overhead(2, std::vector<double>{1.0});
  // Moving: Δ falls by 0.0002 per step in every seed (0.0001 more or less by seed) from −0.02 at
  // step 150: the change over the last quarter, 50 steps of the slope, is −0.010 ± 0.005.
  const auto moving = [](int i, int64_t step) {
    return -0.02 - (0.0002 + 0.0001 * (i - 2) / 2) * std::max<int64_t>(0, step - 150) + 0.001 * i;
  };
  CompareResult r = made_up_results(5, every25, moving);
  comparison::summarize(r, s, cfg, overhead, {});
  std::vector<VariantSummary> sm = r.summary;
  ASSERT_EQ(sm.size(), 2u);
  EXPECT_EQ(sm[1].drift_points, 3);
  std::vector<double> expected;  // the slopes by hand: a straight line over 150, 175, 200
  for (int i = 0; i < 5; i++) expected.push_back(-(0.0002 + 0.0001 * (i - 2) / 2) * 50);
  EXPECT_NEAR(sm[1].drift.mean, mean(expected), 1e-12);
  EXPECT_NEAR(sm[1].drift.ci_high, describe_paired(expected).ci_high, 1e-12);
  EXPECT_EQ(sm[1].settled, Settled::moving);
  EXPECT_LT(sm[1].p_value, 1e-4) << "a clear difference at the end";
  EXPECT_EQ(sm[1].verdict.rfind("still moving", 0), 0u) << sm[1].verdict;
  // Settled: Δ flat at −0.03 with slopes that cancel over the seeds: the difference is called.
  const auto flat = [](int i, int64_t step) {
    return -0.03 + 0.001 * i + (i % 2 ? 1 : -1) * 1e-5 * (double)step;
  };
  r = made_up_results(4, every25, flat);
  comparison::summarize(r, s, cfg, overhead, {});
  sm = r.summary;
  EXPECT_EQ(sm[1].settled, Settled::settled);
  EXPECT_NEAR(sm[1].drift.mean, 0, 1e-12);
  EXPECT_EQ(sm[1].verdict, "lower val loss than SA (p < 0.05)");
  // Two validation points in the last quarter: not judged, and the verdict is the test's.
  r = made_up_results(5, {0, 100, 160, 200}, moving);
  comparison::summarize(r, s, cfg, overhead, {});
  sm = r.summary;
  EXPECT_EQ(sm[1].drift_points, 2);
  EXPECT_EQ(sm[1].settled, Settled::not_judged);
  EXPECT_EQ(sm[1].verdict, "lower val loss than SA (p < 0.05)");
  // What the interval rules out: a gain beyond its lower end, a loss beyond its upper one (here
  // none: the interval lies below 0).
  const RulesOut out = rules_out(sm[1].delta);
  EXPECT_DOUBLE_EQ(out.gain_above, -sm[1].delta.ci_low);
  EXPECT_EQ(out.loss_above, 0.0);
  PairedDifferences across;
  across.ci_low = -0.01, across.ci_high = 0.02;
  EXPECT_DOUBLE_EQ(rules_out(across).gain_above, 0.01);
  EXPECT_DOUBLE_EQ(rules_out(across).loss_above, 0.02);
  EXPECT_TRUE(std::isnan(rules_out(PairedDifferences{}).gain_above));
}

// The analysis against an independent computation: the reference attention in double on the
// model's own q, k, v gives y; the mean cos(y_i, v_i) over positions ≥ 1 must agree. The float
// forward's y is within the forward chain's bound of its scale (tests/bounds.h); a cosine moves by
// at most the relative error of each of its two vectors, a probability by its own: twice the
// chain's bound.
TEST(Analyze, MatchesAnIndependentComputation) {
  ModelConfig cfg;
  cfg.n_layer = 2, cfg.n_head = 2, cfg.n_embd = 16, cfg.seq_len = 12;
  set_attention(cfg, "sa,xsa");
  const int B = 2, T = 12, C = 16, H = 2, D = 8;
  Gpt<float> model(cfg, B, T);
  model.params().init(cfg, 3);
  for (size_t i = 0; i < model.params().params.size(); i++)
    model.params().params.data()[i] *= 8;  // a non-uniform attention
  TokenStream stream;
  std::vector<uint16_t> tokens(B * T * 3);
  for (size_t i = 0; i < tokens.size(); i++) tokens[i] = (uint16_t)((i * 37 + i / 5) % 256);
  stream.add(tokens, "memory");
  auto heads = attention_similarity_bias(model, stream, 1);
  ASSERT_EQ(heads.size(), 4u);
  // Recompute from the activations of that same batch.
  const auto& act = model.activations();
  for (int l = 0; l < 2; l++) {
    const float* qkvf = act.layers[l].qkv;
    std::vector<double> qkv(qkvf, qkvf + (size_t)B * T * 3 * C), y((size_t)B * T * C),
        lse(B * H * T);
    ref::attention_forward(y.data(), lse.data(), qkv.data(), ref::Heads{B, T, C, H});
    for (int h = 0; h < H; h++) {
      double sum = 0, self = 0, vv_sum = 0, y_vj_sum = 0;
      int n = 0, pairs = 0;
      auto cos64 = [&](const double* a, const double* b) {
        double ab = 0, aa = 0, bb = 0;
        for (int d = 0; d < D; d++) ab += a[d] * b[d], aa += a[d] * a[d], bb += b[d] * b[d];
        return ab / std::sqrt(aa * bb);
      };
      for (int b = 0; b < B; b++)
        for (int t = 1; t < T; t++) {
          const double* yy = &y[((size_t)b * T + t) * C + h * D];
          const double* v = &qkv[((size_t)b * T + t) * 3 * C + 2 * C + h * D];
          const double* q = &qkv[((size_t)b * T + t) * 3 * C + h * D];
          const double* k = &qkv[((size_t)b * T + t) * 3 * C + C + h * D];
          double yv = 0, yy2 = 0, vv = 0, qk = 0;
          for (int d = 0; d < D; d++)
            yv += yy[d] * v[d], yy2 += yy[d] * yy[d], vv += v[d] * v[d], qk += q[d] * k[d];
          sum += yv / std::sqrt(yy2 * vv);
          for (int j = 0; j < t; j++) {  // every earlier token's value, one pair at a time
            const double* vj = &qkv[((size_t)b * T + j) * 3 * C + 2 * C + h * D];
            vv_sum += cos64(v, vj), y_vj_sum += cos64(yy, vj), pairs++;
          }
          self += std::exp(qk / std::sqrt((double)D) - lse[(b * H + h) * T + t]);
          n++;
        }
      const HeadBias& r = heads[l * H + h];
      const double bound =
          2 * test::chain_error(test::model_chain(cfg, B, T).forward, test::kFloatRoundoff);
      EXPECT_NEAR(r.cos_yv, sum / n, bound) << "layer " << l << " head " << h;
      EXPECT_NEAR(r.self_weight, self / n, bound);
      EXPECT_NEAR(r.cos_vv, vv_sum / pairs, bound);
      EXPECT_NEAR(r.cos_y_vj, y_vj_sum / pairs, bound);
      EXPECT_NEAR(r.own_lean(), sum / n - y_vj_sum / pairs, 2 * bound);
      if (l == 0) {
        EXPECT_TRUE(std::isnan(r.cos_zv)) << "SA layers have no z";
      }
      if (l == 1) {
        // z = y − (y·v/‖v‖²) v in double has an error of about 2D roundoffs of ‖y‖, so |cos(z, v)|
        // is that over ‖z‖: large where y is nearly along v (a peaked self attention). Bound the
        // mean over the rows by the mean of 4D·ε64·‖y‖/‖z‖ from the model's own y and v.
        double ratio = 0;
        for (int b = 0; b < B; b++)
          for (int t = 1; t < T; t++) {
            const float* yy = act.layers[l].att_y + ((size_t)b * T + t) * C + h * D;
            const float* v = qkvf + ((size_t)b * T + t) * 3 * C + 2 * C + h * D;
            double yv = 0, vv = 0, y2 = 0, z2 = 0;
            for (int d = 0; d < D; d++) yv += (double)yy[d] * v[d], vv += (double)v[d] * v[d];
            for (int d = 0; d < D; d++) {
              const double z = yy[d] - yv / vv * v[d];
              y2 += (double)yy[d] * yy[d], z2 += z * z;
            }
            ratio += std::sqrt(y2 / z2);
          }
        EXPECT_LT(r.cos_zv, 4 * D * test::kDoubleRoundoff * ratio / n)
            << "XSA removes the own-value direction";
      }
    }
  }
}

// A constructed case with known answers: q = k = 0 makes attention uniform over the visible
// positions, and a text of one repeated token makes every value vector the same, so y_i = v_i:
// cos(y, v) = 1 and cos(v_i, v_j) = 1 exactly. The self weight of position t is 1/(t+1); with
// no-self the own position is masked, so its weight is 0 (and y_i, the mean of the earlier
// values, is still v_i).
TEST(Analyze, KnownCosinesOnAConstructedModel) {
  for (const char* attn : {"sa", "sa+no-self"}) {
    ModelConfig cfg;
    cfg.n_layer = 1, cfg.n_head = 2, cfg.n_embd = 16, cfg.seq_len = 8;
    set_attention(cfg, attn);
    const int B = 1, T = 8, C = 16;
    Gpt<float> model(cfg, B, T);
    model.params().init(cfg, 5);
    float* qkv_w = model.params().w.layers[0].qkv_w;  // rows q (C), k (C), v (C)
    std::fill(qkv_w, qkv_w + 2 * C * C, 0.f);
    TokenStream stream;
    stream.add(std::vector<uint16_t>(64, 42), "one token");
    auto heads = attention_similarity_bias(model, stream, 1);
    double self = 0;
    for (int t = 1; t < T; t++) self += 1.0 / (t + 1);
    self /= T - 1;
    if (cfg.attention[0].no_self) self = 0;
    // Up to the float forward's rounding: twice the chain's bound (as above).
    const double bound =
        2 * test::chain_error(test::model_chain(cfg, B, T).forward, test::kFloatRoundoff);
    for (const HeadBias& h : heads) {
      EXPECT_NEAR(h.cos_yv, 1.0, bound) << attn;
      EXPECT_NEAR(h.cos_vv, 1.0, bound) << attn;
      EXPECT_NEAR(h.own_lean(), 0.0, 2 * bound) << attn << ": alike values, no lean of its own";
      EXPECT_NEAR(h.self_weight, self, bound) << attn;
    }
  }
}

// A fresh folder `name` holding data.txt (40 kB of short sentences), and a comparison of a tiny
// model on it into folder/report: 12 steps, validation every 6, 2 seeds, one thread.
CompareConfig tiny_comparison(const std::string& name, int seq_len,
                              std::vector<std::string> variants, fs::path& dir) {
  dir = fs::temp_directory_path() / (name + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string text;
  for (int i = 0; text.size() < 40000; i++)
    text += "sentence " + std::to_string(i * 7919 % 1000) + " of the corpus.\n";
  std::ofstream(dir / "data.txt") << text;
  CompareConfig cfg;
  cfg.model.n_layer = 2, cfg.model.n_head = 2, cfg.model.n_embd = 16, cfg.model.seq_len = seq_len;
  cfg.run.data = (dir / "data.txt").string();
  cfg.run.out = (dir / "report").string();
  cfg.run.batch = 4, cfg.run.steps = 12, cfg.run.val_every = 6, cfg.run.val_batches = 2,
  cfg.run.threads = 1;
  cfg.run.quiet = true;
  cfg.variants = std::move(variants);
  cfg.seeds = 2;
  return cfg;
}

TEST(Compare, TwinsAreTwinsAndTheReportHoldsItsFields) {
  fs::path dir;
  CompareConfig cfg =
      tiny_comparison("xsa_compare_test_", 20, {"sa", "xsa", "xsa-last1", "xsa-gated"}, dir);
  std::string other_text;  // a second evaluation set: other text
  for (int i = 0; other_text.size() < 8000; i++)
    other_text += "another line " + std::to_string(i) + ".\n";
  std::ofstream(dir / "other.txt") << other_text;
  cfg.eval_data = {(dir / "data.txt").string(), (dir / "other.txt").string()};
  CompareResult r = compare(cfg);
  ASSERT_EQ(r.arms.size(), 8u);
  // Within a seed: identical initial weights and batches for every variant; across seeds: not.
  for (const ArmResult& a : r.arms) {
    const ArmResult& sa = r.arms[a.seed == cfg.run.seed ? 0 : 4];
    ASSERT_EQ(sa.variant, "sa");
    EXPECT_EQ(a.init_hash, sa.init_hash) << a.variant;
    EXPECT_EQ(a.batches_hash, sa.batches_hash) << a.variant;
  }
  EXPECT_NE(r.arms[0].init_hash, r.arms[4].init_hash);
  EXPECT_NE(r.arms[0].batches_hash, r.arms[4].batches_hash);
  EXPECT_NE(r.arms[0].val_loss, r.arms[1].val_loss) << "the arms did differ in attention";
  // Gated XSA starts with its gates at zero: at step 0 it is exactly SA.
  EXPECT_EQ(r.arms[3].variant, "xsa-gated");
  EXPECT_EQ(r.arms[3].val_curve[0].second, r.arms[0].val_curve[0].second);
  EXPECT_NE(r.arms[3].val_loss, r.arms[0].val_loss) << "the gates learned";

  auto report = nlohmann::json::parse(read_file(dir / "report/report.json"));
  for (const auto& a : report["arms"])
    for (const char* key :
         {"variant", "seed", "train_loss", "val_loss", "ms_per_step", "tokens_per_s", "peak_mb"})
      EXPECT_TRUE(a.contains(key)) << key;
  ASSERT_EQ(report["summary"].size(), 4u);
  for (const auto& s : report["summary"])
    for (const char* key : {"variant", "n_seeds", "val_loss_mean", "val_loss_sd",
                            "delta_vs_sa_mean", "delta_vs_sa_sd", "p_value", "overhead_vs_sa"})
      EXPECT_TRUE(s.contains(key)) << key;
  // The summary is the arms' arithmetic.
  const auto& xs = report["summary"][1];
  double d0 =
      report["arms"][1]["val_loss"].get<double>() - report["arms"][0]["val_loss"].get<double>();
  double d1 =
      report["arms"][5]["val_loss"].get<double>() - report["arms"][4]["val_loss"].get<double>();
  EXPECT_NEAR(xs["delta_vs_sa_mean"].get<double>(), (d0 + d1) / 2, 1e-12);
  EXPECT_NEAR(xs["p_value"].get<double>(), paired_t_test_p({d0, d1}), 1e-12);
  EXPECT_TRUE(report["summary"][0]["p_value"].is_null());
  // The final score reads every window of the validation split: the saved final weights scored
  // again on all of them, through the plain validation pass, give the arm's val_loss.
  {
    const RunInputs in = prepare_run(cfg.model, cfg.run, world_comm());
    const int T = cfg.model.seq_len, B = cfg.run.batch;
    const int64_t windows = (int64_t)(in.data.val.size() - 1) / T;
    ASSERT_GT(windows, 2 * cfg.run.val_batches * B) << "more windows than validation reads";
    for (const char* arm : {"sa-seed1", "xsa-seed2"}) {
      const fs::path ckpt = resolve_checkpoint(dir / "report/arms" / arm);
      const ModelConfig m = load_checkpoint_config(ckpt);
      Gpt<float> model(m, B, T, GptMode::inference);
      load_checkpoint_weights(ckpt, model.params(), false);
      const double whole = evaluate_loss(model, in.data.val, (int)((windows + B - 1) / B));
      const ArmResult& a = r.arms[std::string(arm) == "sa-seed1" ? 0 : 5];
      EXPECT_NEAR(a.val_loss, whole, 1e-5 * whole) << arm;
      EXPECT_EQ(a.scored_tokens[0], windows * T) << arm;
      EXPECT_NE(a.val_loss, a.val_curve.back().second) << arm << ": not the curve's windows";
    }
  }
  // The equal-loss view: each arm's training time at every validation point (rising, ending at
  // steps × its median step), and per variant the summary of
  // equal_loss() over the seeds' curves, which equal_loss_test holds to constructed curves.
  for (const ArmResult& a : r.arms) {
    ASSERT_EQ(a.val_seconds.size(), a.val_curve.size()) << a.variant;
    EXPECT_EQ(a.val_seconds.front(), 0.0);
    for (size_t i = 1; i < a.val_seconds.size(); i++)
      EXPECT_GT(a.val_seconds[i], a.val_seconds[i - 1]) << a.variant;
    EXPECT_DOUBLE_EQ(a.val_seconds.back(), cfg.run.steps * a.ms_per_step / 1000) << a.variant;
    ASSERT_EQ(a.step_ms.size(), (size_t)cfg.run.steps) << a.variant;
    EXPECT_DOUBLE_EQ(a.ms_per_step, median(a.step_ms)) << a.variant;
  }
  EXPECT_TRUE(report["summary"][0]["equal_loss"].is_null());
  for (size_t k = 1; k < 4; k++) {
    const auto& e = report["summary"][k]["equal_loss"];
    const std::string v = report["summary"][k]["variant"];
    std::vector<std::vector<CurvePoint>> sa_curves, curves;
    for (const ArmResult* a : arms_of(r, "sa")) sa_curves.push_back(curve_of(*a));
    for (const ArmResult* a : arms_of(r, v)) curves.push_back(curve_of(*a));
    const EqualLoss expected = equal_loss(sa_curves, curves);
    EXPECT_EQ(e["seeds"], 2) << v;
    EXPECT_EQ(e["seeds_reached"], expected.reached) << v;
    ASSERT_EQ(e["per_seed"].size(), 2u) << v;
    if (std::isfinite(expected.median_steps))
      EXPECT_DOUBLE_EQ(e["median_steps"].get<double>(), expected.median_steps) << v;
    else
      EXPECT_TRUE(e["median_steps"].is_null()) << v;
    EXPECT_DOUBLE_EQ(e["val_loss_at_sa_time_mean"].get<double>(), expected.loss_at_sa_time_mean);
  }
  // Every difference to SA with its interval, effect size and tests, Holm across the three
  // variants; per-seed values in report.md.
  std::vector<double> raw;
  for (size_t k = 1; k < 4; k++) raw.push_back(report["summary"][k]["p_value"].get<double>());
  const std::vector<double> holm = holm_adjusted(raw);
  for (size_t k = 1; k < 4; k++) {
    const auto& s = report["summary"][k];
    std::vector<double> d;
    for (const ArmResult* a : arms_of(r, s["variant"])) d.push_back(a->val_loss);
    const auto sa_arms = arms_of(r, "sa");
    for (size_t i = 0; i < d.size(); i++) d[i] -= sa_arms[i]->val_loss;
    const PairedDifferences expected = describe_paired(d);
    EXPECT_DOUBLE_EQ(s["delta_vs_sa"]["ci95"][0].get<double>(), expected.ci_low);
    EXPECT_DOUBLE_EQ(s["delta_vs_sa"]["ci95"][1].get<double>(), expected.ci_high);
    EXPECT_DOUBLE_EQ(s["delta_vs_sa"]["d_z"].get<double>(), expected.d_z);
    EXPECT_DOUBLE_EQ(s["delta_vs_sa"]["p_wilcoxon"].get<double>(), expected.p_wilcoxon);
    EXPECT_DOUBLE_EQ(s["p_holm"].get<double>(), holm[k - 1]);
  }
  // Loss by position: for the validation set and both evaluation sets, a loss per bucket of the
  // 20 positions (1–16 and 17–20), SA's and every variant's, with Δ per bucket.
  ASSERT_EQ(report["loss_by_position"]["buckets"].size(), 2u);
  EXPECT_EQ(report["loss_by_position"]["buckets"][0], nlohmann::json({1, 16}));
  EXPECT_EQ(report["loss_by_position"]["buckets"][1], nlohmann::json({17, 20}));
  for (const ArmResult& a : r.arms) {
    ASSERT_EQ(a.position_loss.size(), 3u) << a.variant;  // validation and both sets
    ASSERT_EQ(a.eval_losses.size(), 2u) << a.variant;
    EXPECT_NE(a.eval_losses[0], a.eval_losses[1]) << a.variant;
    // Every window scores each of its 20 positions once: the buckets weighted 16 : 4 give the
    // set's loss (the last validation's, the evaluation sets'), summed in another order (float
    // losses, double sums: well within 1e-5 of them).
    const std::vector<double> set_loss = {a.val_loss, a.eval_losses[0], a.eval_losses[1]};
    for (size_t set = 0; set < 3; set++) {
      ASSERT_EQ(a.position_loss[set].size(), 2u);
      EXPECT_NEAR((16 * a.position_loss[set][0] + 4 * a.position_loss[set][1]) / 20, set_loss[set],
                  1e-5 * set_loss[set])
          << a.variant << " set " << set;
    }
  }
  EXPECT_EQ(report["summary"][1]["loss_by_position"].size(), 3u);
  EXPECT_EQ(report["summary"][1]["eval_delta_vs_sa"].size(), 2u);
  {
    const std::string md = read_file(dir / "report/report.md");
    for (const char* section : {"## Differences to SA", "## Loss by position",
                                "Per seed:", "| 1 | ", "| 2 | ", "p (Wilcoxon)", "95 % CI"})
      EXPECT_NE(md.find(section), std::string::npos) << section;
  }
  EXPECT_GT(report["validation"]["share_of_wall_clock"].get<double>(), 0);
  EXPECT_LT(report["validation"]["share_of_wall_clock"].get<double>(), 1);
  for (const char* f :
       {"report.md", "val_loss.svg", "val_loss_by_time.svg", "delta_vs_sa.svg",
        "similarity_bias.svg", "loss_by_position.svg", "loss_by_position-eval1.svg"})
    EXPECT_TRUE(fs::exists(dir / "report" / f)) << f;
  EXPECT_TRUE(fs::exists(dir / "report/arms/xsa-seed2"));
  // The table says how its timing columns are measured; the plot's title reads as it should.
  const std::string md = read_file(dir / "report/report.md");
  // (A loaded machine may add the slow steps' paragraph between them.)
  size_t table_end = md.find("\n\n", md.find("| variant"));
  if (md.compare(table_end + 2, 10, "Slow steps") == 0) table_end = md.find("\n\n", table_end + 2);
  EXPECT_EQ(md.find(kTimingNote), table_end + 1) << md;
  const std::string bias_plot = read_file(dir / "report/similarity_bias.svg");
  EXPECT_NE(bias_plot.find("Attention similarity bias per layer (seed 1): mean cos(y_i, v_i)"),
            std::string::npos);
  EXPECT_NE(bias_plot.find("xsa own lean"), std::string::npos);
  // An interrupted run (seed 2 unfinished, no report yet) resumes: seed 1 comes from its file, seed
  // 2 is trained again, and the results are those of the uninterrupted run.
  fs::remove(dir / "report/report.json");
  fs::remove(dir / "report/seed-2.json");
  CompareResult resumed = compare(cfg);
  ASSERT_EQ(resumed.arms.size(), r.arms.size());
  for (size_t i = 0; i < r.arms.size(); i++) {
    EXPECT_EQ(resumed.arms[i].val_loss, r.arms[i].val_loss) << i;
    EXPECT_EQ(resumed.arms[i].batches_hash, r.arms[i].batches_hash) << i;
  }
  for (size_t i = 0; i < 4; i++)  // seed 1's times come back from its file
    EXPECT_EQ(resumed.arms[i].val_seconds, r.arms[i].val_seconds) << i;
  // A seed file from another comparison is not mixed in.
  fs::remove(dir / "report/report.json");
  CompareConfig other = cfg;
  other.run.lr = 2e-3;
  EXPECT_THROW(compare(other), Error);
  compare(cfg);  // both seeds from their files: the report again
  EXPECT_TRUE(fs::exists(dir / "report/report.json"));
  // A report is replaced without --force by the same comparison only (it is the same report);
  // sa must come first.
  EXPECT_THROW(compare(other), Error);
  EXPECT_EQ(compare(cfg).arms[0].val_loss, r.arms[0].val_loss);
  cfg.run.force = true;
  cfg.variants = {"xsa", "sa"};
  EXPECT_THROW(compare(cfg), Error);
  fs::remove_all(dir);
}

// How sure a tuning's choices are, on planted losses of 3 tuning seeds: the runner-up is the rate
// with the next lowest mean that never diverged, its margin the paired differences' mean with the
// t-interval computed here from a table of t (t(0.975, 2) = 4.302653).
TEST(Compare, TuningMarginIsTheRunnerUpOverTheChoicePairedBySeed) {
  LrTuning t;
  t.lrs = {1e-3, 2e-3, 4e-3};
  t.seeds = {1001, 1002, 1003};
  t.seed_val_loss = {{{2.30, 2.20, 2.40}, {2.10, 2.12, 2.05}, {2.12, 2.08, 2.14}},
                     {{2.50, 2.60, 2.55}, {2.30, 2.35, 2.32}, {NAN, NAN, NAN}},
                     {{NAN, NAN, NAN}, {2.40, 2.41, 2.42}, {NAN, NAN, NAN}}};
  for (const auto& per_rate : t.seed_val_loss) {
    t.val_loss.emplace_back();
    for (const auto& seeds : per_rate)
      t.val_loss.back().push_back((seeds[0] + seeds[1] + seeds[2]) / 3);
  }
  t.chosen = {2e-3, 2e-3, 2e-3};
  comparison::measure_tuning_margins(t);
  ASSERT_EQ(t.runner_up.size(), 3u);
  EXPECT_EQ(t.runner_up[0], 4e-3);
  EXPECT_EQ(t.runner_up[1], 1e-3) << "4e-3 diverged: never the runner-up";
  EXPECT_TRUE(std::isnan(t.runner_up[2])) << "no other rate without divergence";
  EXPECT_EQ(t.margin[2].n, 0);
  const double tcrit = 4.302653;
  const std::vector<std::vector<double>> d = {{0.02, -0.04, 0.09}, {0.20, 0.25, 0.23}};
  for (size_t k = 0; k < 2; k++) {
    const double m = (d[k][0] + d[k][1] + d[k][2]) / 3;
    double ss = 0;
    for (double x : d[k]) ss += (x - m) * (x - m);
    const double half = tcrit * std::sqrt(ss / 2) / std::sqrt(3.0);
    EXPECT_EQ(t.margin[k].n, 3);
    EXPECT_NEAR(t.margin[k].mean, m, 1e-12) << k;
    EXPECT_NEAR(t.margin[k].ci_low, m - half, 1e-6) << k;
    EXPECT_NEAR(t.margin[k].ci_high, m + half, 1e-6) << k;
  }
  EXPECT_NE(tuning_margin_text(t, 0).find("over 3 tuning seeds: not told apart"), std::string::npos)
      << tuning_margin_text(t, 0);
  EXPECT_NE(tuning_margin_text(t, 1).find("ahead of 0.001 by 0.2267 ["), std::string::npos)
      << tuning_margin_text(t, 1);
  EXPECT_NE(tuning_margin_text(t, 1).find(": told apart)"), std::string::npos);
  EXPECT_EQ(tuning_margin_text(t, 2), "");
}

// --tune-lr: a planted best rate. Of 1e-4 (too small to move in 12 steps), 1e-2 and 1e30 (which
// turns the weights into infinities at once), every variant must get 1e-2; the diverged rate is
// reported, never chosen; the comparison then runs at the chosen rates on fresh seeds; and an
// interruption in the middle of the tuning resumes to the same report.
TEST(Compare, TuningPicksEachVariantsRateAndResumes) {
  fs::path dir;
  CompareConfig cfg = tiny_comparison("xsa_tune_test_", 16, {"sa", "xsa"}, dir);
  cfg.tune_lrs = {1e-4, 1e-2, 1e30};
  const CompareResult r = compare(cfg);
  ASSERT_EQ(r.tuning.chosen, (std::vector<double>{1e-2, 1e-2}));
  for (size_t k = 0; k < 2; k++) {
    EXPECT_LT(r.tuning.val_loss[k][1], r.tuning.val_loss[k][0]) << k;
    EXPECT_EQ(r.tuning.diverged[k][2], 1) << k;
    EXPECT_TRUE(std::isnan(r.tuning.val_loss[k][2])) << k;
  }
  EXPECT_EQ(r.tuning.seeds, (std::vector<uint64_t>{1 + kTuningSeedOffset}));
  ASSERT_EQ(r.arms.size(), 4u);
  for (const ArmResult& a : r.arms) {
    EXPECT_EQ(a.lr, 1e-2) << a.variant;
    EXPECT_LE(a.seed, 2u) << "confirmation seeds are fresh ones";
    EXPECT_TRUE(std::isfinite(a.val_loss));
  }
  for (const char* f : {"tune/lr-0.0001/seed-1001.json", "tune/lr-0.01/report.json",
                        "tune/lr-1e+30/seed-1001.json", "lr_tuning.svg"})
    EXPECT_TRUE(fs::exists(dir / "report" / f)) << f;
  const auto report = nlohmann::json::parse(read_file(dir / "report/report.json"));
  EXPECT_EQ(report["lr_tuning"]["chosen"], nlohmann::json({1e-2, 1e-2}));
  EXPECT_EQ(report["lr_tuning"]["diverged_seeds"][0][2], 1);
  EXPECT_EQ(report["summary"][1]["lr"], 1e-2);
  const std::string md = read_file(dir / "report/report.md");
  EXPECT_NE(md.find("## Learning rates"), std::string::npos);
  EXPECT_NE(md.find("diverged (1 of 1 seeds)"), std::string::npos);
  // How sure each choice is: the runner-up is 1e-4 (1e30 diverged), its margin the one tuning
  // seed's loss difference, with no interval.
  for (size_t k = 0; k < 2; k++) {
    EXPECT_EQ(r.tuning.runner_up[k], 1e-4) << k;
    EXPECT_EQ(r.tuning.margin[k].n, 1) << k;
    EXPECT_DOUBLE_EQ(r.tuning.margin[k].mean,
                     r.tuning.seed_val_loss[k][0][0] - r.tuning.seed_val_loss[k][1][0])
        << k;
    EXPECT_EQ(r.tuning.seed_val_loss[k][1][0], r.tuning.val_loss[k][1]) << k;
    EXPECT_TRUE(std::isnan(r.tuning.seed_val_loss[k][2][0])) << "diverged: no loss";
    EXPECT_TRUE(std::isnan(r.tuning.margin[k].ci_low)) << k;
  }
  EXPECT_NE(md.find("**How sure each choice is.**"), std::string::npos);
  EXPECT_NE(md.find("| sa | 0.01 | 0.0001 | +"), std::string::npos) << md;
  EXPECT_NE(md.find("not measured (one seed)"), std::string::npos);
  EXPECT_EQ(report["lr_tuning"]["runner_up"], nlohmann::json({1e-4, 1e-4}));
  EXPECT_EQ(report["lr_tuning"]["margin"][0]["n"], 1);
  EXPECT_TRUE(report["lr_tuning"]["margin"][0]["ci95"][0].is_null());
  EXPECT_TRUE(report["lr_tuning"]["seed_val_loss"][0][2][0].is_null());
  // Interrupted during the tuning: one rate's comparison and the confirmation not finished.
  for (const char* f :
       {"tune/lr-0.01/seed-1001.json", "tune/lr-0.01/report.json", "seed-2.json", "report.json"})
    fs::remove(dir / "report" / f);
  const CompareResult again = compare(cfg);
  EXPECT_EQ(again.tuning.chosen, r.tuning.chosen);
  for (size_t k = 0; k < 2; k++)
    for (size_t i = 0; i < 2; i++) EXPECT_EQ(again.tuning.val_loss[k][i], r.tuning.val_loss[k][i]);
  ASSERT_EQ(again.arms.size(), r.arms.size());
  for (size_t i = 0; i < r.arms.size(); i++) EXPECT_EQ(again.arms[i].val_loss, r.arms[i].val_loss);
  EXPECT_EQ(r.tuning.lrs, cfg.tune_lrs) << "every choice inside the grid: no extension";
  EXPECT_EQ(r.tuning.extended_down + r.tuning.extended_up, 0);
  // A choice at the grid's edge (1e-2, the top of 1e-4 and 1e-2) extends it by one step (×100) in
  // that direction, run by the variants chosen there; at 1 the tiny model learns worse, so 1e-2 is
  // then inside and the extension stops.
  {
    CompareConfig edge = cfg;
    edge.tune_lrs = {1e-4, 1e-2};
    edge.run.out = (dir / "edge").string();
    const CompareResult e = compare(edge);
    EXPECT_EQ(e.tuning.grid, edge.tune_lrs);
    EXPECT_EQ(e.tuning.lrs, (std::vector<double>{1e-4, 1e-2, 1}));
    EXPECT_EQ(e.tuning.extended_up, 1);
    EXPECT_EQ(e.tuning.extended_down, 0);
    EXPECT_EQ(e.tuning.chosen, (std::vector<double>{1e-2, 1e-2}));
    EXPECT_TRUE(fs::exists(dir / "edge/tune/lr-1/report.json"));
    const auto j = nlohmann::json::parse(read_file(dir / "edge/report.json"));
    EXPECT_EQ(j["lr_tuning"]["grid"], nlohmann::json({1e-4, 1e-2}));
    EXPECT_EQ(j["lr_tuning"]["lrs"], nlohmann::json({1e-4, 1e-2, 1.0}));
    // The same command again: the report is this tuning's (its grid, not the extended rates).
    EXPECT_NO_THROW(compare(edge));
  }
  // Another tuning into the same folder is another comparison: refused before it tunes anything.
  CompareConfig other = cfg;
  other.tune_lrs = {1e-3, 1e-2};
  EXPECT_THROW(compare(other), Error);
  EXPECT_FALSE(fs::exists(dir / "report/tune/lr-0.001"));
  // One arm diverging while the other goes on (XSA at 1e30, SA at 1e-2, each its own rate): SA's
  // figures are whole, XSA's seeds stop at once with no final loss, the report says so, and no
  // difference is made up for it.
  CompareConfig diverging = cfg;
  diverging.tune_lrs.clear();
  diverging.variant_lrs = {1e-2, 1e30};
  diverging.run.lr = 1e-2;
  diverging.run.out = (dir / "diverging").string();
  const CompareResult d = compare(diverging);
  ASSERT_EQ(d.arms.size(), 4u);
  for (const ArmResult& a : d.arms) {
    if (a.variant == "sa") {
      EXPECT_EQ(a.diverged_at, 0);
      EXPECT_TRUE(std::isfinite(a.val_loss));
      EXPECT_EQ(a.position_loss.size(), 1u);
    } else {  // the first step's weights come out at 1e29 or so: the next forward overflows
      EXPECT_GE(a.diverged_at, 1);
      EXPECT_LE(a.diverged_at, 2);
      EXPECT_TRUE(std::isnan(a.val_loss));
      EXPECT_TRUE(a.position_loss.empty());
    }
  }
  EXPECT_TRUE(std::isfinite(d.summary[0].val_loss_mean));
  EXPECT_TRUE(std::isnan(d.summary[1].delta_vs_sa_mean));
  EXPECT_TRUE(std::isnan(d.summary[1].delta.p_wilcoxon));
  EXPECT_EQ(d.summary[1].verdict, "no figure: an arm diverged");
  const std::string diverged_md = read_file(dir / "diverging/report.md");
  EXPECT_NE(diverged_md.find("Diverged (loss or gradient"), std::string::npos);
  EXPECT_NE(diverged_md.find("xsa seed 2 at step "), std::string::npos) << diverged_md;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace xsa

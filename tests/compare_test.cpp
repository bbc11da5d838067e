// The research tools: variants, statistics, the similarity-bias analysis against an independent
// float64 computation, and xsa compare end to end, including the proof that twins are twins.
#include "xsa/research/compare.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "bounds.h"
#include "xsa/analysis/similarity_bias.h"
#include "xsa/ops/reference.h"
#include "xsa/util/error.h"
#include "xsa/util/files.h"
#include "xsa/util/stats.h"

namespace xsa {
namespace {

namespace fs = std::filesystem;

TEST(Stats, PairedTTestMatchesKnownValues) {
  // d = 1..5: mean 3, sd 1.5811, t = 4.2426 with 4 degrees of freedom: p = 0.0132356 (two-sided;
  // by Simpson integration of the t density, independently of the incomplete-beta code). Each
  // bound is the precision of the value it is held to: its last printed digit.
  EXPECT_NEAR(paired_t_test_p({1, 2, 3, 4, 5}), 0.0132356, 1e-6);
  // The 5 % critical values of Student's t: 12.706 (1 dof), 2.776 (4), 2.228 (10).
  EXPECT_NEAR(student_t_two_sided_p(12.7062, 1), 0.05, 1e-5);
  EXPECT_NEAR(student_t_two_sided_p(2.77645, 4), 0.05, 1e-5);
  EXPECT_NEAR(student_t_two_sided_p(2.22814, 10), 0.05, 1e-5);
  EXPECT_NEAR(student_t_two_sided_p(0, 7), 1.0, 1e-12);
  EXPECT_TRUE(std::isnan(paired_t_test_p({0.3})));  // one seed: no test
  EXPECT_NEAR(sample_sd({2, 4, 4, 4, 5, 5, 7, 9}), 2.13809, 1e-5);
}

// Exact values from Python's integer binomials: min(1, 2 Σ_{i ≤ min(b,c)} C(b+c, i) / 2^(b+c)).
// The power of the paired t-test: at no effect it is the test's level; for many seeds it is the
// normal closed form Φ(λ − t_c) + Φ(−λ − t_c); and the seeds it asks for at 80 % power are those
// of the published tables (Cohen; G*Power, one-sample/paired t, two-sided α = 0.05: d = 0.5 → 34,
// 0.8 → 15, 1.0 → 10), which a Monte Carlo of 400 000 paired t-tests confirmed when this was
// written (power 0.803 at d = 1, n = 10).
TEST(Stats, PairedTPowerAgainstClosedFormsAndTables) {
  for (int n : {2, 3, 5, 30}) EXPECT_NEAR(paired_t_power(0.0, 1.0, n), 0.05, 1e-6) << n;
  const auto phi = [](double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); };
  for (double lambda : {1.0, 2.8, 4.0}) {
    const int n = 5000;
    const double t = student_t_two_sided_critical(0.05, n - 1);
    EXPECT_NEAR(paired_t_power(lambda / std::sqrt(n), 1.0, n), phi(lambda - t) + phi(-lambda - t),
                1e-3)
        << lambda;
  }
  EXPECT_NEAR(student_t_two_sided_critical(0.05, 9), 2.262157, 1e-5);
  EXPECT_EQ(seeds_for_power(0.5, 1.0), 34);
  EXPECT_EQ(seeds_for_power(-0.8, 1.0), 15);
  EXPECT_EQ(seeds_for_power(0.01, 0.01), 10);
  EXPECT_EQ(seeds_for_power(0.0, 1.0), 1001);
  EXPECT_EQ(seeds_for_power(0.01, 1.0, 0.8, 0.05, 50), 51);
}

// --seeds auto's rule and the parsing of --seeds.
TEST(Stats, AutoSeedsAnswerAndParsing) {
  EXPECT_EQ(seed_answer({-0.1, -0.11}, 10), SeedAnswer::unclear);  // fewer than 3 seeds
  EXPECT_EQ(seed_answer({-0.1, -0.11, -0.09}, 10), SeedAnswer::differs);
  EXPECT_EQ(seed_answer({0.01, -0.01, 0.005}, 10), SeedAnswer::too_small);
  EXPECT_EQ(seed_answer({-0.1, 0.0, -0.15}, 10), SeedAnswer::unclear);  // p 0.2, 9 seeds would do
  EXPECT_EQ(seed_answer({-0.1, 0.0, -0.15}, 5), SeedAnswer::too_small);
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
}

TEST(Stats, McNemarMatchesExactBinomialSums) {
  EXPECT_NEAR(mcnemar_exact_p(10, 2), 0.03857421875, 1e-12);  // 2 · 79 / 4096
  EXPECT_NEAR(mcnemar_exact_p(2, 10), 0.03857421875, 1e-12);
  EXPECT_NEAR(mcnemar_exact_p(0, 6), 0.03125, 1e-12);
  EXPECT_NEAR(mcnemar_exact_p(60, 40), 0.05688793364098079, 1e-10);
  EXPECT_NEAR(mcnemar_exact_p(400, 350), 0.07350777405843545, 1e-9);
  EXPECT_EQ(mcnemar_exact_p(5, 5), 1.0);
  EXPECT_EQ(mcnemar_exact_p(0, 0), 1.0);
  EXPECT_EQ(mcnemar_exact_p(1, 0), 1.0);
}

TEST(Variants, LayerSelections) {
  auto layers = [](const std::string& name) {
    Variant v = parse_variant(name, 4);
    std::string s;
    for (int l = 0; l < 4; l++) s += v.layers[l] == AttnKind::xsa ? 'X' : 's';
    return s;
  };
  EXPECT_EQ(layers("sa"), "ssss");
  EXPECT_EQ(layers("xsa"), "XXXX");
  EXPECT_EQ(layers("xsa-last2"), "ssXX");
  EXPECT_EQ(layers("xsa-first1"), "Xsss");
  EXPECT_EQ(layers("xsa-layers-0.3"), "XssX");
  EXPECT_EQ(parse_variant("xsa-gated-one", 4).layers[2], AttnKind::xsa_gated_one);
  EXPECT_TRUE(parse_variant("xsa-last1+sink", 4).sinks[0]);
  const Variant twin = parse_variant("xsa-last1+sink@bf16", 4);
  EXPECT_EQ(twin.precision, "bf16");
  EXPECT_TRUE(twin.sinks[0]);
  EXPECT_EQ(twin.layers[3], AttnKind::xsa);
  EXPECT_EQ(parse_variant("xsa", 4).precision, "");
  for (const char* bad : {"xsa-last5", "xsa-last0", "xsa-first", "xsa-layers-4", "xsa-layers-1.x",
                          "gated", "xsa@fp16", "xsa@", "@bf16"})
    EXPECT_THROW(parse_variant(bad, 4), Error) << bad;
}

// The analysis against an independent computation: the reference attention in double on the
// model's own q, k, v gives y; the mean cos(y_i, v_i) over positions ≥ 1 must agree. The float
// forward's y is within the forward chain's bound of its scale (tests/bounds.h); a cosine moves by
// at most the relative error of each of its two vectors, a probability by its own: twice the
// chain's bound.
TEST(Analyze, MatchesAnIndependentComputation) {
  ModelConfig cfg;
  cfg.n_layer = 2, cfg.n_head = 2, cfg.n_embd = 16, cfg.seq_len = 12;
  set_layer_attn(cfg, "sa,xsa");
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
    ref::attention_forward(y.data(), lse.data(), qkv.data(), B, T, C, H);
    for (int h = 0; h < H; h++) {
      double sum = 0, self = 0;
      int n = 0;
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
          self += std::exp(qk / std::sqrt((double)D) - lse[(b * H + h) * T + t]);
          n++;
        }
      const HeadBias& r = heads[l * H + h];
      const double bound =
          2 * test::chain_error(test::model_chain(cfg, B, T).forward, test::kFloatRoundoff);
      EXPECT_NEAR(r.cos_yv, sum / n, bound) << "layer " << l << " head " << h;
      EXPECT_NEAR(r.self_weight, self / n, bound);
      EXPECT_GE(r.cos_vv, -1.0);
      EXPECT_LE(r.cos_vv, 1.0);
      if (l == 0) {
        EXPECT_TRUE(std::isnan(r.cos_zv)) << "SA layers have no z";
      }
      if (l == 1) {
        EXPECT_LT(r.cos_zv, 1e-9) << "XSA removes the own-value direction";
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
    set_layer_attn(cfg, attn);
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
    if (cfg.rivals.no_self) self = 0;
    // Up to the float forward's rounding: twice the chain's bound (as above).
    const double bound =
        2 * test::chain_error(test::model_chain(cfg, B, T).forward, test::kFloatRoundoff);
    for (const HeadBias& h : heads) {
      EXPECT_NEAR(h.cos_yv, 1.0, bound) << attn;
      EXPECT_NEAR(h.cos_vv, 1.0, bound) << attn;
      EXPECT_NEAR(h.self_weight, self, bound) << attn;
    }
  }
}

TEST(Compare, TwinsAreTwinsAndTheReportHoldsItsFields) {
  fs::path dir = fs::temp_directory_path() / ("xsa_compare_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string text;
  for (int i = 0; text.size() < 40000; i++)
    text += "sentence " + std::to_string(i * 7919 % 1000) + " of the corpus.\n";
  std::ofstream(dir / "data.txt") << text;
  CompareConfig cfg;
  cfg.model.n_layer = 2, cfg.model.n_head = 2, cfg.model.n_embd = 16, cfg.model.seq_len = 16;
  cfg.run.data = (dir / "data.txt").string();
  cfg.run.out = (dir / "report").string();
  cfg.run.batch = 4, cfg.run.steps = 12, cfg.run.val_every = 6, cfg.run.val_batches = 2,
  cfg.run.threads = 1;
  cfg.run.quiet = true;
  cfg.variants = {"sa", "xsa", "xsa-last1", "xsa-gated"};
  cfg.seeds = 2;
  cfg.eval_data = {(dir / "data.txt").string()};
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
  // The equal-loss view: each arm's training time at every validation point (rising, ending at its
  // steps' wall-clock, about steps × its median step), and per variant the summary of
  // equal_loss() over the seeds' curves, which equal_loss_test holds to constructed curves.
  for (const ArmResult& a : r.arms) {
    ASSERT_EQ(a.val_seconds.size(), a.val_curve.size()) << a.variant;
    EXPECT_EQ(a.val_seconds.front(), 0.0);
    for (size_t i = 1; i < a.val_seconds.size(); i++)
      EXPECT_GT(a.val_seconds[i], a.val_seconds[i - 1]) << a.variant;
    EXPECT_GT(a.val_seconds.back(), 0.3 * cfg.run.steps * a.ms_per_step / 1000) << a.variant;
  }
  EXPECT_TRUE(report["summary"][0]["equal_loss"].is_null());
  for (size_t k = 1; k < 4; k++) {
    const auto& e = report["summary"][k]["equal_loss"];
    const std::string v = report["summary"][k]["variant"];
    std::vector<std::vector<CurvePoint>> sa_curves, curves;
    for (const ArmResult* a : arms_of(r, "sa")) sa_curves.push_back(curve_of(*a));
    for (const ArmResult* a : arms_of(r, v)) curves.push_back(curve_of(*a));
    const EqualLoss expected = equal_loss(sa_curves, curves, 4 * 16);
    EXPECT_EQ(e["seeds"], 2) << v;
    EXPECT_EQ(e["seeds_reached"], expected.reached) << v;
    if (expected.reached > 0) {
      EXPECT_DOUBLE_EQ(e["steps_mean"].get<double>(), expected.steps_mean) << v;
      EXPECT_DOUBLE_EQ(e["tokens_mean"].get<double>(), expected.steps_mean * 4 * 16) << v;
    } else {
      EXPECT_TRUE(e["steps_mean"].is_null()) << v;
    }
    EXPECT_DOUBLE_EQ(e["val_loss_at_sa_time_mean"].get<double>(), expected.loss_at_sa_time_mean);
  }
  EXPECT_GT(report["validation"]["share_of_wall_clock"].get<double>(), 0);
  EXPECT_LT(report["validation"]["share_of_wall_clock"].get<double>(), 1);
  for (const char* f : {"report.md", "val_loss.svg", "val_loss_by_time.svg", "delta_vs_sa.svg",
                        "similarity_bias.svg"})
    EXPECT_TRUE(fs::exists(dir / "report" / f)) << f;
  EXPECT_TRUE(fs::exists(dir / "report/arms/xsa-seed2"));
  // The table says how its timing columns are measured; the plot's title reads as it should.
  const std::string md = read_file(dir / "report/report.md");
  const size_t table_end = md.find("\n\n", md.find("| variant"));
  EXPECT_EQ(md.find(kTimingNote), table_end + 1) << md;
  EXPECT_NE(read_file(dir / "report/similarity_bias.svg").find("Attention similarity bias: mean"),
            std::string::npos);
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

}  // namespace
}  // namespace xsa

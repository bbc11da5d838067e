// Sampling: each filter against a plain recomputation (softmax in double, a full sort), the drawn
// frequencies against the distribution, seed reproducibility; generation through the cache against
// recomputing every step with the full forward (greedy, across context shifts); bad input.
#include "xsa/infer/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "bounds.h"
#include "test_util.h"
#include "xsa/model/gpt.h"
#include "xsa/util/error.h"

namespace xsa {
namespace {

std::vector<float> random_logits(int V, uint64_t seed, double scale = 2.0) {
  return test::cast_vector<float>(test::random_vector(V, seed, scale));
}

// The reference: softmax(l / T) over all tokens, sorted by probability (ties by id), cut by top-k,
// then by top-p (the fewest tokens whose probability reaches p), renormalized.
std::vector<std::pair<int32_t, double>> reference(const std::vector<float>& logits, double T, int k,
                                                  double p) {
  const int V = (int)logits.size();
  std::vector<int32_t> ids(V);
  std::iota(ids.begin(), ids.end(), 0);
  std::sort(ids.begin(), ids.end(), [&](int a, int b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  if (k > 0 && k < V) ids.resize(k);
  std::vector<double> w;
  for (int id : ids) w.push_back(std::exp((double)logits[id] / T));
  double sum = std::accumulate(w.begin(), w.end(), 0.0);
  size_t keep = ids.size();
  if (p < 1) {
    double mass = 0;
    for (size_t i = 0; i < ids.size(); i++) {
      mass += w[i] / sum;
      if (mass >= p) {
        keep = i + 1;
        break;
      }
    }
  }
  double kept = std::accumulate(w.begin(), w.begin() + keep, 0.0);
  std::vector<std::pair<int32_t, double>> out;
  for (size_t i = 0; i < keep; i++) out.push_back({ids[i], w[i] / kept});
  return out;
}

void expect_same(std::vector<std::pair<int32_t, double>> got,
                 std::vector<std::pair<int32_t, double>> want) {
  // Without a cut the sampler keeps id order; compare as sets by sorting both by id.
  auto by_id = [](const auto& a, const auto& b) { return a.first < b.first; };
  std::sort(got.begin(), got.end(), by_id), std::sort(want.begin(), want.end(), by_id);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); i++) {
    EXPECT_EQ(got[i].first, want[i].first);
    EXPECT_NEAR(got[i].second, want[i].second, 1e-12);
  }
}

TEST(Sampler, FiltersMatchAPlainRecomputation) {
  const std::vector<float> logits = random_logits(1000, 3);
  for (double T : {0.5, 1.0, 1.7})
    for (int k : {0, 1, 7, 200})
      for (double p : {1.0, 0.9, 0.5, 0.01}) {
        SCOPED_TRACE(testing::Message() << "T " << T << " k " << k << " p " << p);
        Sampler s({.temperature = T, .top_k = k, .top_p = p, .seed = 1});
        expect_same(s.distribution(logits.data(), 1000), reference(logits, T, k, p));
      }
}

TEST(Sampler, CutDistributionsComeMostLikelyFirst) {
  const std::vector<float> logits = random_logits(500, 8);
  Sampler s({.temperature = 1.0, .top_k = 50, .top_p = 0.8, .seed = 1});
  const auto d = s.distribution(logits.data(), 500);
  const auto want = reference(logits, 1.0, 50, 0.8);
  ASSERT_EQ(d.size(), want.size());
  for (size_t i = 0; i < d.size(); i++) EXPECT_EQ(d[i].first, want[i].first);
}

TEST(Sampler, TiesAtTheCutGoToTheLowerIds) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 2.0f, 2.0f, 0.0f};
  Sampler k({.temperature = 1.0, .top_k = 3, .seed = 1});
  const auto d = k.distribution(logits.data(), 6);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].first, 1);
  EXPECT_EQ(d[1].first, 2);
  EXPECT_EQ(d[2].first, 3);
  expect_same(d, reference(logits, 1.0, 3, 1.0));
  // Top-p reaching its mass inside a run of equal logits cuts the run by id.
  Sampler p({.temperature = 1.0, .top_p = 0.5, .seed = 1});
  const auto cut = p.distribution(logits.data(), 6);
  ASSERT_EQ(cut.size(), 2u);  // 0.44 after token 1, 0.60 after token 2 (of 2, 3, 4 equal)
  expect_same(cut, reference(logits, 1.0, 0, 0.5));
}

TEST(Sampler, ATinyTemperatureIsGreedyNotNaN) {
  const std::vector<float> logits = random_logits(100, 12);
  Sampler tiny({.temperature = 1e-300, .seed = 1});
  const auto d = tiny.distribution(logits.data(), 100);
  const int32_t top = (int32_t)(std::max_element(logits.begin(), logits.end()) - logits.begin());
  for (const auto& [id, prob] : d) EXPECT_EQ(prob, id == top ? 1.0 : 0.0) << id;
  EXPECT_EQ(tiny.sample(logits.data(), 100), top);
}

TEST(Sampler, GreedyIsTheArgmaxWithTheLowestIdAmongEquals) {
  std::vector<float> logits = {0.5f, 3.0f, -1.0f, 3.0f};
  Sampler s({.temperature = 0, .seed = 1});
  for (int i = 0; i < 5; i++) EXPECT_EQ(s.sample(logits.data(), 4), 1);
}

// 40 000 draws from five tokens: each frequency within 4.5 standard errors of its probability.
TEST(Sampler, DrawsFollowTheDistribution) {
  const std::vector<float> logits = {1.0f, 0.0f, 2.0f, -1.0f, 0.5f};
  Sampler s({.temperature = 1.0, .seed = 42});
  const auto dist = reference(logits, 1.0, 0, 1.0);
  const int draws = 40000;
  std::vector<int> count(5);
  for (int i = 0; i < draws; i++) count[s.sample(logits.data(), 5)]++;
  for (const auto& [id, p] : dist) {
    const double se = std::sqrt(p * (1 - p) / draws);
    EXPECT_NEAR((double)count[id] / draws, p, 4.5 * se) << "token " << id;
  }
}

// The same through top-k and top-p: 40 000 draws from the kept, renormalized tokens only.
TEST(Sampler, DrawsFollowTheCutDistribution) {
  const std::vector<float> logits = {1.0f, 0.0f, 2.0f, -1.0f, 0.5f, 1.5f};
  Sampler s({.temperature = 0.7, .top_k = 4, .top_p = 0.9, .seed = 9});
  const auto dist = reference(logits, 0.7, 4, 0.9);
  ASSERT_LT(dist.size(), 4u);  // top-p cut below top-k's four
  const int draws = 40000;
  std::vector<int> count(6);
  for (int i = 0; i < draws; i++) count[s.sample(logits.data(), 6)]++;
  int kept = 0;
  for (const auto& [id, p] : dist) {
    const double se = std::sqrt(p * (1 - p) / draws);
    EXPECT_NEAR((double)count[id] / draws, p, 4.5 * se) << "token " << id;
    kept += count[id];
  }
  EXPECT_EQ(kept, draws) << "a token outside the cut was drawn";
}

TEST(Sampler, SameSeedSameTokensOtherSeedOthers) {
  const std::vector<float> logits = random_logits(300, 4, 0.5);
  auto draw = [&](uint64_t seed) {
    Sampler s({.temperature = 1.0, .top_k = 100, .top_p = 0.95, .seed = seed});
    std::vector<int32_t> out;
    for (int i = 0; i < 50; i++) out.push_back(s.sample(logits.data(), 300));
    return out;
  };
  EXPECT_EQ(draw(7), draw(7));
  EXPECT_NE(draw(7), draw(8));
}

TEST(Sampler, RefusesBadSettings) {
  EXPECT_THROW(Sampler({.temperature = -1}), Error);
  EXPECT_THROW(Sampler({.top_k = -2}), Error);
  EXPECT_THROW(Sampler({.top_p = 0}), Error);
  EXPECT_THROW(Sampler({.top_p = 1.5}), Error);
}

// A model with weights large enough that greedy decoding does not settle into one token, its
// decoder (a cache of the model's context) and a greedy sampler.
struct GreedySetup {
  ModelConfig cfg = test::small_test_config(40, 2, 12, "sa,xsa");
  Gpt<float> model{cfg, 1, cfg.seq_len, GptMode::inference};
  Decoder<float> decoder{cfg, (init(), model.params().w), cfg.seq_len};
  Sampler greedy{{.temperature = 0}};

  int init() {
    model.params().init(cfg, 3);
    for (size_t i = 0; i < model.params().params.size(); i++) model.params().params.data()[i] *= 6;
    return 0;
  }
};

int32_t argmax(const float* x, int n) {
  return (int32_t)(std::max_element(x, x + n) - x);
}

// Greedy generation past the context (three shifts) equals recomputing each step from scratch:
// the full forward of the window the cache holds (the sequence since the last shift). Both sides
// round (other sums, other orders), each within the forward chain's bound of the logits' scale
// (tests/bounds.h): a step whose two most likely tokens are closer than twice that could go either
// way, and from it on the sequences may part. The tokens are compared up to such a step (none in
// this fixture: all 25 are compared).
TEST(Generate, GreedyThroughTheCacheEqualsRecomputingEachStep) {
  GreedySetup g;
  const ModelConfig& cfg = g.cfg;
  Gpt<float>& model = g.model;
  Decoder<float>& decoder = g.decoder;
  Sampler& greedy = g.greedy;
  const std::vector<int32_t> prompt = {5, 17, 3};
  const GenerateResult r = generate(decoder, prompt, 25, greedy, -1, [](int32_t) {});
  ASSERT_EQ(r.tokens.size(), 25u);
  EXPECT_EQ(r.context_shifts, 3);  // 3 + 9 fills 12; then +6 each time from the kept 6

  std::vector<int32_t> window = prompt, history = prompt, want;
  std::vector<float> logits(cfg.padded_vocab);
  const double chain =
      test::chain_error(test::model_chain(cfg, 1, cfg.seq_len).forward, test::kFloatRoundoff);
  size_t decided = 0;
  for (int i = 0; i < 25; i++) {
    auto full = test::copy_model<float>(model, (int)window.size());
    std::vector<int32_t> targets(window.size(), -1);
    full->forward(window.data(), targets.data());
    full->logits_row((int)window.size() - 1, logits.data());
    const int32_t token = argmax(logits.data(), cfg.vocab_size);
    double top = 0, second = -INFINITY;
    for (int j = 0; j < cfg.vocab_size; j++) {
      top = std::max(top, (double)std::fabs(logits[j]));
      if (j != token) second = std::max(second, (double)logits[j]);
    }
    if (decided == want.size() && logits[token] - second > 2 * 2 * chain * top) decided++;
    if (std::getenv("XSA_SHOW_BOUNDS"))
      std::printf("gap use %g\n", 4 * chain * top / (logits[token] - second));
    want.push_back(token), history.push_back(token);
    if ((int)window.size() == cfg.seq_len)
      window.assign(history.end() - cfg.seq_len / 2, history.end());
    else
      window.push_back(token);
  }
  ASSERT_EQ(decided, 25u) << "a step of the fixture is a near tie: choose other weights";
  EXPECT_EQ(std::vector<int32_t>(r.tokens.begin(), r.tokens.begin() + decided),
            std::vector<int32_t>(want.begin(), want.begin() + decided));
}

TEST(Generate, StopsAtTheStopTokenAndRefusesBadPrompts) {
  GreedySetup g;
  const ModelConfig& cfg = g.cfg;
  Decoder<float>& decoder = g.decoder;
  Sampler& greedy = g.greedy;
  const GenerateResult first = generate(decoder, {1, 2}, 5, greedy, -1, [](int32_t) {});
  // The first greedy token as the stop token: generation ends right after it.
  const GenerateResult stopped =
      generate(decoder, {1, 2}, 5, greedy, first.tokens[0], [](int32_t) {});
  EXPECT_EQ(stopped.tokens.size(), 1u);
  EXPECT_TRUE(stopped.stopped_at_end_of_text);
  EXPECT_THROW(generate(decoder, {}, 5, greedy, -1, [](int32_t) {}), Error);
  EXPECT_THROW(
      generate(decoder, std::vector<int32_t>(cfg.seq_len + 1, 1), 5, greedy, -1, [](int32_t) {}),
      Error);
}

}  // namespace
}  // namespace xsa

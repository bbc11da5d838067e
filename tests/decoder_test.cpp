// Incremental decoding with the key/value cache against the full forward of the whole sequence
// (the training model, which the gradient checks hold to finite differences): token by token, in
// chunks over several passes, and segments side by side after one cached prefix (some continuing
// another, as the answers of a question do). Every attention variant, in float and in double:
// both sides round, each within the forward chain's bound of exact arithmetic (tests/bounds.h),
// so every row of logits is within twice that bound of the row's largest logit.
#include "xsa/model/decoder.h"

#include <gtest/gtest.h>

#include "bounds.h"
#include "test_util.h"
#include "xsa/model/gpt.h"
#include "xsa/util/error.h"

namespace xsa {
namespace {

// attn as in --attn; "gqa:" gives two query heads per key/value head, "gpt2:" the GPT-2
// architecture (learned positions, linear biases).
ModelConfig decoder_config(std::string attn) {
  ModelConfig cfg;
  if (attn.rfind("gpt2:", 0) == 0) set_architecture(cfg, "gpt2"), attn = attn.substr(5);
  if (attn.rfind("gqa:", 0) == 0) cfg.n_kv_head = 2, attn = attn.substr(4);
  cfg.vocab_size = 70;
  cfg.padded_vocab = pad_vocab(cfg.vocab_size);
  cfg.n_layer = 2, cfg.n_head = 4, cfg.n_embd = 32, cfg.seq_len = 24;
  set_attention(cfg, attn);
  return cfg;
}

// Weights far from init (gates and sinks not at their starting values), so that attention is
// sharp, XSA's removal matters and every gate and sink changes the result.
template <typename Real>
void randomize(ParamArena<Real>& arena, const ModelConfig& cfg) {
  arena.init(cfg, 11);
  Rng rng(5);
  for (const TensorInfo& t : arena.layout)
    for (size_t i = 0; i < t.numel; i++) {
      Real& p = arena.params.data()[t.offset + i];
      p = t.init == Init::ones || t.init == Init::zeros ? p + Real(0.5 * rng.normal()) : p * 8;
    }
}

std::vector<int32_t> random_tokens(int n, int V, uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> t(n);
  for (int32_t& x : t) x = (int32_t)(rng.next_u64() % V);
  return t;
}

// Logits after every token of `tokens`, from one full forward of the training model.
template <typename Real>
std::vector<Real> full_logits(Gpt<Real>& model, const std::vector<int32_t>& tokens) {
  const int T = (int)tokens.size(), Vp = model.config().padded_vocab;
  auto run = test::copy_model<Real>(model, T);
  std::vector<int32_t> targets(T, -1);
  run->forward(tokens.data(), targets.data());
  std::vector<Real> out((size_t)T * Vp);
  for (int t = 0; t < T; t++) run->logits_row(t, out.data() + (size_t)t * Vp);
  return out;
}

// Largest norm-relative error of any row (each row against its own scale).
template <typename Real>
double row_error(const Real* a, const Real* b, int rows, int Vp) {
  double worst = 0;
  for (int r = 0; r < rows; r++)
    worst = std::max(worst, test::max_rel_error(a + (size_t)r * Vp, b + (size_t)r * Vp, Vp));
  if (std::getenv("XSA_SHOW_BOUNDS")) std::printf("row error %g\n", worst);
  return worst;
}

template <typename Real>
void check_equivalence(const std::string& attn) {
  SCOPED_TRACE(attn);
  const ModelConfig cfg = decoder_config(attn);
  const int T = cfg.seq_len, Vp = cfg.padded_vocab;
  const double tolerance =
      2 * test::chain_error(test::model_chain(cfg, 1, T).forward, test::roundoff<Real>());
  Gpt<Real> model(cfg, 1, T, GptMode::inference);
  randomize(model.params(), cfg);
  const std::vector<int32_t> tokens = random_tokens(T, cfg.vocab_size, 9);
  const std::vector<Real> full = full_logits(model, tokens);

  {  // one token at a time, each with its own incremental forward
    Decoder<Real> dec(cfg, model.params().w, T);
    for (int t = 0; t < T; t++) {
      const Real* logits = dec.append(&tokens[t], 1);
      EXPECT_LT(row_error(logits, full.data() + (size_t)t * Vp, 1, Vp), tolerance) << "t " << t;
    }
    EXPECT_EQ(dec.length(), T);
  }
  {  // the whole sequence in one pass on an empty cache (the tiled training kernel)
    Decoder<Real> dec(cfg, model.params().w, T);
    std::vector<Real> got((size_t)T * Vp);
    dec.append_all(tokens.data(), T, got.data());
    EXPECT_LT(row_error(got.data(), full.data(), T, Vp), tolerance);
  }
  {  // uneven chunks through passes of at most 4 rows; every row's logits
    Decoder<Real> dec(cfg, model.params().w, T, /*max_rows=*/4);
    std::vector<Real> got((size_t)T * Vp);
    for (int at = 0, chunk = 1; at < T; at += chunk, chunk = chunk % 7 + 2) {
      chunk = std::min(chunk, T - at);
      dec.append_all(&tokens[at], chunk, got.data() + (size_t)at * Vp);
    }
    EXPECT_LT(row_error(got.data(), full.data(), T, Vp), tolerance);
  }
  {  // segments side by side after a cached prefix: two on their own, and two continuing a third
     // (a question and its answers); each against its whole sequence's full forward
    const int prefix = 9;
    Decoder<Real> dec(cfg, model.params().w, 2 * T, /*max_rows=*/5);
    dec.append(tokens.data(), prefix);
    using Segment = typename Decoder<Real>::Segment;
    const std::vector<Segment> segments = {{random_tokens(6, cfg.vocab_size, 1), -1},
                                           {random_tokens(1, cfg.vocab_size, 2), -1},
                                           {random_tokens(5, cfg.vocab_size, 3), -1},
                                           {random_tokens(4, cfg.vocab_size, 4), 2},
                                           {random_tokens(1, cfg.vocab_size, 5), 2}};
    const int rows = 17;
    std::vector<Real> features((size_t)rows * cfg.n_embd), got((size_t)rows * Vp);
    dec.branch(segments, features.data());
    dec.head(features.data(), rows, got.data());
    EXPECT_EQ(dec.length(), prefix);  // the cache still holds the prefix alone
    size_t row = 0;
    for (const Segment& seg : segments) {
      std::vector<int32_t> seq(tokens.begin(), tokens.begin() + prefix);
      if (seg.parent >= 0)
        seq.insert(seq.end(), segments[seg.parent].tokens.begin(),
                   segments[seg.parent].tokens.end());
      const size_t before = seq.size();
      seq.insert(seq.end(), seg.tokens.begin(), seg.tokens.end());
      const std::vector<Real> want = full_logits(model, seq);
      EXPECT_LT(
          row_error(got.data() + row * Vp, want.data() + before * Vp, (int)seg.tokens.size(), Vp),
          tolerance)
          << "segment at row " << row;
      row += seg.tokens.size();
    }
    // And the prefix continues as if no branch had happened.
    const Real* next = dec.append(&tokens[prefix], 1);
    EXPECT_LT(row_error(next, full.data() + (size_t)prefix * Vp, 1, Vp), tolerance);
  }
}

class DecoderEquivalence : public ::testing::TestWithParam<std::string> {};

TEST_P(DecoderEquivalence, CacheMatchesFullForwardInFloat) {
  check_equivalence<float>(GetParam());
}
TEST_P(DecoderEquivalence, CacheMatchesFullForwardInDouble) {
  check_equivalence<double>(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Variants, DecoderEquivalence,
                         ::testing::Values("sa", "xsa", "xsa-gated", "xsa-gated-one", "xsa+sink",
                                           "sa+sink", "gqa:xsa", "gqa:sa,xsa-gated+sink", "sa,xsa",
                                           "gpt2:sa", "gpt2:gqa:xsa-gated+sink",
                                           // XSA's rivals (docs/SPEC.md §8)
                                           "sa+gated-attn", "xsa+gated-attn", "sa,xsa+gated-attn",
                                           "xsa+value-residual", "sa+no-self", "xsa+no-self",
                                           "sa+sink+no-self",
                                           "gqa:xsa+gated-attn+value-residual+no-self"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (!std::isalnum((unsigned char)c)) c = '_';
                           return name;
                         });

TEST(Decoder, RefusesWhatDoesNotFit) {
  const ModelConfig cfg = decoder_config("xsa");
  Gpt<float> model(cfg, 1, cfg.seq_len, GptMode::inference);
  Decoder<float> dec(cfg, model.params().w, cfg.seq_len + 8);
  const std::vector<int32_t> tokens = random_tokens(cfg.seq_len + 1, cfg.vocab_size, 4);
  EXPECT_THROW(dec.append(tokens.data(), cfg.seq_len + 1), Error);  // past the context
  EXPECT_EQ(dec.length(), 0);
  const int32_t bad = cfg.vocab_size;
  EXPECT_THROW(dec.append(&bad, 1), Error);
  dec.append(tokens.data(), 20);
  std::vector<float> features((size_t)13 * cfg.n_embd);
  // 4 + 4 + 4 + 1 = 13 tokens after 20 pass the 32 slots, though each fits the context of 24.
  const std::vector<Decoder<float>::Segment> four = {{random_tokens(4, cfg.vocab_size, 1), -1},
                                                     {random_tokens(4, cfg.vocab_size, 2), -1},
                                                     {random_tokens(4, cfg.vocab_size, 3), -1},
                                                     {random_tokens(1, cfg.vocab_size, 4), -1}};
  EXPECT_THROW(dec.branch(four, features.data()), Error);
  // A segment past the context: 20 + 5.
  EXPECT_THROW(dec.branch({{random_tokens(5, cfg.vocab_size, 1), -1}}, features.data()), Error);
  EXPECT_EQ(dec.length(), 20);
}

}  // namespace
}  // namespace xsa

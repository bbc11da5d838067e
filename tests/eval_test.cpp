// Evaluation: task files (every malformed line named by file and line, or skipped and counted),
// HellaSwag's preprocessing against strings produced by lm-evaluation-harness's own Python, and
// scoring against log-likelihoods computed independently: a bigram model written out in double,
// and a full model (attention, XSA, sinks) run one whole sequence at a time without the cache.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <set>

#include "bigram_reference.h"
#include "bounds.h"
#include "test_util.h"
#include "xsa/eval/evaluate.h"
#include "xsa/eval/tasks.h"
#include "xsa/tokenizer/tokenizer.h"
#include "xsa/train/trainer.h"
#include "xsa/util/error.h"

namespace xsa {
namespace {

namespace fs = std::filesystem;
using test::BigramModel;

fs::path write_file(const std::string& name, const std::string& text) {
  static const fs::path dir = test::temp_dir("eval");
  std::ofstream(dir / name, std::ios::binary) << text;
  return dir / name;
}

// ---- HellaSwag preprocessing: expected strings printed by lm-evaluation-harness's preprocess()
// (Python's strip, replace and re.sub) on the same inputs.
TEST(Tasks, HellaswagPreprocessingMatchesLmEvaluationHarness) {
  EXPECT_EQ(hellaswag_preprocess("  A man [title] is here. [step] Then  he  goes [header]. "),
            "A man. is here. Then he goes .");
  EXPECT_EQ(
      hellaswag_preprocess("Removing ice [title] Use a scraper.    Four spaces [unclosed bracket"),
      "Removing ice. Use a scraper.  Four spaces [unclosed bracket");
  EXPECT_EQ(hellaswag_preprocess("[a][b]c [d\n] e]"), "c [d\n] e]");
  EXPECT_EQ(capitalize("hE SAID so"), "He said so");
  EXPECT_EQ(utf8_length("naïve €"), 7);
}

TEST(Tasks, HellaswagContextIsBuiltFromItsParts) {
  const fs::path f = write_file(
      "hs.jsonl",
      R"({"activity_label": "Cooking", "ctx_a": "A man is in a kitchen.", "ctx_b": "he picks UP a knife", "ctx": "unused", "endings": ["cuts [title] it.", "b", "c", "d"], "label": "2"})"
      "\n"
      R"({"ctx": "Only ctx  here", "endings": ["x", "y"], "label": 1})"
      "\n");
  const TaskFile file = load_task_file(TaskKind::hellaswag, f.string(), false);
  ASSERT_EQ(file.examples.size(), 2u);
  EXPECT_EQ(file.examples[0].context, "Cooking: A man is in a kitchen. He picks up a knife");
  EXPECT_EQ(file.examples[0].choices[0], "cuts. it.");
  EXPECT_EQ(file.examples[0].label, 2);  // the hub's string label
  EXPECT_EQ(file.examples[1].context, "Only ctx here");
  EXPECT_EQ(file.examples[1].line, 2);
}

TEST(Tasks, LambadaSplitsOffTheLastWord) {
  const fs::path f = write_file("lambada.jsonl", "{\"text\": \"he opened the door\"}\n\n");
  const TaskFile file = load_task_file(TaskKind::lambada, f.string(), false);
  ASSERT_EQ(file.examples.size(), 1u);
  EXPECT_EQ(file.examples[0].context, "he opened the");
  EXPECT_EQ(file.examples[0].choices, std::vector<std::string>{"door"});
}

std::string error_of(TaskKind kind, const std::string& name, const std::string& text) {
  const fs::path f = write_file(name, text);
  try {
    load_task_file(kind, f.string(), false);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Tasks, EachMalformedLineIsNamedByFileAndLine) {
  const std::string good = R"({"context": "c", "choices": ["a", "b"], "label": 0})";
  struct Case {
    std::string line, message;
  };
  const std::vector<Case> cases = {
      {"{not json", "not JSON"},
      {R"(["a list"])", "not a JSON object"},
      {R"({"choices": ["a", "b"], "label": 0})", "missing field 'context'"},
      {R"({"context": "c", "label": 0})", "missing field 'choices'"},
      {R"({"context": "c", "choices": ["a", "b"]})", "missing field 'label'"},
      {R"({"context": "c", "choices": [], "label": 0})", "has 0 choice(s)"},
      {R"({"context": "c", "choices": ["a", 3], "label": 0})", "must be a list of strings"},
      {R"({"context": "c", "choices": ["a", "b"], "label": 2})", "label 2 is out of range"},
      {R"({"context": "c", "choices": ["a", "b"], "label": -1})", "label -1 is out of range"},
      {R"({"context": "c", "choices": ["a", "b"], "label": "x"})", "must be an integer"},
      {R"({"context": 5, "choices": ["a", "b"], "label": 0})", "'context' must be a string"},
  };
  for (size_t i = 0; i < cases.size(); i++) {
    const std::string name = "bad" + std::to_string(i) + ".jsonl";
    const std::string msg = error_of(TaskKind::mc, name, good + "\n" + cases[i].line + "\n");
    EXPECT_NE(msg.find(name + ":2: "), std::string::npos) << msg;
    EXPECT_NE(msg.find(cases[i].message), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
  }
  EXPECT_NE(error_of(TaskKind::lambada, "lam.jsonl", "{\"text\": \"oneword\"}\n")
                .find("lam.jsonl:1: 'text' must end in a word"),
            std::string::npos);
  EXPECT_NE(error_of(TaskKind::hellaswag, "hs_bad.jsonl", "{\"ctx\": \"c\", \"label\": 0}\n")
                .find("hs_bad.jsonl:1: missing field 'endings'"),
            std::string::npos);
  EXPECT_NE(error_of(TaskKind::mc, "empty.jsonl", "\n\n").find("no mc examples"),
            std::string::npos);
  EXPECT_THROW(load_task_file(TaskKind::mc, "/nonexistent/tasks.jsonl", false), Error);
}

TEST(Tasks, SkippingBadLinesCountsThemAndLimitStopsEarly) {
  const std::string good = R"({"context": "c", "choices": ["a", "b"], "label": 1})";
  const fs::path f =
      write_file("mixed.jsonl", good + "\nbroken\n" + good + "\n{\"context\": 1}\n" + good + "\n");
  const TaskFile all = load_task_file(TaskKind::mc, f.string(), true);
  EXPECT_EQ(all.examples.size(), 3u);
  EXPECT_EQ(all.skipped, 2);
  EXPECT_NE(all.first_skipped.find("mixed.jsonl:2: not JSON"), std::string::npos);
  const TaskFile two = load_task_file(TaskKind::mc, f.string(), true, /*limit=*/2);
  EXPECT_EQ(two.examples.size(), 2u);
  EXPECT_EQ(two.examples[1].line, 3);
  EXPECT_THROW(load_task_file(TaskKind::mc, f.string(), false), Error);
}

// ---- Scoring against an independent bigram reference (bigram_reference.h) ----

TEST(Scoring, MultipleChoiceMatchesAnIndependentBigramReference) {
  const BigramModel bigram("xsa");
  auto tokenizer = make_tokenizer(TokenizerKind::byte);
  TaskFile file;
  file.kind = TaskKind::mc, file.path = "fixture";
  const std::vector<std::string> contexts = {"The cat",  "Once upon", "x",
                                             "Water is", "She said",  "Il était"};
  const std::vector<std::vector<std::string>> choices = {
      {"a", "sat on the long mat", "ran"}, {"a time", "tea", "q"},
      {"yz", "long answer here"},          {"wet", "dry", "very, very wet"},
      {"no", "yes indeed", "m"},           {"naïve", "très très naïf", "à"}};
  // acc_norm divides by characters, not bytes: the last example's, counted by hand.
  const std::vector<std::vector<int>> characters = {{1, 19, 3}, {6, 3, 1},  {2, 16},
                                                    {3, 3, 14}, {2, 10, 1}, {5, 14, 1}};
  // Labels alternate, so each rule is right on some examples and wrong on others. Each pick is
  // the reference's, where float rounding cannot change it (test::pick_of with the scores'
  // bounds); an undecided one may go either way.
  int want_acc = 0, want_norm = 0, want_mean = 0, differ = 0, undecided = 0;
  for (size_t e = 0; e < contexts.size(); e++) {
    TaskExample ex{contexts[e], choices[e], (int)(e % choices[e].size()), (int)e + 1, {}, {}};
    std::vector<double> ll, bound, norm, norm_bound, mean, mean_bound;
    for (size_t c = 0; c < ex.choices.size(); c++) {
      ll.push_back(bigram.loglik(ex.context, ex.choices[c]));
      bound.push_back(bigram.loglik_bound(ex.context, ex.choices[c]));
      const double tokens = ex.choices[c].size() + 1;  // bytes: one token per byte, and " "
      norm.push_back(ll[c] / characters[e][c]), norm_bound.push_back(bound[c] / characters[e][c]);
      mean.push_back(ll[c] / tokens), mean_bound.push_back(bound[c] / tokens);
    }
    const test::Pick best = test::pick_of(ll, bound), best_norm = test::pick_of(norm, norm_bound),
                     best_mean = test::pick_of(mean, mean_bound);
    undecided += !best.decided + !best_norm.decided + !best_mean.decided;
    want_acc += (int)best.best == ex.label, want_norm += (int)best_norm.best == ex.label;
    want_mean += (int)best_mean.best == ex.label, differ += best.best != best_norm.best;
    file.examples.push_back(ex);

    Decoder<float> decoder(bigram.cfg, bigram.model->params().w, 2 * bigram.cfg.seq_len);
    std::vector<std::vector<int32_t>> conts;
    for (const std::string& c : ex.choices) conts.push_back(tokenizer->encode(" " + c));
    const auto got = score_continuations(decoder, tokenizer->encode(ex.context), conts);
    for (size_t c = 0; c < ll.size(); c++) {
      EXPECT_NEAR(got[c].loglik, ll[c], bound[c]);
      EXPECT_EQ(got[c].tokens, (int)ex.choices[c].size() + 1);
      if (bigram.greedy_decided(ex.context, ex.choices[c])) {
        EXPECT_EQ(got[c].greedy, bigram.greedy(ex.context, ex.choices[c]));
      }
    }
  }
  ASSERT_GT(differ, 0) << "the fixture must have examples where acc and acc_norm disagree";
  ASSERT_EQ(undecided, 0) << "the fixture's picks must not depend on rounding";
  // Passes of at most 60 tokens: the five examples run in several groups.
  const TaskResult r =
      evaluate_task(bigram.cfg, bigram.model->params().w, *tokenizer, file, nullptr, 60);
  EXPECT_EQ(r.n, 6);
  EXPECT_DOUBLE_EQ(r.acc, want_acc / 6.0);
  EXPECT_DOUBLE_EQ(r.acc_norm, want_norm / 6.0);
  EXPECT_DOUBLE_EQ(r.acc_mean_token, want_mean / 6.0);
  EXPECT_NE(r.acc, r.acc_norm);
  EXPECT_DOUBLE_EQ(r.acc_stderr, std::sqrt(r.acc * (1 - r.acc) / 5));
}

TEST(Scoring, LambadaAccuracyAndPerplexityMatchTheBigramReference) {
  const BigramModel bigram("sa");
  auto tokenizer = make_tokenizer(TokenizerKind::byte);
  TaskFile file;
  file.kind = TaskKind::lambada, file.path = "fixture";
  // Greedy continuations of the bigram model are right by construction; others are not.
  std::vector<std::string> answers;
  for (const std::string context : {"one the", "it was he", "a b ce"}) {
    std::string word;
    unsigned char prev = ' ';
    for (int i = 0; i < 3; i++) {  // the model's own greedy bytes after " "
      const auto& row = bigram.logp[prev];
      prev = (unsigned char)(std::max_element(row.begin(), row.end()) - row.begin());
      word.push_back((char)prev);
    }
    answers.push_back(word);
    file.examples.push_back({context, {word}, 0, 0, {}, {}});
  }
  file.examples.push_back({"plain", {"zzqx"}, 0, 0, {}, {}});
  double ll_sum = 0, ll_bound = 0;
  int greedy = 0;
  for (const TaskExample& ex : file.examples) {
    ll_sum += bigram.loglik(ex.context, ex.choices[0]);
    ll_bound += bigram.loglik_bound(ex.context, ex.choices[0]);
    greedy += bigram.greedy(ex.context, ex.choices[0]);
    ASSERT_TRUE(bigram.greedy_decided(ex.context, ex.choices[0]))
        << "the fixture's greedy answers must not depend on rounding: " << ex.context;
  }
  const TaskResult r = evaluate_task(bigram.cfg, bigram.model->params().w, *tokenizer, file);
  ASSERT_EQ(greedy, 3) << "the fixture's three constructed answers are greedy, the last not";
  EXPECT_EQ(r.n, 4);
  EXPECT_DOUBLE_EQ(r.acc, greedy / 4.0);
  // log ppl = −mean log-likelihood: within the mean of the bounds (and exp's and log's rounding).
  EXPECT_NEAR(std::log(r.ppl), -ll_sum / 4, ll_bound / 4 + 1e-15 * std::fabs(ll_sum));
  EXPECT_EQ(r.acc_norm, -1);  // not a multiple-choice metric
}

// How far a float scoring of a continuation may be from exact arithmetic: each scored token's
// log p moves with its target's logit and the log-sum-exp, each within the forward chain's bound
// of its row's largest logit (tests/bounds.h); the row's logits from a float64 forward of the
// sequence `in` (targets where the continuation is scored, −1 elsewhere).
template <typename Real>
double continuation_bound(const Gpt<Real>& model, const std::vector<int32_t>& in,
                          const std::vector<int32_t>& targets) {
  const ModelConfig& cfg = model.config();
  auto run = test::copy_model<double>(model, (int)in.size());
  run->forward(in.data(), targets.data());
  const double chain =
      test::chain_error(test::model_chain(cfg, 1, cfg.seq_len).forward, test::kFloatRoundoff);
  std::vector<double> logits(cfg.padded_vocab);
  double bound = 0;
  for (size_t t = 0; t < in.size(); t++) {
    if (targets[t] < 0) continue;
    run->logits_row((int)t, logits.data());
    double top = 0;
    for (int j = 0; j < cfg.vocab_size; j++) top = std::max(top, std::fabs(logits[j]));
    bound += 2 * chain * top;
  }
  return bound;
}

// ---- A full model: contexts longer than the model's context lose their oldest tokens ----
TEST(Scoring, FullModelContinuationsMatchWholeSequenceForwards) {
  const ModelConfig cfg = test::small_test_config(60, 2, 20, "xsa+sink,xsa-gated");
  Gpt<double> reference(cfg, 1, cfg.seq_len, GptMode::inference);
  reference.params().init(cfg, 4);
  Rng rng(6);
  for (size_t i = 0; i < reference.params().params.size(); i++)
    reference.params().params.data()[i] =
        reference.params().params.data()[i] * 6 + 0.05 * rng.normal();
  Gpt<float> model(cfg, 1, cfg.seq_len, GptMode::inference);
  for (size_t i = 0; i < model.params().params.size(); i++)
    model.params().params.data()[i] = (float)reference.params().params.data()[i];

  auto tokens = [&](int n, uint64_t seed) {
    Rng r(seed);
    std::vector<int32_t> t(n);
    for (int32_t& x : t) x = (int32_t)(r.next_u64() % cfg.vocab_size);
    return t;
  };
  // Two questions scored together, in passes of at most 5 rows (so that answers cross passes),
  // and each alone.
  const std::vector<ScoringItem> items = {
      {tokens(5, 5), {tokens(3, 1), tokens(6, 2), tokens(1, 3)}, {}},
      {tokens(30, 30), {tokens(2, 4), tokens(6, 5)}, {}}};  // 30 > 20: the last 20 + 1 − 6 kept
  Decoder<float> together(cfg, model.params().w, 40, /*max_rows=*/5);
  const auto got_together = score_items(together, items);
  for (size_t i = 0; i < items.size(); i++) {
    const std::vector<int32_t>& context = items[i].context;
    const auto& conts = items[i].continuations;
    Decoder<float> decoder(cfg, model.params().w, 2 * cfg.seq_len);
    const auto got = score_continuations(decoder, context, conts);
    // The documented cut: inputs (context and a choice but its last token) fit the context for
    // the longest choice, 6 tokens.
    const size_t keep = std::min<size_t>(context.size(), cfg.seq_len + 1 - 6);
    for (size_t c = 0; c < conts.size(); c++) {
      std::vector<int32_t> seq(context.end() - keep, context.end());
      seq.insert(seq.end(), conts[c].begin(), conts[c].end());
      auto run = test::copy_model<double>(reference, (int)seq.size() - 1);
      // Targets only on the continuation: the loss is then −mean log p over its tokens.
      std::vector<int32_t> in(seq.begin(), seq.end() - 1), tg(seq.size() - 1, -1);
      for (size_t t = keep - 1; t < tg.size(); t++) tg[t] = seq[t + 1];
      const double want = -run->forward(in.data(), tg.data()) * conts[c].size();
      const double bound = continuation_bound(reference, in, tg);
      EXPECT_NEAR(got[c].loglik, want, bound) << "question " << i << " choice " << c;
      EXPECT_NEAR(got_together[i][c].loglik, want, bound)
          << "question " << i << " choice " << c << ", scored with the other question";
    }
  }
  // One choice: the cut equals lm-evaluation-harness's, the last seq_len + 1 tokens of context +
  // continuation, the last of them not an input.
  {
    const std::vector<int32_t> context = tokens(30, 7), cont = tokens(6, 8);
    std::vector<int32_t> whole = context;
    whole.insert(whole.end(), cont.begin(), cont.end());
    whole.erase(whole.begin(), whole.end() - (cfg.seq_len + 1));
    std::vector<int32_t> in(whole.begin(), whole.end() - 1), tg(in.size(), -1);
    for (size_t t = in.size() - cont.size(); t < in.size(); t++) tg[t] = whole[t + 1];
    const double want =
        -test::copy_model<double>(reference, (int)in.size())->forward(in.data(), tg.data()) *
        cont.size();
    Decoder<float> decoder(cfg, model.params().w, 2 * cfg.seq_len);
    const double got = score_continuations(decoder, context, {cont})[0].loglik;
    EXPECT_NEAR(got, want, continuation_bound(reference, in, tg));
  }
  Decoder<float> decoder(cfg, model.params().w, 2 * cfg.seq_len);
  // A choice of the whole context fits after one context token; one more does not.
  EXPECT_NO_THROW(score_continuations(decoder, tokens(3, 9), {tokens(20, 1)}));
  EXPECT_THROW(score_continuations(decoder, tokens(3, 9), {tokens(21, 1)}), Error);
  EXPECT_THROW(score_continuations(decoder, {}, {tokens(2, 1)}), Error);
}

// The same questions scored in passes of every size give the same accuracies, and the picks of
// scoring each question alone (no attention between questions or passes). Passes of other sizes
// sum in other orders (one row: the matrix-vector loop), so a pick may move only where two
// choices' float scores are within both scorings' bounds of each other: counted, and allowed.
TEST(Scoring, GroupingIntoPassesChangesNothing) {
  const ModelConfig cfg = test::small_test_config(256, 2, 32, "sa,xsa");
  Gpt<float> model(cfg, 1, cfg.seq_len, GptMode::inference);
  model.params().init(cfg, 8);
  for (size_t i = 0; i < model.params().params.size(); i++) model.params().params.data()[i] *= 6;
  auto tokenizer = make_tokenizer(TokenizerKind::byte);
  TaskFile file;
  file.kind = TaskKind::mc, file.path = "fixture";
  Rng rng(1);
  auto word = [&](int n) {
    std::string w;
    for (int i = 0; i < n; i++) w.push_back((char)('a' + rng.next_u64() % 26));
    return w;
  };
  for (int e = 0; e < 12; e++)
    file.examples.push_back(
        {word(4 + e % 9), {word(1 + e % 3), word(5), word(2 + e % 4)}, e % 3, e + 1, {}, {}});
  const std::vector<ScoringItem> items = tokenize_task(cfg, *tokenizer, file, false);
  int want = 0, undecided = 0;
  for (size_t e = 0; e < items.size(); e++) {
    Decoder<float> decoder(cfg, model.params().w, 2 * cfg.seq_len);
    const auto s = score_continuations(decoder, items[e].context, items[e].continuations);
    std::vector<double> ll, bound;
    for (size_t c = 0; c < s.size(); c++) {
      const std::vector<int32_t>& cont = items[e].continuations[c];
      std::vector<int32_t> seq = items[e].context;
      seq.insert(seq.end(), cont.begin(), cont.end());
      std::vector<int32_t> in(seq.begin(), seq.end() - 1), tg(in.size(), -1);
      for (size_t t = items[e].context.size() - 1; t < in.size(); t++) tg[t] = seq[t + 1];
      ll.push_back(s[c].loglik);
      bound.push_back(2 * continuation_bound(model, in, tg));  // two float scorings
    }
    const test::Pick pick = test::pick_of(ll, bound);
    want += (int)pick.best == file.examples[e].label, undecided += !pick.decided;
  }
  for (int rows : {1, 20, 64, 1000}) {
    const TaskResult r = evaluate_task(cfg, model.params().w, file, items, nullptr, rows);
    EXPECT_EQ(r.n, 12);
    EXPECT_NEAR(r.acc, want / 12.0, undecided / 12.0 + 1e-12) << rows << " rows per pass";
  }
}

TEST(Scoring, TrailingWhitespaceMovesToTheChoiceAndUnscorableExamplesAreNamed) {
  const ModelConfig cfg = test::small_test_config(256, 1, 8, "sa");
  auto tokenizer = make_tokenizer(TokenizerKind::byte);
  TaskFile file;
  file.kind = TaskKind::mc, file.path = "t.jsonl";
  file.examples = {{"Answer: ", {"yes", "no"}, 0, 1, {}, {}},
                   {"Q", {"far too long a choice", "x"}, 0, 2, {}, {}}};
  EXPECT_THROW(
      {
        TaskFile copy = file;
        tokenize_task(cfg, *tokenizer, copy, false);
      },
      Error);
  const std::vector<ScoringItem> items = tokenize_task(cfg, *tokenizer, file, true);
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(file.skipped, 1);
  EXPECT_NE(file.first_skipped.find("t.jsonl:2: a choice of 22 tokens"), std::string::npos)
      << file.first_skipped;
  EXPECT_EQ(items[0].context, tokenizer->encode("Answer:"));
  EXPECT_EQ(items[0].continuations[0], tokenizer->encode("  yes"));
}

// ---- Validation: the training loop's loss, and bytes counted from the decoded text ----
TEST(Scoring, ValidationLossEqualsTrainingsAndBitsPerByteCountTheText) {
  auto gpt2 = make_tokenizer(TokenizerKind::gpt2, XSA_VOCAB_DIR);
  std::vector<uint16_t> ids;
  for (const char* doc : {"Hello world, this is a test of bits per byte.",
                          "Ünïcödé text costs more bytes than characters: € ✓.",
                          "A third document, somewhat longer than the others, to fill windows."}) {
    ids.push_back((uint16_t)gpt2->end_of_text());
    for (int32_t t : gpt2->encode(doc)) ids.push_back((uint16_t)t);
  }
  TokenStream stream;
  stream.add(ids, "fixture");
  ModelConfig cfg;
  cfg.tokenizer = TokenizerKind::gpt2, cfg.vocab_size = 50257, cfg.padded_vocab = pad_vocab(50257);
  cfg.n_layer = 1, cfg.n_head = 2, cfg.n_embd = 16, cfg.seq_len = 8;
  set_attention(cfg, "xsa");
  Gpt<float> model(cfg, 3, cfg.seq_len, GptMode::inference);
  model.params().init(cfg, 1);
  const int batches = val_batch_count(stream, 3, cfg.seq_len, 100);
  const ValResult v = evaluate_val(model, stream, batches, *gpt2);
  // The same float losses, their mean taken in double (each order within a sum's bound at
  // float64's roundoff); exp and the bits-per-byte arithmetic round a few times more.
  const double sum_bound = test::sum_error((double)v.tokens, test::kDoubleRoundoff) * v.loss;
  EXPECT_NEAR(v.loss, evaluate_loss(model, stream, batches), sum_bound);
  EXPECT_NEAR(v.ppl, std::exp(v.loss), (sum_bound + 4 * test::kDoubleRoundoff) * v.ppl);
  // Every window's targets, decoded as one text, minus the end-of-text markers' own letters.
  const size_t windows = (stream.size() - 1) / cfg.seq_len;
  std::vector<int32_t> targets(windows * cfg.seq_len);
  stream.copy(1, targets.size(), targets.data());
  const std::string text = gpt2->decode(targets);
  int64_t eot = std::count(targets.begin(), targets.end(), gpt2->end_of_text());
  EXPECT_EQ(v.tokens, (int64_t)targets.size());
  EXPECT_EQ(v.bytes, (int64_t)text.size() - eot * (int64_t)std::string("<|endoftext|>").size());
  EXPECT_NEAR(v.bpb, v.loss * v.tokens / std::log(2.0) / v.bytes,
              8 * test::kDoubleRoundoff * v.bpb);
  // Training's bits per byte divide by the same bytes per token.
  EXPECT_EQ(validation_bytes_per_token(stream, batches, 3, cfg.seq_len, *gpt2, 50257),
            (double)v.bytes / (double)v.tokens);
}

// Validation windows are drawn evenly across the whole split: a split that starts with a long run
// of one byte (which the bigram model predicts almost surely) and goes on with text gives a pass
// of a few windows the loss of windows from both parts, not of the run alone (as the split's first
// windows would). Held to the bigram model's losses written out in double over the windows row r
// of a pass of n rows should read, ⌊r·W/n⌋; the same windows every time.
TEST(Validation, WindowsAreDrawnEvenlyAcrossTheSplit) {
  BigramModel bigram("sa");
  const int T = bigram.cfg.seq_len;
  std::string text(20000, 'a');
  Rng rng(4);
  const char* words[] = {"the ",   "history ", "of ",       "a ",  "long ", "text, ",
                         "where ", "context ", "matters. ", "We ", "read ", "on. "};
  while (text.size() < 40000) text += words[rng.next_u64() % 12];
  TokenStream stream;
  stream.add(std::vector<uint16_t>(text.begin(), text.end()), "run then text");
  const int64_t windows = (int64_t)((stream.size() - 1) / T);
  const int batches = 8;  // of one row each: 8 of the split's 624 windows
  // The reference: each chosen window's targets scored by the bigram's log-probabilities.
  double expected = 0, bound = 0;
  int64_t scored = 0;
  std::set<int64_t> seen;
  for (int r = 0; r < batches; r++) {
    const int64_t w = r * windows / batches;
    EXPECT_EQ(val_window_of_row(stream, r, batches, 1, T), w) << r;
    seen.insert(w);
    for (int t = 0; t < T; t++) {
      const unsigned char a = text[w * T + t], b = text[w * T + t + 1];
      expected -= bigram.logp[a][b], bound += bigram.loss_error[a][b], scored++;
    }
  }
  expected /= scored;
  // Each token's float error (BigramModel), and a window's sum of T float losses.
  bound = bound / scored + T * test::kFloatRoundoff * expected;
  EXPECT_EQ(seen.size(), (size_t)batches);
  EXPECT_GE(*seen.rbegin() * T, (int64_t)20000) << "the pass reaches past the run";
  const double loss = evaluate_loss(*bigram.model, stream, batches);
  EXPECT_NEAR(loss, expected, bound);
  EXPECT_GT(loss, 20 * -bigram.logp['a']['a']) << "well above the run's own loss";
  EXPECT_EQ(evaluate_loss(*bigram.model, stream, batches), loss) << "the same windows again";
  // A pass of more rows than windows reads every window once, in order; the rest are padding.
  for (int64_t r = 0; r < windows + 3; r++)
    EXPECT_EQ(val_window_of_row(stream, r, (int)windows + 3, 1, T), r < windows ? r : -1);
}

// Loss by position: the all-zero model gives every one of V tokens probability 1/V, so every
// bucket's loss is log V; and a model whose per-position losses are known in double (the bigram
// model) gives each bucket the mean of its positions' losses.
TEST(Validation, LossByPositionOfKnownModels) {
  ModelConfig cfg;
  cfg.vocab_size = 256, cfg.padded_vocab = 256;
  cfg.n_layer = 1, cfg.n_head = 2, cfg.n_embd = 16, cfg.seq_len = 100;
  set_attention(cfg, "xsa");
  Gpt<float> zero(cfg, 3, cfg.seq_len, GptMode::inference);
  std::fill(zero.params().params.data(), zero.params().params.data() + zero.params().params.size(),
            0.0f);
  std::vector<uint16_t> tokens(3000);
  Rng rng(9);
  for (uint16_t& t : tokens) t = (uint16_t)(rng.next_u64() % 256);
  TokenStream stream;
  stream.add(tokens, "random bytes");
  const std::vector<PositionBucket> buckets = position_buckets(cfg.seq_len);
  ASSERT_EQ(buckets.size(), 3u);
  const int edges[3][2] = {{1, 16}, {17, 64}, {65, 100}};
  for (int b = 0; b < 3; b++) {
    EXPECT_EQ(buckets[b].first, edges[b][0]);
    EXPECT_EQ(buckets[b].last, edges[b][1]);
  }
  const LossSum sum = sum_loss(zero, stream, 4, 0, 1, nullptr, /*by_position=*/true);
  for (double l : bucket_losses(sum, cfg.seq_len))
    // Equal logits: log-sum-exp of 256 zeros in float, a few roundings of log 256.
    EXPECT_NEAR(l, std::log(256.0), 16 * test::kFloatRoundoff * std::log(256.0));
  // The bigram model: position t + 1 of a window scores −log p(target | input at t).
  BigramModel bigram("xsa");
  const int T = bigram.cfg.seq_len, n = 5;
  const LossSum by_position = sum_loss(*bigram.model, stream, n, 0, 1, nullptr, true);
  std::vector<double> total(T, 0), count(T, 0), error(T, 0);
  for (int r = 0; r < n; r++) {
    const int64_t w = val_window_of_row(stream, r, n, 1, T);
    for (int t = 0; t < T; t++) {
      const uint16_t a = tokens[w * T + t], b = tokens[w * T + t + 1];
      total[t] -= bigram.logp[a][b], error[t] += bigram.loss_error[a][b], count[t] += 1;
    }
  }
  const std::vector<double> got = bucket_losses(by_position, T);
  const std::vector<PositionBucket> bigram_buckets = position_buckets(T);
  ASSERT_EQ(got.size(), bigram_buckets.size());
  for (size_t b = 0; b < got.size(); b++) {
    double t = 0, c = 0, e = 0;
    for (int p = bigram_buckets[b].first; p <= bigram_buckets[b].last; p++)
      t += total[p - 1], c += count[p - 1], e += error[p - 1];
    EXPECT_NEAR(got[b], t / c, e / c) << b;  // each loss's own bound: they are read one by one
  }
  // Their weighted mean is the pass's loss.
  const double pass = evaluate_loss(*bigram.model, stream, n);
  EXPECT_NEAR(by_position.total / by_position.tokens, pass, T * test::kFloatRoundoff * pass);
}

}  // namespace
}  // namespace xsa

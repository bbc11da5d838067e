// The paper's eight downstream tasks in the formats the Hugging Face hub distributes them: each
// recognised by its fields, its prompts equal to those lm-evaluation-harness v0.4 builds (written
// out here from its task definitions, lm_eval/tasks/<task>/*.yaml and utils.py), and its scores
// equal to an independent float64 bigram scorer's (bigram_reference.h): every choice's
// log-likelihood within the bound of float scoring's rounding, and the accuracies exactly (no
// pick of the fixtures is close enough for rounding to change it: checked). Then the suite over a
// folder, the paired bootstrap, and what is refused.
#include <gtest/gtest.h>

#include <fstream>

#include "bigram_reference.h"
#include "test_util.h"
#include "xsa/eval/evaluate.h"
#include "xsa/eval/suite.h"
#include "xsa/eval/tasks.h"
#include "xsa/tokenizer/tokenizer.h"
#include "xsa/util/error.h"
#include "xsa/util/stats.h"

namespace xsa {
namespace {

namespace fs = std::filesystem;
using test::BigramModel;

fs::path dir() {
  static const fs::path d = test::temp_dir("paper_tasks");
  return d;
}

fs::path write(const std::string& name, const std::string& text) {
  fs::create_directories((dir() / name).parent_path());
  std::ofstream(dir() / name, std::ios::binary) << text;
  return dir() / name;
}

// What the harness scores for one example: a context per choice (the same for all but
// WinoGrande's) and the continuation after it (the delimiter " " and the choice, or WinoGrande's
// one target), the right choice, and the character lengths acc_norm divides by.
struct Expected {
  std::vector<std::string> contexts, continuations;
  int label;
};

struct TaskCase {
  TaskKind kind;
  std::string file, text;
  std::vector<Expected> expected;
};

// Each task's fixture in its own format, with the quirks of the real data, and the prompts
// lm-evaluation-harness builds from it, written out by hand.
std::vector<TaskCase> cases() {
  auto same = [](const std::string& ctx, std::vector<std::string> choices, int label) {
    Expected e{{}, {}, label};
    for (const std::string& c : choices) e.contexts.push_back(ctx), e.continuations.push_back(c);
    return e;
  };
  return {
      // arc_easy.yaml: "Question: {{question}}\nAnswer:", choices.text, the answer's index among
      // choices.label; the hub's ARC has digit keys on some rows.
      {TaskKind::arc_easy,
       "ARC-Easy-test.jsonl",
       R"({"id": "Mercury_1", "question": "Which is a mammal?", "choices": {"text": ["a shark", "a dog", "a trout"], "label": ["A", "B", "C"]}, "answerKey": "B"}
{"id": "NYSED_2", "question": "What melts ice?", "choices": {"text": ["heat", "cold", "dark", "a rock"], "label": ["1", "2", "3", "4"]}, "answerKey": "1"}
{"id": "Mercury_3", "question": "Plants need", "choices": {"text": ["light", "noise"], "label": ["A", "B"]}, "answerKey": "B"}
)",
       {same("Question: Which is a mammal?\nAnswer:", {"a shark", "a dog", "a trout"}, 1),
        same("Question: What melts ice?\nAnswer:", {"heat", "cold", "dark", "a rock"}, 0),
        same("Question: Plants need\nAnswer:", {"light", "noise"}, 1)}},
      // super_glue/boolq: "{{passage}}\nQuestion: {{question}}?\nAnswer:" → no / yes; label, or
      // google/boolq's answer true/false.
      {TaskKind::boolq,
       "boolq/validation.jsonl",
       R"({"question": "is the sky blue", "passage": "The sky is blue on clear days.", "idx": 0, "label": 1}
{"question": "is ice hot", "passage": "Ice is frozen water.", "answer": false}
)",
       {same("The sky is blue on clear days.\nQuestion: is the sky blue?\nAnswer:", {"no", "yes"},
             1),
        same("Ice is frozen water.\nQuestion: is ice hot?\nAnswer:", {"no", "yes"}, 0)}},
      // hellaswag: activity_label + ": " + ctx_a + " " + ctx_b.capitalize(), preprocessed ("
      // [title]"
      // → ". ", other brackets removed, double spaces once); the hub's labels are strings.
      {TaskKind::hellaswag,
       "hellaswag_val.jsonl",
       R"({"ind": 4, "activity_label": "Cooking", "ctx_a": "A man cuts onions [header] slowly.", "ctx_b": "he", "endings": ["puts them in a pan [title] fast.", "flies  away.", "eats the knife.", "sings."], "label": "0"}
)",
       {same("Cooking: A man cuts onions slowly. He",
             {"puts them in a pan. fast.", "flies away.", "eats the knife.", "sings."}, 0)}},
      // lambada_openai: the text but its last word, then " " + the last word.
      {TaskKind::lambada,
       "lambada_test.jsonl",
       R"({"text": "the cat sat on the mat and the dog sat on the mat"}
)",
       {same("the cat sat on the mat and the dog sat on the", {"mat"}, 0)}},
      // openbookqa: question_stem, choices.text, answerKey.lstrip()'s index among the labels.
      {TaskKind::openbookqa,
       "openbookqa/test.jsonl",
       R"({"id": "7-980", "question_stem": "The sun is a", "choices": {"text": ["star", "planet", "moon", "comet"], "label": ["A", "B", "C", "D"]}, "answerKey": " A"}
{"id": "7-981", "question_stem": "Water boils at", "choices": {"text": ["ten degrees", "one hundred degrees", "zero", "minus five"], "label": ["A", "B", "C", "D"]}, "answerKey": "B"}
)",
       {same("The sun is a", {"star", "planet", "moon", "comet"}, 0),
        same("Water boils at", {"ten degrees", "one hundred degrees", "zero", "minus five"}, 1)}},
      // piqa: "Question: {{goal}}\nAnswer:" → sol1, sol2; a JSON array file (parquet exported).
      {TaskKind::piqa,
       "piqa_validation.json",
       R"([{"goal": "To open a jar", "sol1": "twist the lid", "sol2": "hit the jar", "label": 0},
 {"goal": "To dry hair", "sol1": "use water", "sol2": "use a towel", "label": 1}])",
       {same("Question: To open a jar\nAnswer:", {"twist the lid", "hit the jar"}, 0),
        same("Question: To dry hair\nAnswer:", {"use water", "use a towel"}, 1)}},
      // siqa: "Q: {{context}} {{question}}\nA:" → answerA/B/C; labels "1"-"3" (1-based).
      {TaskKind::social_iqa,
       "siqa/dev.jsonl",
       R"({"context": "Tracy gave Sam a gift.", "question": "How would Sam feel?", "answerA": "happy", "answerB": "sad", "answerC": "angry", "label": "1"}
{"context": "Jan lost the game.", "question": "What will Jan do next?", "answerA": "cheer", "answerB": "dance", "answerC": "practice more", "label": "3"}
)",
       {same("Q: Tracy gave Sam a gift. How would Sam feel?\nA:", {"happy", "sad", "angry"}, 0),
        same("Q: Jan lost the game. What will Jan do next?\nA:",
             {"cheer", "dance", "practice more"}, 2)}},
      // winogrande (preprocess_winogrande.py): a context per option, the sentence up to the blank
      // with the option in; one target, the rest of the sentence stripped; answer "1"/"2".
      {TaskKind::winogrande,
       "winogrande_dev.jsonl",
       R"({"sentence": "The trophy does not fit in the case because the _ is too big.", "option1": "trophy", "option2": "case", "answer": "1"}
{"sentence": "Sam asked Ann for help since _  knew the way.", "option1": "Sam", "option2": "Ann", "answer": "2"}
)",
       {Expected{{"The trophy does not fit in the case because the trophy",
                  "The trophy does not fit in the case because the case"},
                 {"is too big.", "is too big."},
                 0},
        Expected{{"Sam asked Ann for help since Sam", "Sam asked Ann for help since Ann"},
                 {"knew the way.", "knew the way."},
                 1}}},
  };
}

TEST(PaperTasks, EachTaskIsReadPromptedAndScoredAsTheHarnessDoes) {
  const BigramModel bigram("xsa");
  auto tokenizer = make_tokenizer(TokenizerKind::byte);
  for (const TaskCase& tc : cases()) {
    SCOPED_TRACE(to_string(tc.kind));
    const fs::path path = write(tc.file, tc.text);
    TaskFile file = load_task_file(path.string(), false);  // told by its fields
    ASSERT_EQ(file.kind, tc.kind);
    ASSERT_EQ(file.examples.size(), tc.expected.size());
    const std::vector<ScoringItem> items = tokenize_task(bigram.cfg, *tokenizer, file, false);
    Decoder<float> decoder(bigram.cfg, bigram.model->params().w, 4 * bigram.cfg.seq_len);
    const auto scores = score_items(decoder, items);
    // The picks are the reference's where float rounding cannot change them (test::pick_of with
    // the scores' bounds); the fixtures hold no undecided one.
    int right = 0, right_norm = 0, undecided = 0;
    for (size_t e = 0; e < tc.expected.size(); e++) {
      const Expected& want = tc.expected[e];
      const TaskExample& ex = file.examples[e];
      EXPECT_EQ(ex.label, want.label);
      ASSERT_EQ(scores[e].size(), want.contexts.size());
      std::vector<double> ll, bound, norm, norm_bound;
      for (size_t c = 0; c < want.contexts.size(); c++) {
        // The prompt xsa built, character for character.
        EXPECT_EQ(ex.choice_contexts.empty() ? ex.context : ex.choice_contexts[c],
                  want.contexts[c]);
        EXPECT_EQ(ex.choice_contexts.empty() ? ex.choices[c] : ex.target, want.continuations[c]);
        ll.push_back(bigram.loglik(want.contexts[c], want.continuations[c]));
        bound.push_back(bigram.loglik_bound(want.contexts[c], want.continuations[c]));
        EXPECT_NEAR(scores[e][c].loglik, ll[c], bound[c]);
        EXPECT_EQ(scores[e][c].tokens, (int)want.continuations[c].size() + 1);  // " " + bytes
        const double n = std::max<size_t>(1, want.continuations[c].size());
        norm.push_back(ll[c] / n), norm_bound.push_back(bound[c] / n);
      }
      const test::Pick best = test::pick_of(ll, bound), best_norm = test::pick_of(norm, norm_bound);
      right += (int)best.best == want.label, right_norm += (int)best_norm.best == want.label;
      undecided += !best.decided + (reports_acc_norm(tc.kind) && !best_norm.decided);
    }
    ASSERT_EQ(undecided, 0) << "the fixture's picks must not depend on rounding";
    const TaskResult r = evaluate_task(bigram.cfg, bigram.model->params().w, file, items);
    if (tc.kind == TaskKind::lambada) {
      EXPECT_EQ(r.n, 1);
      continue;  // its accuracy is greedy decoding (eval_test checks it)
    }
    EXPECT_DOUBLE_EQ(r.acc, (double)right / tc.expected.size());
    if (reports_acc_norm(tc.kind)) {
      EXPECT_DOUBLE_EQ(r.acc_norm,
                       (double)right_norm / tc.expected.size());  // ASCII: chars = bytes
      EXPECT_EQ(r.correct_norm.size(), tc.expected.size());
    } else {
      EXPECT_LT(r.acc_norm, 0) << "the harness reports acc only";
      EXPECT_TRUE(r.correct_norm.empty());
    }
  }
}

// WinoGrande's two contexts share the words before the blank: one pass holds them once, and the
// rows scored are only the target's.
TEST(PaperTasks, WinograndeSharesItsCommonPrefix) {
  const BigramModel bigram("sa");
  auto tokenizer = make_tokenizer(TokenizerKind::byte);
  const fs::path path = write(
      "wino_prefix.jsonl",
      R"({"sentence": "He poured the jug into the cup until the _ was full.", "option1": "jug", "option2": "cup", "answer": "2"})"
      "\n");
  TaskFile file = load_task_file(path.string(), false);
  const auto items = tokenize_task(bigram.cfg, *tokenizer, file, false);
  ASSERT_EQ(items.size(), 1u);
  // Bytes: the space before the blank is shared too (GPT-2 would share "... until the" and
  // branch at " jug" / " cup").
  EXPECT_EQ(items[0].context, tokenizer->encode("He poured the jug into the cup until the "));
  EXPECT_EQ(items[0].continuations[0], tokenizer->encode("jug was full."));
  EXPECT_EQ(items[0].continuations[1], tokenizer->encode("cup was full."));
  EXPECT_EQ(items[0].scored_from, (std::vector<int>{3, 3}));  // "jug" / "cup" are context
  // A blank that opens the sentence leaves nothing to share: a byte-level model has no
  // end-of-text token to start from, and says so with the file and line.
  const fs::path first =
      write("wino_first.jsonl",
            R"({"sentence": "_ went home.", "option1": "Ann", "option2": "Bob", "answer": "1"})"
            "\n");
  TaskFile f2 = load_task_file(first.string(), false);
  try {
    tokenize_task(bigram.cfg, *tokenizer, f2, false);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("wino_first.jsonl:1:"), std::string::npos) << e.what();
  }
}

// With GPT-2's tokenizer the shared tokens and each choice's tail are exactly the harness's
// requests: context_i's tokens, and the tokens that encoding context_i + " " + target adds to them.
TEST(PaperTasks, WinograndeTokensAreTheHarnessRequestsWithGpt2) {
  auto tokenizer = make_tokenizer(TokenizerKind::gpt2, XSA_VOCAB_DIR);
  ModelConfig cfg = test::small_test_config(50257, 1, 64, "xsa");
  const std::string sentence =
      "The trophy doesn't fit into the brown suitcase because the _ is too large.";
  const fs::path path = write("wino_gpt2.jsonl", "{\"sentence\": \"" + sentence +
                                                     "\", \"option1\": \"trophy\", \"option2\": "
                                                     "\"suitcase\", \"answer\": \"1\"}\n");
  TaskFile file = load_task_file(path.string(), false);
  const auto items = tokenize_task(cfg, *tokenizer, file, false);
  const std::string before = sentence.substr(0, sentence.find('_'));
  const std::string target = "is too large.";
  for (int c = 0; c < 2; c++) {
    const std::string context = before + (c == 0 ? "trophy" : "suitcase");
    const std::vector<int32_t> ctx = tokenizer->encode(context);
    const std::vector<int32_t> whole = tokenizer->encode(context + " " + target);
    std::vector<int32_t> got = items[0].context;
    got.insert(got.end(), items[0].continuations[c].begin(), items[0].continuations[c].end());
    EXPECT_EQ(got, whole) << c;
    EXPECT_EQ(items[0].context.size() + items[0].scored_from[c], ctx.size()) << c;
  }
  EXPECT_EQ(items[0].context,
            tokenizer->encode("The trophy doesn't fit into the brown suitcase because the"));
}

TEST(PaperTasks, MalformedRecordsAndUnknownFilesAreNamed) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"({"question": "q", "choices": {"text": ["a", "b"], "label": ["A", "B"]}, "answerKey": "E"})",
       "answerKey 'E' is not one of the choice labels"},
      {R"({"context": "c", "question": "q", "answerA": "a", "answerB": "b", "answerC": "c", "label": "0"})",
       "label 0 is out of range: SocialIQA's labels are 1, 2, 3"},
      {R"({"sentence": "no blank here", "option1": "a", "option2": "b", "answer": "1"})",
       "'sentence' has no blank '_'"},
      {R"({"sentence": "a _ b", "option1": "a", "option2": "b", "answer": "3"})",
       "'answer' must be \"1\" or \"2\", not \"3\""},
      {R"({"passage": "p", "question": "q", "answer": "yes"})", "'answer' must be true or false"},
  };
  for (const auto& [line, message] : bad) {
    const fs::path p = write("bad.jsonl", line + "\n");
    try {
      load_task_file(p.string(), false);
      FAIL() << line;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()),
                p.string() + ":1: " + message + " (--skip-bad-lines leaves such lines out)");
    }
  }
  const fs::path unknown = write("unknown.jsonl", R"({"prompt": "p", "target": "t"})"
                                                  "\n");
  try {
    load_task_file(unknown.string(), false);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("its records' fields (prompt, target) match no known task"),
        std::string::npos)
        << e.what();
  }
}

TEST(PaperTasks, SuiteFindsTheTasksOfAFolderAndNamesWhatIsMissing) {
  const fs::path suite = dir() / "suite";
  fs::create_directories(suite);
  const std::vector<TaskCase> all = cases();
  for (size_t i = 0; i < all.size(); i += 2)  // arc_easy, hellaswag, openbookqa, social_iqa
    write("suite/" + fs::path(all[i].file).filename().string(), all[i].text);
  // Two splits of ARC-Easy: the harness scores test.
  write(
      "suite/ARC-Easy-train.jsonl",
      R"({"question": "q", "choices": {"text": ["a", "b"], "label": ["A", "B"]}, "answerKey": "A"})"
      "\n");
  write("suite/extra/ARC-Challenge-test.jsonl", all[0].text);  // not one of the eight
  const SuiteFiles found = find_suite_files(suite.string(), false);
  std::vector<std::string> tasks;
  for (const TaskFile& f : found.files) tasks.push_back(to_string(f.kind));
  EXPECT_EQ(tasks, (std::vector<std::string>{"arc_easy", "hellaswag", "openbookqa", "social_iqa"}));
  EXPECT_NE(found.files[0].path.find("ARC-Easy-test"), std::string::npos);
  std::string notes;
  for (const std::string& n : found.notes) notes += n + "\n";
  for (const char* missing :
       {"boolq: no file", "lambada: no file", "piqa: no file", "winogrande: no file",
        "ARC-Easy-train.jsonl: another split", "arc_challenge is not one of the paper's tasks"})
    EXPECT_NE(notes.find(missing), std::string::npos) << missing << "\n" << notes;
  // Two files of one task, neither named for the harness's split: refused, both named.
  write("suite/ARC-Easy-other.jsonl", all[0].text);
  fs::remove(suite / "ARC-Easy-test.jsonl");
  try {
    find_suite_files(suite.string(), false);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("arc_easy: 2 files"), std::string::npos) << e.what();
  }
  EXPECT_THROW(find_suite_files((dir() / "nowhere").string(), false), Error);
}

TEST(PaperTasks, PairedBootstrapOfTheAverage) {
  // Every question the same both ways: no difference, no spread.
  BootstrapResult none = paired_bootstrap_group_mean({{0, 0, 0}, {0, 0}});
  EXPECT_EQ(none.mean, 0);
  EXPECT_EQ(none.low, 0);
  EXPECT_EQ(none.high, 0);
  EXPECT_EQ(none.p, 1);
  // Tasks weigh equally, not by their question counts: (1 + 0) / 2.
  BootstrapResult equal =
      paired_bootstrap_group_mean({std::vector<double>(10, 1.0), std::vector<double>(1000, 0.0)});
  EXPECT_DOUBLE_EQ(equal.mean, 0.5);
  EXPECT_EQ(equal.low, 0.5);
  EXPECT_LT(equal.p, 1e-3);
  // One task of 400 questions, 60 % +1 and 40 % −1: mean 0.2, standard error sqrt(0.96 / 400) =
  // 0.049, so the 95 % interval is about 0.2 ± 0.096 (normal approximation; ±0.01 for resampling).
  std::vector<double> d(400, -1.0);
  std::fill(d.begin(), d.begin() + 240, 1.0);
  const BootstrapResult r = paired_bootstrap_group_mean({d});
  EXPECT_NEAR(r.mean, 0.2, 1e-12);
  EXPECT_NEAR(r.low, 0.2 - 1.96 * std::sqrt(0.96 / 400), 0.01);
  EXPECT_NEAR(r.high, 0.2 + 1.96 * std::sqrt(0.96 / 400), 0.01);
  EXPECT_LT(r.p, 1e-3);
  // The same seed gives the same interval.
  EXPECT_EQ(paired_bootstrap_group_mean({d}).low, r.low);
}

}  // namespace
}  // namespace xsa

// SentencePiece vocabularies (xsa tokenizer train, spm:FOLDER): trained on the golden corpus
// (tests/data/gpt2_golden.jsonl: English of many genres, code, non-ASCII), they give the same ids
// as SentencePiece's own command-line tool (spm_encode, Debian's sentencepiece), decode(encode(x))
// == x for the corpus and for random bytes, training is deterministic, and bad options get one
// line.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "test_util.h"
#include "xsa/data/tokenizer_training.h"
#include "xsa/eval/evaluate.h"
#include "xsa/eval/tasks.h"
#include "xsa/tokenizer/spm_tokenizer.h"
#include "xsa/tokenizer/tokenizer.h"
#include "xsa/util/files.h"

namespace xsa {
namespace {

namespace fs = std::filesystem;

const std::string kGolden = std::string(XSA_TEST_DATA_DIR) + "/gpt2_golden.jsonl";

std::vector<std::string> golden_documents() {
  std::vector<std::string> docs;
  std::ifstream in(kGolden);
  for (std::string line; std::getline(in, line);)
    docs.push_back(nlohmann::json::parse(line)["text"].get<std::string>());
  return docs;
}

class SpmTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string why;
    if (!sentencepiece_available(&why)) return;
    dir_ = new fs::path(test::temp_dir("spm"));
    for (const char* model : {"bpe", "unigram"}) {
      SpmTrainConfig cfg;
      cfg.inputs = {{kGolden, "jsonl"}};
      cfg.vocab = 1024, cfg.model = model, cfg.quiet = true, cfg.threads = 2;
      cfg.out = (*dir_ / model).string();
      train_spm_tokenizer(cfg);
    }
  }
  static void TearDownTestSuite() {
    if (dir_) fs::remove_all(*dir_);
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    std::string why;
    if (!sentencepiece_available(&why)) GTEST_SKIP() << why;
  }
  static fs::path dir(const std::string& model) { return *dir_ / model; }
  static fs::path* dir_;
};
fs::path* SpmTest::dir_ = nullptr;

TEST_F(SpmTest, TheFolderDescribesTheVocabulary) {
  const nlohmann::json j = nlohmann::json::parse(read_file(dir("bpe") / "tokenizer.json"));
  SpmTokenizer tok(dir("bpe"));
  EXPECT_EQ(j["kind"], "spm");
  EXPECT_EQ(j["vocab_size"], 1024);
  EXPECT_EQ(tok.vocab_size(), 1024);
  EXPECT_EQ(j["vocabulary_checksum"], tok.checksum());
  EXPECT_EQ(j["end_of_text"], tok.end_of_text());
  const auto docs = golden_documents();  // the one empty document is no document
  EXPECT_EQ(j["corpus"]["documents"], docs.size() - std::count(docs.begin(), docs.end(), ""));
  EXPECT_EQ(j["byte_fallback"], true);
}

TEST_F(SpmTest, DecodeOfEncodeIsTheTextForTheCorpusAndForAnyBytes) {
  for (const char* model : {"bpe", "unigram"}) {
    SpmTokenizer tok(dir(model));
    size_t tokens = 0, bytes = 0;
    for (const std::string& doc : golden_documents()) {
      const std::vector<int32_t> ids = tok.encode(doc);
      ASSERT_EQ(tok.decode(ids), doc) << model;
      tokens += ids.size(), bytes += doc.size();
    }
    // A vocabulary of the corpus's own pieces compresses it: fewer tokens than bytes.
    EXPECT_LT(tokens, bytes / 2) << model;
    // Bytes that are not UTF-8 (stray continuation bytes, overlong forms, surrogates, NUL), and
    // random bytes: each comes back, through its byte piece.
    std::mt19937 rng(7);
    std::vector<std::string> odd = {std::string("\0a\0", 3), "\xC0\xAF", "\xED\xA0\x80",
                                    "\xF4\x90\x80\x80", "\xE2\x82", "caf\xC3\xA9 \x80\xFF",
                                    // SentencePiece's own mark for a space, written in the text.
                                    "a \xE2\x96\x81"
                                    "b\xE2\x96\x81\xE2\x96\x81 c"};
    for (int n : {1, 2, 17, 1000, 5000}) {
      std::string r((size_t)n, '\0');
      for (char& c : r) c = (char)(rng() & 0xFF);
      odd.push_back(r);
    }
    for (const std::string& s : odd) EXPECT_EQ(tok.decode(tok.encode(s)), s) << model;
  }
}

// The ids of every line of the corpus, from xsa and from spm_encode (which encodes line by line).
TEST_F(SpmTest, IdsEqualSentencePiecesOwnTool) {
  if (std::system("command -v spm_encode >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "no spm_encode (apt install sentencepiece; scripts/test.sh installs it)";
  const fs::path work = test::temp_dir("spm_encode");
  std::vector<std::string> lines;
  std::string text;
  for (const std::string& doc : golden_documents()) {
    std::istringstream in(doc);
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) lines.push_back(line), text += line + "\n";
  }
  write_file_atomic(work / "lines.txt", text);
  for (const char* model : {"bpe", "unigram"}) {
    const test::CommandResult r =
        test::run_command("spm_encode --model=" + (dir(model) / "tokenizer.model").string() +
                              " --output_format=id lines.txt",
                          work);
    ASSERT_EQ(r.status, 0) << r.err;
    ASSERT_EQ((size_t)std::count(r.out.begin(), r.out.end(), '\n'), lines.size())
        << r.err.substr(0, 500);
    SpmTokenizer tok(dir(model));
    std::istringstream theirs(r.out);
    size_t compared = 0;
    for (const std::string& line : lines) {
      std::string their_line;
      ASSERT_TRUE(std::getline(theirs, their_line));
      std::string mine;
      for (int32_t id : tok.encode(line)) {
        if (!mine.empty()) mine += ' ';
        mine += std::to_string(id);
      }
      ASSERT_EQ(mine, their_line) << model << ": " << line.substr(0, 80);
      compared++;
    }
    EXPECT_EQ(compared, lines.size());
    EXPECT_GT(compared, 600u);
  }
  fs::remove_all(work);
}

TEST_F(SpmTest, TrainingIsDeterministic) {
  SpmTrainConfig cfg;
  cfg.inputs = {{kGolden, "jsonl"}};
  cfg.vocab = 1024, cfg.quiet = true, cfg.threads = 2;
  cfg.out = (*dir_ / "again").string();
  const SpmTrainResult again = train_spm_tokenizer(cfg);
  EXPECT_EQ(read_file(dir("bpe") / "tokenizer.model"), read_file(*dir_ / "again/tokenizer.model"));
  // Another thread count: the same vocabulary (the file also records the count).
  cfg.threads = 1, cfg.force = true;
  const SpmTrainResult one = train_spm_tokenizer(cfg);
  EXPECT_EQ(one.model_checksum, again.model_checksum);
  EXPECT_EQ(SpmTokenizer(*dir_ / "again").checksum(), SpmTokenizer(dir("bpe")).checksum());
}

TEST_F(SpmTest, BadInputGetsOneLine) {
  const fs::path work = test::temp_dir("spm_cli");
  const std::string xsa = XSA_BINARY;
  write_file_atomic(work / "text.txt", test::text_of(20000));
  fs::create_directories(work / "notvocab");  // a folder that is no command's output
  write_file_atomic(work / "notvocab/keep.txt", "mine");
  struct Case {
    std::string args, err;
  };
  const fs::path bpe = dir("bpe");
  for (
      const Case& c : std::vector<Case>{
          {"tokenizer train --input text.txt --vocab 70000 --out t",
           "xsa: error: --vocab 70000: expected 512 to 65536 (xsa's shards hold ids as uint16; 259 "
           "of the ids are SentencePiece's specials and byte pieces)\n"},
          {"tokenizer train --input text.txt --out notvocab --force",
           "xsa: error: notvocab: already exists and holds no tokenizer.json: not an output of "
           "this command, so not replaced\n"},
          {"prepare --input text.txt --out notvocab --force",
           "xsa: error: notvocab: already exists and holds no meta.json: not an output of this "
           "command, so not replaced\n"},
          {"tokenizer train --default --format jsonl --out t",
           "xsa: error: --default takes no --format: it reads the installed default corpus\n"},
          {"tokenizer train --input text.txt --model wordpiece --out t",
           "xsa: error: --model wordpiece: expected bpe or unigram\n"},
          {"tokenizer train --input missing.txt --out t",
           "xsa: error: missing.txt: no such file or folder\n"},
          {"tokenizer train --input text.txt --out " + bpe.string(),
           "xsa: error: " + bpe.string() + ": already exists; pass --force to replace it\n"},
          {"tokenize --tokenizer spm:nowhere hello",
           "xsa: error: --tokenizer spm:nowhere: no such folder (xsa tokenizer train makes one)\n"},
          {"tokenize --tokenizer spm: hello",
           "xsa: error: --tokenizer spm: needs the vocabulary's folder (spm:FOLDER)\n"},
          {"tokenize --tokenizer spm:" + bpe.string() + " --decode 1024",
           "xsa: error: --decode: '1024' is not a token id of the spm:" + bpe.string() +
               " vocabulary (0..1023)\n"},
          {"train --data text.txt --tokenizer spm --steps 1 --out r",
           "xsa: error: text.txt: a text file needs the vocabulary's folder (--tokenizer "
           "spm:FOLDER)\n"},
          {"train --data text.txt --tokenizer spm:nowhere --steps 1 --out r",
           "xsa: error: --tokenizer spm:nowhere: no such folder (xsa tokenizer train makes one)\n"},
          {"compare --data text.txt --tokenizer sentencepiece --preset tiny --out c",
           "xsa: error: --tokenizer 'sentencepiece' is not known (expected byte, gpt2 or "
           "spm:FOLDER)\n"}}) {
    const test::CommandResult r = test::run_command(xsa + " " + c.args, work);
    EXPECT_EQ(r.status, 1) << c.args;
    EXPECT_EQ(r.err, c.err) << c.args;
  }
  // SentencePiece's own refusal, in one line: more pieces than a tiny corpus has.
  const test::CommandResult r =
      test::run_command(xsa + " tokenizer train --input text.txt --vocab 8000 --out t2", work);
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err.rfind("xsa: error: xsa tokenizer train: SentencePiece refused: ", 0), 0u)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(fs::exists(work / "t2"));
  // Through the command line, the ids of xsa tokenize are the tokenizer's.
  const test::CommandResult ids = test::run_command(
      xsa + " tokenize --tokenizer spm:" + bpe.string() + " 'The cat sat.'", work);
  ASSERT_EQ(ids.status, 0) << ids.err;
  std::string expected;
  for (int32_t id : SpmTokenizer(bpe).encode("The cat sat.")) {
    if (!expected.empty()) expected += ' ';
    expected += std::to_string(id);
  }
  EXPECT_EQ(ids.out, expected + "\n");
  EXPECT_EQ(read_file(work / "notvocab/keep.txt"), "mine");  // the refused --force kept it
  fs::remove_all(work);
}

// Bits per byte with a known distribution: a model whose weights are all zero gives every token of
// its vocabulary the same probability, so its loss is ln V nats a token and its bits per byte are
// log2(V) · tokens / bytes, with the bytes those of the text itself (not decoded from the ids).
// This holds for every tokenizer only if each one's accounting (the bytes of each token, byte
// pieces and end-of-text included) adds up to the text: a piece whose bytes were miscounted would
// move bits per byte away from the formula. Bound: the loss is a float32 log-sum-exp of V equal
// logits (relative error a few float epsilons), then exact double arithmetic.
TEST_F(SpmTest, BitsPerByteOfAUniformModelCountTheTextsBytesForEveryTokenizer) {
  std::string text;
  for (const std::string& doc : golden_documents())
    if (text.size() < 3000) text += doc;
  text +=
      " Ünïcödé € ✓ 日本語のテキスト 🙂🙂 and bytes that are not UTF-8: "
      "\xff\xfe\xc3 "
      "end.";
  const std::pair<TokenizerKind, std::string> tokenizers[] = {
      {TokenizerKind::byte, ""},
      {TokenizerKind::gpt2, XSA_VOCAB_DIR},
      {TokenizerKind::spm, dir("bpe").string()},
      {TokenizerKind::spm, dir("unigram").string()}};
  for (const auto& [kind, folder] : tokenizers) {
    const auto tok = make_tokenizer(kind, folder);
    // The stream: end-of-text (never a target, 0 bytes), then the text's tokens, all targets. The
    // byte tokenizer has no end-of-text: its first byte is the stream's first token instead.
    std::vector<uint16_t> ids;
    if (tok->end_of_text() >= 0) ids.push_back((uint16_t)tok->end_of_text());
    for (int32_t t : tok->encode(text)) ids.push_back((uint16_t)t);
    const int64_t targets = (int64_t)ids.size() - 1;
    const int64_t bytes = (int64_t)text.size() - (tok->end_of_text() >= 0 ? 0 : 1);
    TokenStream stream;
    stream.add(ids, "text");
    ModelConfig cfg;
    cfg.tokenizer = kind, cfg.vocab_size = tok->vocab_size();
    cfg.padded_vocab = pad_vocab(cfg.vocab_size);
    cfg.n_layer = 1, cfg.n_head = 2, cfg.n_embd = 16, cfg.seq_len = (int)targets;
    set_attention(cfg, "xsa");
    Gpt<float> model(cfg, 1, cfg.seq_len, GptMode::inference);
    std::fill(model.params().params.data(),
              model.params().params.data() + model.params().params.size(), 0.0f);
    const ValResult v = evaluate_val(model, stream, 1, *tok);
    ASSERT_EQ(v.tokens, targets) << to_string(kind) << " " << folder;
    EXPECT_EQ(v.bytes, bytes) << to_string(kind) << " " << folder;
    const double expected = std::log2((double)cfg.vocab_size) * (double)targets / (double)bytes;
    EXPECT_NEAR(v.bpb, expected, 1e-6 * expected) << to_string(kind) << " " << folder;
  }
}

// A text file with --tokenizer spm:FOLDER in train, compare and sweep: tokenized with that
// vocabulary, which the checkpoints carry; a resume tokenizes it again with the checkpoint's copy,
// evaluation needs nothing else; another vocabulary is refused for a resume and against shards.
TEST_F(SpmTest, ATextFileTrainsWithTheVocabularyItNames) {
  const fs::path work = test::temp_dir("spm_text");
  const std::string xsa = std::string(XSA_BINARY) + " ";
  std::string text;
  for (const std::string& doc : golden_documents()) text += doc + "\n";
  write_file_atomic(work / "text.txt", text);
  auto run = [&](const std::string& args) {
    const test::CommandResult r = test::run_command(xsa + args, work);
    EXPECT_EQ(r.status, 0) << args << ": " << r.err;
    return r;
  };
  const std::string bpe = dir("bpe").string(), unigram = dir("unigram").string();
  const std::string tiny = " --layers 2 --heads 2 --embd 32 --seq-len 32 --batch 4 --threads 1";
  run("train --data text.txt --tokenizer spm:" + bpe + tiny +
      " --steps 2 --val-every 0 --val-batches 1 --quiet --out r");
  const nlohmann::json config =
      nlohmann::json::parse(read_file(work / "r/ckpt_000002/config.json"));
  EXPECT_EQ(config["tokenizer"], "spm");
  EXPECT_EQ(config["vocab_size"], 1024);
  EXPECT_EQ(SpmTokenizer(work / "r/ckpt_000002").checksum(), SpmTokenizer(bpe).checksum());
  const nlohmann::json described = nlohmann::json::parse(read_file(work / "r/run.json"));
  EXPECT_EQ(described["tokenizer"], "spm");
  EXPECT_EQ(described["vocab_size"], 1024);
  EXPECT_EQ(described["vocabulary_checksum"], SpmTokenizer(bpe).checksum());
  run("train --resume r --steps 3 --quiet");
  EXPECT_TRUE(fs::exists(work / "r/ckpt_000003/tokenizer.model"));
  // Training's last validation (step 3, its first batch of 4 windows) in bits per byte equals
  // xsa eval's on the same windows of the checkpoint, whose bytes are counted on its own.
  nlohmann::json last_val;
  std::istringstream metrics(read_file(work / "r/metrics.jsonl"));
  for (std::string line; std::getline(metrics, line);)
    if (const auto rec = nlohmann::json::parse(line); rec.value("split", "") == "val")
      last_val = rec;
  ASSERT_EQ(last_val.value("step", 0), 3) << last_val.dump();
  run("eval --ckpt r --batch 4 --val-batches 1 --json eval.json");
  const nlohmann::json e = nlohmann::json::parse(read_file(work / "eval.json"));
  const nlohmann::json v = e.is_array() ? e[0] : e;
  EXPECT_NEAR(v.value("val_loss", 0.0), last_val["loss"].get<double>(), 1e-6) << v.dump();
  EXPECT_NEAR(v.value("bpb", 0.0), last_val["bpb"].get<double>(), 1e-6) << v.dump();
  const std::string mine = SpmTokenizer(unigram).checksum(), theirs = SpmTokenizer(bpe).checksum();
  const test::CommandResult resume =
      test::run_command(xsa + "train --resume r --tokenizer spm:" + unigram + " --steps 4", work);
  EXPECT_EQ(resume.status, 1);
  EXPECT_EQ(resume.err, "xsa: error: " + unigram + ": its vocabulary (" + mine +
                            ") is not the one r/ckpt_000003 was trained with (" + theirs + ")\n");
  run("compare --data text.txt --tokenizer spm:" + bpe +
      " --preset tiny --steps 2 --val-every 1 --seeds 1 --quiet --out cmp");
  EXPECT_TRUE(fs::exists(work / "cmp/arms/xsa-seed1/ckpt_000002/tokenizer.model"));
  EXPECT_NE(read_file(work / "cmp/report.md").find("| val loss | val bits per byte |"),
            std::string::npos);
  const nlohmann::json report = nlohmann::json::parse(read_file(work / "cmp/report.json"));
  for (const auto& row : report["summary"])
    EXPECT_GT(row.value("val_bpb_mean", 0.0), 0.0) << row.dump();
  run("sweep --data text.txt --tokenizer spm:" + bpe +
      " --param lr=0.001 --preset tiny --steps 2 --val-every 1 --seeds 1 --quiet --out sw");
  // --init-from a checkpoint of the vocabulary: the text file is tokenized with its copy.
  run("train --data text.txt --init-from r --steps 1 --val-every 0 --val-batches 1 --threads 1 "
      "--quiet --out ri");
  EXPECT_EQ(SpmTokenizer(work / "ri/ckpt_000001").checksum(), SpmTokenizer(bpe).checksum());
  // A model trained elsewhere: tokenizer.model alone, no tokenizer.json.
  fs::create_directories(work / "foreign");
  fs::copy_file(dir("bpe") / "tokenizer.model", work / "foreign/tokenizer.model");
  run("train --data text.txt --tokenizer spm:foreign" + tiny +
      " --steps 1 --val-every 0 --val-batches 1 --quiet --out rf");
  EXPECT_EQ(read_file(work / "rf/ckpt_000001/tokenizer.model"),
            read_file(dir("bpe") / "tokenizer.model"));
  EXPECT_FALSE(fs::exists(work / "rf/ckpt_000001/tokenizer.json"));
  // Shards of the BPE vocabulary, named with the unigram one: refused.
  fs::create_directories(work / "corpus");
  const auto docs = golden_documents();
  for (size_t i = 0; i < docs.size(); i++)
    write_file_atomic(work / "corpus" / ("doc" + std::to_string(i) + ".txt"), docs[i]);
  run("prepare --input corpus --tokenizer spm:" + bpe + " --val-fraction 0.2 --out data --quiet");
  const test::CommandResult shards = test::run_command(
      xsa + "train --data data --tokenizer spm:" + unigram + " --steps 1 --out r3", work);
  EXPECT_EQ(shards.status, 1);
  EXPECT_EQ(shards.err, "xsa: error: data: its vocabulary (" + theirs + ") is not the one " +
                            unigram + " holds (" + mine + ")\n");
  fs::remove_all(work);
}

// The paper's eight tasks with a SentencePiece model: each task's prompts tokenized with its
// vocabulary as the harness builds them (the context as is, each choice as " " + choice), and the
// whole suite through xsa eval from the checkpoint alone.
TEST_F(SpmTest, ThePapersTasksScoreWithTheVocabulary) {
  const fs::path work = test::temp_dir("spm_suite");
  const std::string xsa = std::string(XSA_BINARY) + " ";
  const std::pair<const char*, const char*> files[] = {
      {"ARC-Easy-test.jsonl",
       R"({"question": "Which is a mammal?", "choices": {"text": ["a shark", "a dog"], "label": ["A", "B"]}, "answerKey": "B"})"},
      {"boolq/validation.jsonl",
       R"({"question": "is ice hot", "passage": "Ice is frozen water.", "answer": false})"},
      {"hellaswag_val.jsonl",
       R"({"activity_label": "Cooking", "ctx_a": "A man cuts onions.", "ctx_b": "he", "endings": ["puts them in a pan.", "flies away.", "eats the knife.", "sings."], "label": "0"})"},
      {"lambada_test.jsonl", R"({"text": "the cat sat on the mat and the dog sat on the mat"})"},
      {"openbookqa/test.jsonl",
       R"({"question_stem": "The sun is a", "choices": {"text": ["star", "planet"], "label": ["A", "B"]}, "answerKey": "A"})"},
      {"piqa_validation.jsonl",
       R"({"goal": "To open a jar", "sol1": "twist the lid", "sol2": "hit the jar", "label": 0})"},
      {"siqa/dev.jsonl",
       R"({"context": "Jan lost the game.", "question": "What will Jan do next?", "answerA": "cheer", "answerB": "dance", "answerC": "practice more", "label": "3"})"},
      {"winogrande_dev.jsonl",
       R"({"sentence": "The trophy does not fit in the case because the _ is too big.", "option1": "trophy", "option2": "case", "answer": "1"})"}};
  for (const auto& [name, line] : files) {
    fs::create_directories((work / "paper" / name).parent_path());
    write_file_atomic(work / "paper" / name, std::string(line) + "\n");
  }
  // The prompts: PIQA's context and choices, encoded by the vocabulary itself.
  const SpmTokenizer tok(dir("bpe"));
  ModelConfig cfg;
  cfg.tokenizer = TokenizerKind::spm, cfg.vocab_size = tok.vocab_size(), cfg.seq_len = 64;
  TaskFile piqa = load_task_file((work / "paper/piqa_validation.jsonl").string(), false);
  const std::vector<ScoringItem> items = tokenize_task(cfg, tok, piqa, false);
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].context, tok.encode("Question: To open a jar\nAnswer:"));
  ASSERT_EQ(items[0].continuations.size(), 2u);
  EXPECT_EQ(items[0].continuations[0], tok.encode(" twist the lid"));
  EXPECT_EQ(items[0].continuations[1], tok.encode(" hit the jar"));
  // The suite from the checkpoint alone: every task scored, none missing.
  std::string text;
  for (const std::string& doc : golden_documents()) text += doc + "\n";
  write_file_atomic(work / "text.txt", text);
  const test::CommandResult train = test::run_command(
      xsa + "train --data text.txt --tokenizer spm:" + dir("bpe").string() +
          " --layers 2 --heads 2 --embd 32 --seq-len 64 --batch 4 --threads 1 --steps 2 "
          "--val-every 0 --quiet --out r",
      work);
  ASSERT_EQ(train.status, 0) << train.err;
  const test::CommandResult r = test::run_command(
      xsa + "eval --ckpt r --suite paper --dir paper --threads 1 --json suite.json", work);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err.find("no file"), std::string::npos) << r.err;
  std::vector<std::string> tasks;
  for (const auto& rec : nlohmann::json::parse(read_file(work / "suite.json")))
    tasks.push_back(rec["task"].get<std::string>());
  std::sort(tasks.begin(), tasks.end());
  EXPECT_EQ(tasks,
            (std::vector<std::string>{"arc_easy", "boolq", "hellaswag", "lambada", "openbookqa",
                                      "paper_average", "piqa", "social_iqa", "winogrande"}));
  fs::remove_all(work);
}

// Through the commands: shards of an spm vocabulary, a run on them whose checkpoints carry the
// vocabulary, sampling and evaluation (bits per byte) from the checkpoint alone, a comparison; and
// data of another vocabulary refused for evaluation, resume, --init-from and analyze.
TEST_F(SpmTest, PrepareTrainSampleEvaluateWithTheVocabulary) {
  const fs::path work = test::temp_dir("spm_flow");
  const std::string xsa = std::string(XSA_BINARY) + " ";
  fs::create_directories(work / "corpus");
  const auto docs = golden_documents();
  for (size_t i = 0; i < docs.size(); i++)
    write_file_atomic(work / "corpus" / ("doc" + std::to_string(i) + ".txt"), docs[i]);
  auto run = [&](const std::string& args) {
    const test::CommandResult r = test::run_command(xsa + args, work);
    EXPECT_EQ(r.status, 0) << args << ": " << r.err;
    return r;
  };
  run("prepare --input corpus --tokenizer spm:" + dir("bpe").string() +
      " --val-fraction 0.2 --out data --quiet");
  const nlohmann::json meta = nlohmann::json::parse(read_file(work / "data/meta.json"));
  EXPECT_EQ(meta["tokenizer"], "spm");
  EXPECT_EQ(meta["vocab_size"], 1024);
  EXPECT_EQ(meta["end_of_text"], 2);
  EXPECT_EQ(meta["vocabulary_checksum"], SpmTokenizer(dir("bpe")).checksum());
  EXPECT_EQ(read_file(work / "data/tokenizer.model"), read_file(dir("bpe") / "tokenizer.model"));
  const std::string tiny = " --layers 2 --heads 2 --embd 32 --seq-len 32 --batch 4 --threads 1";
  run("train --data data" + tiny + " --steps 3 --val-every 0 --val-batches 1 --quiet --out r");
  const nlohmann::json config =
      nlohmann::json::parse(read_file(work / "r/ckpt_000003/config.json"));
  EXPECT_EQ(config["tokenizer"], "spm");
  EXPECT_EQ(config["vocab_size"], 1024);
  EXPECT_EQ(SpmTokenizer(work / "r/ckpt_000003").checksum(), SpmTokenizer(dir("bpe")).checksum());
  // The checkpoint alone: sampling decodes with its vocabulary; evaluation counts bytes with it.
  const test::CommandResult sample =
      run("sample --ckpt r --prompt 'The history of' --max-new-tokens 8 --seed 1");
  EXPECT_EQ(sample.out.rfind("The history of", 0), 0u) << sample.out;
  const test::CommandResult eval = run("eval --ckpt r --data data --json eval.json");
  const nlohmann::json e = nlohmann::json::parse(read_file(work / "eval.json"));
  const nlohmann::json v = e.is_array() ? e[0] : e;
  EXPECT_GT(v.value("bpb", 0.0), 0.0) << v.dump();
  run("compare --data data --preset tiny --steps 2 --val-every 1 --seeds 1 --quiet --out cmp");
  EXPECT_TRUE(fs::exists(work / "cmp/arms/xsa-seed1/ckpt_000002/tokenizer.model"));
  // Shards of another vocabulary (the unigram one): refused wherever a checkpoint meets them.
  run("prepare --input corpus --tokenizer spm:" + dir("unigram").string() +
      " --val-fraction 0.2 --out other --quiet");
  const std::string mine = SpmTokenizer(dir("unigram")).checksum(),
                    theirs = SpmTokenizer(dir("bpe")).checksum();
  const std::string refusal = "xsa: error: other: its vocabulary (" + mine +
                              ") is not the one r/ckpt_000003 was trained with (" + theirs + ")\n";
  for (const std::string args :
       {"eval --ckpt r --data other", "train --resume r --data other --steps 4",
        "train --data other --init-from r --steps 1 --out r2", "analyze --ckpt r --data other"}) {
    const test::CommandResult r = test::run_command(xsa + args, work);
    EXPECT_EQ(r.status, 1) << args;
    EXPECT_EQ(r.err, refusal) << args;
  }
  // Exporting to programs that tokenize with GPT-2's vocabulary: refused.
  const test::CommandResult exported = test::run_command(xsa + "export hf r hf", work);
  EXPECT_EQ(exported.status, 1);
  EXPECT_EQ(exported.err,
            "xsa: error: r/ckpt_000003: its vocabulary is a SentencePiece one of its own; export "
            "writes models of GPT-2's vocabulary or of bytes, which the other programs read with "
            "their own tokenizer\n");
  EXPECT_FALSE(fs::exists(work / "hf"));
  fs::remove_all(work);
}

}  // namespace
}  // namespace xsa

// GPT-2 tokenizer: ids identical to OpenAI's tiktoken on tests/data/gpt2_golden.jsonl (made by
// scripts/make_tokenizer_golden.js: English of many genres, POS-tagged Brown text, code, non-ASCII
// scripts, emoji, Unicode whitespace, long runs, random mixtures), decode(encode(x)) == x for any
// bytes including invalid UTF-8, and the errors for a missing vocabulary.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "xsa/tokenizer/byte_tokenizer.h"
#include "xsa/tokenizer/gpt2_tokenizer.h"
#include "xsa/util/error.h"
#include "xsa/util/rng.h"

namespace xsa {
namespace {

namespace fs = std::filesystem;

// The vocabulary is installed by set-up (bash scripts/get_data.sh --vocab-only, which the test
// command runs); without it these tests fail rather than skip.
const Gpt2Tokenizer& gpt2() {
  static Gpt2Tokenizer tok(XSA_VOCAB_DIR);
  return tok;
}

TEST(Gpt2Tokenizer, KnownIds) {
  EXPECT_EQ(gpt2().encode("Hello, world"), (std::vector<int32_t>{15496, 11, 995}));
  EXPECT_EQ(gpt2().decode({15496, 11, 995}), "Hello, world");
  EXPECT_EQ(gpt2().vocab_size(), 50257);
  EXPECT_EQ(gpt2().end_of_text(), 50256);
  EXPECT_EQ(gpt2().decode({50256}), "<|endoftext|>");
}

TEST(Gpt2Tokenizer, MatchesTiktokenOnGoldenCorpus) {
  std::ifstream in(std::string(XSA_TEST_DATA_DIR) + "/gpt2_golden.jsonl");
  ASSERT_TRUE(in) << "tests/data/gpt2_golden.jsonl missing";
  int cases = 0, failures = 0;
  size_t bytes = 0;
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    std::string text = j["text"];
    std::vector<int32_t> want = j["ids"].get<std::vector<int32_t>>();
    std::vector<int32_t> got = gpt2().encode(text);
    cases++, bytes += text.size();
    if (got != want && failures++ < 5) {
      size_t k = 0;
      while (k < got.size() && k < want.size() && got[k] == want[k]) k++;
      ADD_FAILURE() << "case " << cases << ": first difference at id " << k << " of " << want.size()
                    << " in " << nlohmann::json(text.substr(0, 200)).dump();
    }
    EXPECT_EQ(gpt2().decode(want), text) << "case " << cases;
  }
  EXPECT_EQ(failures, 0);
  EXPECT_GT(cases, 500);
  EXPECT_GT(bytes, 300000u);
}

TEST(Gpt2Tokenizer, RoundTripsAnyBytes) {
  Rng rng(7);
  const std::string pieces[] = {
      "a",    " ",    "\xc3\xa9", "\xe4\xb8\xad", "\xf0\x9f\x98\x80", "1",       "'s", "\n",
      "\xff", "\xc3", "\x80",     "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe4\xb8"};
  for (int n = 0; n < 3000; n++) {
    std::string s;
    int len = 1 + rng.next_u64() % 30;
    for (int i = 0; i < len; i++) {
      if (rng.next_u64() % 3 == 0)
        s.push_back((char)(rng.next_u64() % 256));  // any byte at all
      else
        s += pieces[rng.next_u64() % std::size(pieces)];
    }
    ASSERT_EQ(gpt2().decode(gpt2().encode(s)), s)
        << nlohmann::json::binary({s.begin(), s.end()}).dump();
  }
}

TEST(Gpt2Tokenizer, LongRunsAreFastAndExact) {
  for (const std::string& s :
       {std::string(100000, ' '), std::string(100000, '7'), std::string(50000, 'a') + "\n"}) {
    auto ids = gpt2().encode(s);
    EXPECT_EQ(gpt2().decode(ids), s);  // the golden corpus checks the ids of runs up to 500 long
  }
}

TEST(Gpt2Tokenizer, ParallelEncodingEqualsSerial) {
  std::vector<std::string> docs;
  for (int i = 0; i < 64; i++)
    docs.push_back("Document " + std::to_string(i) + ": the quick brown fox's " +
                   std::string(i, '!'));
  std::vector<std::vector<int32_t>> serial(docs.size()), parallel(docs.size());
  for (size_t i = 0; i < docs.size(); i++) serial[i] = gpt2().encode(docs[i]);
#pragma omp parallel for num_threads(2)
  for (size_t i = 0; i < docs.size(); i++) parallel[i] = gpt2().encode(docs[i]);
  EXPECT_EQ(serial, parallel);
}

// The per-thread piece cache holds at most PieceCache::kMaxEntries pieces, then starts over: ids
// across that point are those of each piece merged on its own (encode_piece, no cache).
TEST(Gpt2Tokenizer, PieceCacheStartsOverWithTheSameIds) {
  Gpt2Tokenizer tok(XSA_VOCAB_DIR);
  Rng rng(5);
  std::string text;
  std::vector<int32_t> expected;
  for (int w = 0; w < 300000; w++) {  // distinct words, more than the cache holds
    std::string piece = " ";
    for (int k = 0, n = w; k < 4 || n > 0; k++, n /= 26) piece += (char)('a' + n % 26);
    piece += (char)('a' + rng.next_u64() % 26);
    text += piece;
    tok.encode_piece(piece, expected);
  }
  EXPECT_EQ(tok.encode(text), expected);
  EXPECT_EQ(tok.encode(text), expected);  // the second time from the cache (started over once)
}

// The cache belongs to one tokenizer: another, made where the first was freed, with other merges,
// does not take the first one's pieces.
TEST(Gpt2Tokenizer, PieceCacheIsNotSharedWithALaterTokenizer) {
  const fs::path dir =
      fs::temp_directory_path() / ("xsa_vocab_one_merge_" + std::to_string(getpid()));
  fs::create_directories(dir);
  fs::copy_file(fs::path(XSA_VOCAB_DIR) / "encoder.json", dir / "encoder.json",
                fs::copy_options::overwrite_existing);
  std::ofstream(dir / "vocab.bpe") << "#version: 0.2\n\u0120 t\n";  // GPT-2's first merge only
  std::vector<int32_t> bytes;  // "hello" without merges: its bytes' tokens
  for (char c : std::string("hello")) bytes.push_back(gpt2().encode(std::string(1, c)).at(0));
  for (int round = 0; round < 3; round++) {
    {
      auto full = std::make_unique<Gpt2Tokenizer>(XSA_VOCAB_DIR);
      EXPECT_EQ(full->encode("hello"), (std::vector<int32_t>{31373}));
    }
    auto one_merge = std::make_unique<Gpt2Tokenizer>(dir);
    EXPECT_EQ(one_merge->encode("hello"), bytes);
  }
  fs::remove_all(dir);
}

TEST(ByteTokenizer, RoundTripsAndRejectsNonBytes) {
  ByteTokenizer tok;
  std::string s = "any\xff\x00 bytes";
  s.push_back('\0');
  EXPECT_EQ(tok.decode(tok.encode(s)), s);
  EXPECT_EQ(tok.encode("AB"), (std::vector<int32_t>{65, 66}));
  EXPECT_THROW(tok.decode({300}), Error);
}

TEST(Gpt2Tokenizer, MissingVocabularyNamesTheFileAndTheFix) {
  try {
    make_tokenizer(TokenizerKind::gpt2, "/nonexistent/vocab");
    FAIL() << "no error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("/nonexistent/vocab"), std::string::npos) << msg;
    EXPECT_NE(msg.find("scripts/get_data.sh"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace xsa

// Data pipeline: shard write/read and header validation, streams across shards, the batch loader
// (windows, shuffling, rank splitting, resume position), datasets from folders, globs and text, and
// xsa prepare: formats, compressed inputs, the split by document, bad input stopped or skipped.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#if __has_include(<zlib.h>) && __has_include(<zstd.h>)
#include <zlib.h>
#include <zstd.h>
#define XSA_TEST_COMPRESSION 1
#endif

#include "test_util.h"
#include "xsa/data/corpus_reader.h"
#include "xsa/data/dataset.h"
#include "xsa/data/prepare.h"
#include "xsa/data/shards.h"
#include "xsa/tokenizer/tokenizer.h"
#include "xsa/util/error.h"
#include "xsa/util/files.h"
#include "xsa/util/rng.h"

namespace xsa {
namespace {

namespace fs = std::filesystem;

using test::temp_dir;

std::vector<uint16_t> iota_tokens(size_t n, uint16_t start = 0) {
  std::vector<uint16_t> v(n);
  for (size_t i = 0; i < n; i++) v[i] = (uint16_t)((start + i) % 50000);
  return v;
}

void write_shard(const fs::path& path, const std::vector<uint16_t>& tokens) {
  write_file_atomic(path, encode_shard(tokens.data(), tokens.size()));
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Shards, RoundTripAndLayout) {
  fs::path dir = temp_dir("shard");
  auto tokens = iota_tokens(1000);
  tokens[0] = 65000;  // the top of uint16's range survives
  write_shard(dir / "a.bin", tokens);
  EXPECT_EQ(fs::file_size(dir / "a.bin"), 1024u + 2000u);
  Shard s(dir / "a.bin");
  ASSERT_EQ(s.size(), 1000u);
  EXPECT_TRUE(std::equal(tokens.begin(), tokens.end(), s.tokens()));
  // Byte-level layout: llm.c's header and little-endian uint16 tokens.
  std::string bytes = read_file(dir / "a.bin");
  int32_t header[3];
  std::memcpy(header, bytes.data(), 12);
  EXPECT_EQ(header[0], 20240520);
  EXPECT_EQ(header[1], 1);
  EXPECT_EQ(header[2], 1000);
  EXPECT_EQ((unsigned char)bytes[1024], 65000 & 0xFF);
  EXPECT_EQ((unsigned char)bytes[1025], 65000 >> 8);
  fs::remove_all(dir);
}

TEST(Shards, HeaderIsValidated) {
  fs::path dir = temp_dir("header");
  std::string good = encode_shard(iota_tokens(10).data(), 10);
  auto check = [&](const std::string& name, std::string bytes, const std::string& expected) {
    write_file_atomic(dir / name, bytes);
    std::string err = error_of([&] { Shard s(dir / name); });
    EXPECT_NE(err.find((dir / name).string()), std::string::npos) << err;
    EXPECT_NE(err.find(expected), std::string::npos) << err;
  };
  std::string bad_magic = good;
  bad_magic[0] ^= 1;
  check("magic.bin", bad_magic, "magic number");
  std::string bad_version = good;
  bad_version[4] = 7;
  check("version.bin", bad_version, "shard version 7");
  check("truncated.bin", good.substr(0, good.size() - 2), "header's 10 tokens need 1044");
  check("longer.bin", good + "x", "1045 bytes, but its header's 10 tokens need 1044");
  check("short.bin", good.substr(0, 100), "too short");
  fs::remove_all(dir);
}

// meta.json of another shape or type is an Error naming the file, not nlohmann's type_error
// (found while fuzzing, fuzz/fuzz_shard_meta.cpp).
TEST(Dataset, MalformedMetaJsonIsNamed) {
  EXPECT_EQ(tokenizer_of_meta(R"({"tokenizer": "byte"})", "m.json"), TokenizerKind::byte);
  EXPECT_EQ(tokenizer_of_meta("{}", "m.json"), TokenizerKind::gpt2);  // llm.c's shards
  for (const char* bad : {"[1]", R"({"tokenizer": 5})", R"({"tokenizer": "bpe"})", "{"}) {
    std::string err = error_of([&] { tokenizer_of_meta(bad, "dir/meta.json"); });
    EXPECT_EQ(err.rfind("dir/meta.json: ", 0), 0u) << bad << ": " << err;
  }
}

TEST(TokenStream, CopiesAcrossShardBorders) {
  fs::path dir = temp_dir("stream");
  TokenStream stream;
  std::vector<uint16_t> all;
  int k = 0;
  for (size_t n : {5u, 0u, 3u, 17u}) {  // an empty shard in the middle too
    auto t = iota_tokens(n, (uint16_t)all.size());
    all.insert(all.end(), t.begin(), t.end());
    fs::path p = dir / ("s" + std::to_string(k++) + ".bin");
    write_shard(p, t);
    stream.add(std::make_shared<const Shard>(p));
  }
  ASSERT_EQ(stream.size(), all.size());
  for (size_t pos = 0; pos < all.size(); pos++)
    for (size_t n = 0; pos + n <= all.size(); n += 3) {
      std::vector<int32_t> out(n);
      stream.copy(pos, n, out.data());
      for (size_t i = 0; i < n; i++) ASSERT_EQ(out[i], all[pos + i]) << pos << "+" << i;
    }
  fs::remove_all(dir);
}

TEST(TokenStream, TokenOutsideVocabularyNamesFileAndPosition) {
  fs::path dir = temp_dir("vocab");
  auto t = iota_tokens(100);
  t[42] = 300;
  write_shard(dir / "x_train.bin", t);
  TokenStream s;
  s.add(std::make_shared<const Shard>(dir / "x_train.bin"));
  std::string err = error_of([&] { s.check_vocabulary(256, "byte"); });
  EXPECT_NE(err.find("x_train.bin: token id 300 at position 42 is outside the byte vocabulary"),
            std::string::npos)
      << err;
  EXPECT_NO_THROW(s.check_vocabulary(50257, "gpt2"));
  fs::remove_all(dir);
}

class Loader : public ::testing::Test {
 protected:
  void SetUp() override {
    tokens.add(iota_tokens(1001), "memory");  // 1000 windows of T = 1 ... or 100 of T = 10
  }
  TokenStream tokens;
};

TEST_F(Loader, WindowsAreShiftedPairsInOrder) {
  const int B = 3, T = 10;
  BatchLoader loader(tokens, B, T, /*shuffle=*/false, 0);
  EXPECT_EQ(loader.windows(), 100u);
  std::vector<int32_t> in(B * T), tg(B * T);
  for (int step = 0; step < 5; step++) {
    loader.next(in.data(), tg.data());
    for (int b = 0; b < B; b++)
      for (int t = 0; t < T; t++) {
        int window = step * B + b;
        ASSERT_EQ(in[b * T + t], window * T + t);
        ASSERT_EQ(tg[b * T + t], window * T + t + 1);
      }
  }
}

TEST_F(Loader, ShuffleVisitsEveryWindowOncePerEpoch) {
  const int B = 4, T = 10;
  BatchLoader a(tokens, B, T, true, 7), b(tokens, B, T, true, 7), c(tokens, B, T, true, 8);
  std::vector<uint64_t> order0, order1, other;
  for (uint64_t i = 0; i < a.windows(); i++) {
    order0.push_back(a.window_at(0, i));
    order1.push_back(a.window_at(1, i));
    other.push_back(c.window_at(0, i));
    EXPECT_EQ(a.window_at(0, i), b.window_at(0, i));  // same seed, same order
  }
  EXPECT_EQ(std::set<uint64_t>(order0.begin(), order0.end()).size(), 100u);
  EXPECT_EQ(*std::max_element(order0.begin(), order0.end()), 99u);
  EXPECT_NE(order0, order1);  // a new order each epoch
  EXPECT_NE(order0, other);   // and per seed
  std::vector<uint64_t> sorted = order0;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_NE(order0, sorted);  // really shuffled
}

TEST_F(Loader, RanksTogetherCoverTheStreamOnce) {
  for (bool shuffle : {false, true}) {
    SCOPED_TRACE(shuffle ? "shuffled" : "in order");
    const int B = 2, T = 10, world = 3;
    std::vector<BatchLoader> ranks;
    for (int r = 0; r < world; r++) ranks.emplace_back(tokens, B, T, shuffle, 5, r, world);
    std::multiset<int32_t> starts;
    std::vector<int32_t> in(B * T), tg(B * T);
    const int steps = 100 / (B * world);  // one epoch: 16 steps, 96 of 100 windows
    for (int s = 0; s < steps; s++)
      for (auto& r : ranks) {
        r.next(in.data(), tg.data());
        for (int b = 0; b < B; b++) starts.insert(in[b * T]);
      }
    EXPECT_EQ(starts.size(), 96u);
    EXPECT_EQ(std::set<int32_t>(starts.begin(), starts.end()).size(), 96u)
        << "a window was read twice";
    for (int32_t s : starts) EXPECT_EQ(s % T, 0);
  }
}

TEST_F(Loader, ResumeContinuesWithTheNextBatch) {
  const int B = 3, T = 10;
  BatchLoader a(tokens, B, T, true, 11);
  std::vector<int32_t> in(B * T), tg(B * T), in2(B * T), tg2(B * T);
  for (int i = 0; i < 40; i++) a.next(in.data(), tg.data());  // past an epoch boundary (33 steps)
  LoaderPosition pos = a.position();
  EXPECT_EQ(pos.epoch, 1u);
  BatchLoader b(tokens, B, T, true, 11);
  b.set_position(pos);
  for (int i = 0; i < 10; i++) {
    a.next(in.data(), tg.data());
    b.next(in2.data(), tg2.data());
    ASSERT_EQ(in, in2);
    ASSERT_EQ(tg, tg2);
  }
  EXPECT_THROW(b.set_position({0, 1000}), Error);
}

TEST_F(Loader, TooLittleDataIsAnError) {
  EXPECT_THROW(BatchLoader(tokens, 20, 100, false, 0), Error);
}

TEST(Dataset, FolderGlobAndSingleFile) {
  fs::path dir = temp_dir("dataset");
  write_shard(dir / "c_train_000001.bin", iota_tokens(300, 0));
  write_shard(dir / "c_train_000002.bin", iota_tokens(300, 300));
  write_shard(dir / "c_val_000000.bin", iota_tokens(100, 1000));
  write_file_atomic(dir / "meta.json", R"({"tokenizer": "gpt2"})");
  Dataset d = open_dataset(dir.string(), std::nullopt, 0.1, 2, 16);
  EXPECT_EQ(d.train.size(), 600u);
  EXPECT_EQ(d.val.size(), 100u);
  EXPECT_EQ(d.tokenizer, TokenizerKind::gpt2);
  Dataset g = open_dataset((dir / "c_train_*.bin").string(), std::nullopt, 0.1, 2, 16);
  EXPECT_EQ(g.train.size(), 600u);
  EXPECT_EQ(g.val.size(), 100u);
  Dataset one = open_dataset((dir / "c_train_000002.bin").string(), std::nullopt, 0.1, 2, 16);
  EXPECT_EQ(one.train.size(), 300u);
  std::vector<int32_t> first(1);
  one.train.copy(0, 1, first.data());
  EXPECT_EQ(first[0], 300);
  // Errors: a contradicting tokenizer, a folder without shards, too little data.
  EXPECT_NE(error_of([&] {
              open_dataset(dir.string(), TokenizerKind::byte, 0.1, 2, 16);
            }).find("contradicts"),
            std::string::npos);
  fs::create_directories(dir / "empty");
  EXPECT_NE(error_of([&] {
              open_dataset((dir / "empty").string(), std::nullopt, 0.1, 2, 16);
            }).find("no token shards"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              open_dataset(dir.string(), std::nullopt, 0.1, 8, 256);
            }).find("600 training tokens"),
            std::string::npos);
  fs::remove_all(dir);
}

TEST(Dataset, TextFileWithValidationTail) {
  fs::path dir = temp_dir("text");
  std::ofstream(dir / "t.txt") << std::string(1000, 'x');
  Dataset d = open_dataset((dir / "t.txt").string(), std::nullopt, 0.1, 2, 16);
  EXPECT_EQ(d.tokenizer, TokenizerKind::byte);
  EXPECT_EQ(d.train.size(), 900u);
  EXPECT_EQ(d.val.size(), 100u);
  fs::remove_all(dir);
}

TEST(Prepare, StripsBrownTags) {
  EXPECT_EQ(
      strip_brown_tags("\tThe/at jury/nn said/vbd ``/`` no/at ''/'' ,/, it/pps ran/vbd ./.\n\n"),
      "The jury said \"no\", it ran.\n");
}

// Documents "doc 0" ... "doc 199" in three formats; byte tokenizer (documents end in a newline).
class PrepareTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = temp_dir("prepare");
    fs::create_directories(dir / "in/texts");
    for (int i = 0; i < 50; i++)
      std::ofstream(dir / "in/texts" / fmt::format("{:03d}.txt", i)) << "doc " << i << "\n";
    std::ofstream jl(dir / "in/b.jsonl");
    for (int i = 50; i < 150; i++)
      jl << nlohmann::json{{"text", fmt::format("doc {}", i)}, {"id", i}}.dump() << "\n";
    nlohmann::json arr = nlohmann::json::array();
    for (int i = 150; i < 200; i++) arr.push_back(fmt::format("doc {}", i));
    std::ofstream(dir / "in/c.json") << arr.dump();
    cfg.inputs = {{(dir / "in/texts").string()},
                  {(dir / "in/b.jsonl").string()},
                  {(dir / "in/c.json").string()}};
    cfg.tokenizer = TokenizerKind::byte;
    cfg.out = (dir / "out").string();
    cfg.val_fraction = 0.2;
    cfg.shard_tokens = 1024;
    cfg.quiet = true;
    cfg.threads = 2;
  }
  void TearDown() override { fs::remove_all(dir); }
  std::vector<std::string> documents(const std::string& glob) {
    Dataset d = open_dataset(glob, std::nullopt, 0, 1, 1);
    std::vector<int32_t> ids(d.train.size());
    d.train.copy(0, ids.size(), ids.data());
    std::string text(ids.begin(), ids.end());
    std::vector<std::string> docs;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) docs.push_back(line);
    return docs;
  }
  fs::path dir;
  PrepareConfig cfg;
};

// A JSON line's text field, decoded (simdjson), against nlohmann's parser as the reference on
// random lines: escapes, surrogate pairs and lone surrogates, raw UTF-8, nested values, the field
// given twice (the last counts), missing or not a string, numbers past 64 bits or a double's range,
// nesting past 1 024 levels, lines cut, with a byte changed or opening with a byte-order mark.
TEST(DecodeJsonLine, AgreesWithAnotherParserOnRandomLines) {
  Rng rng(17);
  auto pick = [&](size_t n) { return (size_t)(rng.next_u64() % n); };
  const char* pieces[] = {"a",
                          "Word ",
                          "\\n",
                          "\\t",
                          "\\\"",
                          "\\\\",
                          "\\/",
                          "\\b",
                          "\\u00e9",
                          "\\u4e2d",
                          "\\ud83d\\ude00",
                          "\\ud800",
                          "\\udc00x",
                          "caf\xc3\xa9",
                          "\xe4\xb8\xad",
                          "\xf0\x9f\x98\x80",
                          "\\u0000",
                          " "};
  auto string_value = [&] {
    std::string v = "\"";
    for (size_t k = pick(12); k > 0; k--) v += pieces[pick(std::size(pieces))];
    return v + "\"";
  };
  auto other_value = [&]() -> std::string {
    switch (pick(8)) {
      case 5:
        return "123456789012345678901234567890";  // past 64 bits
      case 6:
        return pick(2) ? "1e400" : "01";  // out of a double's range; not JSON
      case 7:
        return std::string(1100, '[') + std::string(1100, ']');  // deeper than 1 024
      case 0:
        return std::to_string((int64_t)pick(1000000) - 500000);
      case 1:
        return "[1, \"x\", {\"text\": 2}, null]";
      case 2:
        return "{\"text\": " + string_value() + "}";
      case 3:
        return pick(2) ? "true" : "null";
      default:
        return "2.5e3";
    }
  };
  int valid = 0, cases = 0;
  for (int n = 0; n < 4000; n++) {
    std::string line = "{";
    for (size_t f = 1 + pick(4); f > 0; f--) {
      const size_t kind = pick(6);
      line += kind < 3 ? "\"text\": " : kind == 3 ? "\"id\": " : "\"meta\": ";
      line += kind >= 2 ? other_value() : string_value();
      line += f > 1 ? ", " : "";
    }
    line += "}";
    if (pick(4) == 0) line.resize(pick(line.size() + 1));                          // cut
    if (pick(4) == 0 && !line.empty()) line[pick(line.size())] = (char)pick(256);  // a byte changed
    if (pick(10) == 0) line = "[" + string_value().append("]");                    // not an object
    if (pick(20) == 0) line.insert(0, "\xEF\xBB\xBF");  // a byte-order mark
    // The reference: valid UTF-8, then nlohmann (an object keeps a key's last value).
    std::string expected;
    bool expected_ok = valid_utf8(line);
    if (expected_ok) {
      const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      expected_ok =
          !j.is_discarded() && j.is_object() && j.contains("text") && j["text"].is_string();
      if (expected_ok) expected = j["text"].get<std::string>();
    }
    std::string padded = line;
    padded.reserve(line.size() + kJsonLinePadding);
    std::string_view text;
    std::string error;
    const bool ok = decode_json_line(padded, 7, "in.jsonl", "text", text, error);
    cases++;
    valid += ok;
    ASSERT_EQ(ok, expected_ok) << line << "\n" << error;
    if (ok) {
      EXPECT_EQ(std::string(text), expected) << line;
    } else {
      EXPECT_EQ(error.rfind("in.jsonl:7: ", 0), 0u) << error;
    }
  }
  // Both kinds met often enough to mean something.
  EXPECT_GT(valid, cases / 20);
  EXPECT_LT(valid, cases * 9 / 10);
}

TEST_F(PrepareTest, WritesShardsMetaAndARandomValidationShare) {
  PrepareResult r = prepare(cfg);
  EXPECT_EQ(r.train_documents + r.val_documents, 200u);
  auto meta = nlohmann::json::parse(read_file(dir / "out/meta.json"));
  EXPECT_EQ(meta["tokenizer"], "byte");
  EXPECT_EQ(meta["train_documents"], r.train_documents);
  EXPECT_GT(meta["train_shards"].size(), 1u);  // 1024-token shards
  auto train = documents((dir / "out/train_*.bin").string());
  auto val = documents((dir / "out/val_*.bin").string());
  ASSERT_EQ(train.size() + val.size(), 200u);
  EXPECT_GT(val.size(), 20u);
  EXPECT_LT(val.size(), 60u);
  // Every document exactly once, order kept within each split, validation drawn from all inputs.
  std::set<std::string> all(train.begin(), train.end());
  all.insert(val.begin(), val.end());
  EXPECT_EQ(all.size(), 200u);
  auto index = [](const std::string& d) { return std::stoi(d.substr(4)); };
  for (size_t i = 1; i < val.size(); i++) EXPECT_LT(index(val[i - 1]), index(val[i]));
  int from_texts = 0, from_jsonl = 0, from_json = 0;
  for (auto& v : val) (index(v) < 50 ? from_texts : index(v) < 150 ? from_jsonl : from_json)++;
  EXPECT_GT(from_texts, 0);
  EXPECT_GT(from_jsonl, 0);
  EXPECT_GT(from_json, 0);
  // The same seed draws the same share; another seed another one.
  cfg.out = (dir / "again").string();
  prepare(cfg);
  EXPECT_EQ(read_file(dir / "out/val_000000.bin"), read_file(dir / "again/val_000000.bin"));
  cfg.out = (dir / "other").string(), cfg.seed = 2;
  prepare(cfg);
  EXPECT_NE(read_file(dir / "out/val_000000.bin"), read_file(dir / "other/val_000000.bin"));
}

// A long-document set for evaluation: of the documents of at least long_min_tokens that
// validation did not draw, long_fraction are held out in out/long, in neither split; the same for
// any thread count; compare, eval and analyze open the folder for evaluation alone.
TEST_F(PrepareTest, LongDocumentsAreHeldOutForEvaluation) {
  fs::create_directories(dir / "in/long");
  for (int i = 0; i < 40; i++) {
    std::string text = fmt::format("LONGDOC-{:02d} ", i);
    while (text.size() < 2600)
      text += fmt::format("sentence {} of long document {}. ", text.size(), i);
    std::ofstream(dir / "in/long" / fmt::format("{:02d}.txt", i)) << text;
  }
  cfg.inputs.push_back({(dir / "in/long").string()});
  cfg.long_min_tokens = 2500, cfg.long_fraction = 0.3;
  const PrepareResult r = prepare(cfg);
  EXPECT_EQ(r.train_documents + r.val_documents + r.long_documents, 240u);
  EXPECT_GT(r.long_documents, 4u);  // 30 % of the 40 long ones not in validation
  EXPECT_LT(r.long_documents, 22u);
  const auto meta = nlohmann::json::parse(read_file(dir / "out/meta.json"));
  EXPECT_EQ(meta["long_documents"]["documents"], r.long_documents);
  EXPECT_EQ(meta["long_documents"]["folder"], "long");
  const auto long_meta = nlohmann::json::parse(read_file(dir / "out/long/meta.json"));
  EXPECT_EQ(long_meta["val_documents"], r.long_documents);
  EXPECT_EQ(long_meta["tokenizer"], "byte");
  // Its documents are long ones, each whole, and none of them is in either split.
  const Dataset held = open_dataset((dir / "out/long").string(), std::nullopt, 0, 1, 64, "",
                                    /*evaluation=*/true);
  EXPECT_EQ(held.train.size(), 0u);
  EXPECT_EQ(held.val.size(), r.long_tokens);
  std::vector<int32_t> ids(held.val.size());
  held.val.copy(0, ids.size(), ids.data());
  const std::string held_text(ids.begin(), ids.end());
  const Dataset main = open_dataset((dir / "out").string(), std::nullopt, 0, 1, 1);
  std::vector<int32_t> rest(main.train.size() + main.val.size());
  main.train.copy(0, main.train.size(), rest.data());
  main.val.copy(0, main.val.size(), rest.data() + main.train.size());
  const std::string rest_text(rest.begin(), rest.end());
  size_t found = 0;
  for (int i = 0; i < 40; i++) {
    const std::string marker = fmt::format("LONGDOC-{:02d} ", i);
    const bool held_out = held_text.find(marker) != std::string::npos;
    found += held_out;
    EXPECT_NE(held_out, rest_text.find(marker) != std::string::npos) << marker;
  }
  EXPECT_EQ(found, r.long_documents);
  // Opened for training, it has no training shards: refused in one line.
  EXPECT_NE(error_of([&] {
              open_dataset((dir / "out/long").string(), std::nullopt, 0, 1, 64);
            }).find("holds no token shards"),
            std::string::npos);
  // The same draw with one thread.
  cfg.out = (dir / "one").string(), cfg.threads = 1;
  prepare(cfg);
  EXPECT_EQ(read_file(dir / "out/long/val_000000.bin"), read_file(dir / "one/long/val_000000.bin"));
  EXPECT_EQ(read_file(dir / "out/train_000000.bin"), read_file(dir / "one/train_000000.bin"));
  // No document long enough: said in one line, nothing written.
  cfg.out = (dir / "none").string(), cfg.long_min_tokens = 100000;
  EXPECT_NE(error_of([&] { prepare(cfg); }).find("lower --long-min-tokens"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir / "none"));
}

TEST_F(PrepareTest, Gpt2DocumentsStartWithEndOfText) {
  cfg.tokenizer = TokenizerKind::gpt2;
  cfg.vocab_dir = XSA_VOCAB_DIR;
  cfg.val_fraction = 0;
  prepare(cfg);
  Dataset d = open_dataset((dir / "out").string(), std::nullopt, 0, 1, 1);
  std::vector<int32_t> ids(d.train.size());
  d.train.copy(0, ids.size(), ids.data());
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 50256), 200);
  EXPECT_EQ(ids[0], 50256);
  auto tok = make_tokenizer(TokenizerKind::gpt2, XSA_VOCAB_DIR);
  EXPECT_EQ(tok->decode(std::vector<int32_t>(ids.begin(), ids.begin() + 4)),
            "<|endoftext|>doc 0\n");
}

TEST_F(PrepareTest, BadInputsFailCleanly) {
  prepare(cfg);
  const std::string before = read_file(dir / "out/meta.json");
  auto expect_error = [&](PrepareConfig c, const std::string& expected) {
    std::string err = error_of([&] { prepare(c); });
    EXPECT_NE(err.find(expected), std::string::npos) << "got: " << err;
    for (auto& e : fs::directory_iterator(dir))
      EXPECT_EQ(e.path().filename().string().find(".partial"), std::string::npos)
          << "partial output left behind";
  };
  expect_error(cfg, "out: already exists; pass --force");
  EXPECT_EQ(read_file(dir / "out/meta.json"), before);

  PrepareConfig c = cfg;
  c.out = (dir / "o2").string();
  // Each input written, then given alone.
  auto expect_input_error = [&](const std::string& name, const std::string& text,
                                const std::string& expected) {
    std::ofstream(dir / name) << text;
    c.inputs = {{(dir / name).string()}};
    expect_error(c, expected);
  };
  expect_input_error("bad.jsonl", "{\"text\": \"fine\"}\n{\"text\": \"also fine\"}\n{not json\n",
                     "bad.jsonl:3: not valid JSON");
  expect_input_error("notext.jsonl", "{\"text\": \"fine\"}\n{\"body\": \"no text\"}\n",
                     "notext.jsonl:2: has no \"text\" field");
  expect_input_error("empty.txt", "", "hold no documents");
  // 600 copies of one document all go where the first goes: none drawn for validation, and the
  // reason said (not "too few documents").
  std::string same;
  for (int i = 0; i < 600; i++) same += "{\"text\": \"the same document\"}\n";
  expect_input_error("same.jsonl", same,
                     "600 documents drew none for validation (a share of 0.2; a document goes "
                     "where its duplicates go");
  // A line past the record limit: refused, named with its line, not held whole.
  c.max_record_bytes = 64;
  expect_input_error("long.jsonl",
                     "{\"text\": \"short\"}\n{\"text\": \"" + std::string(100, 'x') + "\"}\n",
                     "long.jsonl:2: a line longer than 64 bytes (--max-record-mb); not read");
  c.max_record_bytes = kMaxRecordBytes;
  // A JSON array is read item by item: a bad item is named by its index.
  expect_input_error("array.json", "[\"one\", 2, \"three\"]",
                     "array.json: item 1 is neither a string nor an object");
  expect_input_error("unended.json", "[\"one\", \"two\"",
                     "not valid JSON (the array does not end)");
  c.inputs = {{(dir / "nothere").string()}};
  expect_error(c, "nothere: no such file or folder");
  c.inputs = cfg.inputs;
  c.tokenizer = TokenizerKind::gpt2;
  c.vocab_dir = (dir / "novocab").string();
  expect_error(c, "scripts/get_data.sh");
  EXPECT_FALSE(fs::exists(dir / "o2"));

  // A failure with --force leaves the existing output as it was.
  c = cfg;
  c.force = true;
  c.inputs.push_back({(dir / "bad.jsonl").string()});
  expect_error(c, "bad.jsonl:3");
  EXPECT_EQ(read_file(dir / "out/meta.json"), before);
  // ... and a successful --force replaces it.
  c = cfg;
  c.force = true;
  c.seed = 3;
  prepare(c);
  EXPECT_NE(read_file(dir / "out/meta.json"), before);
}

// Every file of a prepared folder, by name: its size and a hash of its bytes (meta.json without
// its "sources", which name the inputs' paths).
std::map<std::string, std::string> prepared_files(const fs::path& out) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(out)) {
    if (!e.is_regular_file()) continue;
    std::string bytes = read_file(e.path());
    if (e.path().filename() == "meta.json") {
      auto meta = nlohmann::json::parse(bytes);
      meta.erase("sources");
      bytes = meta.dump();
    }
    files[fs::relative(e.path(), out).string()] =
        fmt::format("{} bytes, hash {:016x}", bytes.size(), hash_name(bytes, 0));
  }
  return files;
}

// The same documents in any batch size and thread count give the same files, byte for byte.
TEST_F(PrepareTest, BatchSizeAndThreadsLeaveTheShardsAsTheyAre) {
  prepare(cfg);
  const auto whole = prepared_files(dir / "out");
  for (int threads : {1, 2}) {
    PrepareConfig c = cfg;
    c.out = (dir / fmt::format("small-batches-{}", threads)).string();
    c.batch_bytes = 4096, c.threads = threads;
    prepare(c);
    EXPECT_EQ(prepared_files(c.out), whole) << threads << " threads";
  }
}

// A document's split is drawn from its text: the inputs in another order put the same documents
// in validation.
TEST_F(PrepareTest, ValidationIsTheSameWhateverTheInputsOrder) {
  prepare(cfg);
  PrepareConfig c = cfg;
  std::reverse(c.inputs.begin(), c.inputs.end());
  c.out = (dir / "reversed").string();
  prepare(c);
  auto val = documents((dir / "out/val_*.bin").string());
  auto val_reversed = documents((dir / "reversed/val_*.bin").string());
  EXPECT_EQ(std::set<std::string>(val.begin(), val.end()),
            std::set<std::string>(val_reversed.begin(), val_reversed.end()));
  EXPECT_NE(val, val_reversed);  // (the order is the inputs')
}

// A text file of at most 1 MiB is one document, as it is; a larger one is split at blank lines.
TEST_F(PrepareTest, ALargeTextFileIsSplitAtBlankLines) {
  std::string big;
  int paragraphs = 0;
  while (big.size() <= kTextDocumentMaxBytes) {
    big += fmt::format("paragraph {}\nits second line\n\n \n", paragraphs++);
  }
  std::ofstream(dir / "big.txt") << big;
  std::ofstream(dir / "small.txt") << "one\n\ndocument\n";
  cfg.inputs = {{(dir / "big.txt").string()}, {(dir / "small.txt").string()}};
  cfg.val_fraction = 0;
  const PrepareResult r = prepare(cfg);
  EXPECT_EQ(r.train_documents, (size_t)paragraphs + 1);
  std::vector<int32_t> ids;
  Dataset d = open_dataset((dir / "out").string(), std::nullopt, 0, 1, 1);
  ids.resize(d.train.size());
  d.train.copy(0, ids.size(), ids.data());
  const std::string text(ids.begin(), ids.end());
  EXPECT_EQ(text.substr(0, 40), "paragraph 0\nits second line\nparagraph 1\n");
  EXPECT_EQ(text.substr(text.size() - 14), "one\n\ndocument\n");  // whole, as it is
}

TEST_F(PrepareTest, TextFieldAndGlobs) {
  std::ofstream jl(dir / "in/body.jsonl");
  for (int i = 0; i < 100; i++) jl << nlohmann::json{{"body", fmt::format("doc {}", i)}} << "\n";
  jl.close();
  std::ofstream(dir / "in/other.jsonl") << "{\"body\": \"doc 100\"}\n";
  cfg.inputs = {{(dir / "in/*.jsonl").string()}};
  cfg.text_field = "body";
  EXPECT_NE(error_of([&] { prepare(cfg); }).find("b.jsonl:1: has no \"body\" field"),
            std::string::npos);
  cfg.inputs = {{(dir / "in/[bo]*y.jsonl").string()}, {(dir / "in/o*.jsonl").string()}};
  const PrepareResult r = prepare(cfg);
  EXPECT_EQ(r.train_documents + r.val_documents, 101u);
  cfg.inputs = {{(dir / "in/*.nothing").string()}};
  cfg.out = (dir / "none").string();
  EXPECT_NE(error_of([&] { prepare(cfg); }).find("*.nothing: no file matches"), std::string::npos);
}

// Bad input: one line naming file and line (stop, the default), or left out and counted (skip).
TEST_F(PrepareTest, InvalidUtf8StopsOrIsSkipped) {
  std::ofstream(dir / "in/bad.jsonl") << "{\"text\": \"fine\"}\n{\"text\": \"caf\xe9\"}\n"
                                      << "{\"text\": \"fine too\"}\n";
  std::ofstream(dir / "in/latin1.txt") << "line one\nna\xefve\n";
  std::ofstream(dir / "in/overlong.txt") << "\xc0\xaf\n";
  std::ofstream(dir / "in/surrogate.txt") << "\xed\xa0\x80\n";
  for (const char* name : {"bad.jsonl", "latin1.txt", "overlong.txt", "surrogate.txt"}) {
    PrepareConfig c = cfg;
    c.inputs.push_back({(dir / "in" / name).string()});
    c.out = (dir / "o").string();
    const std::string err = error_of([&] { prepare(c); });
    EXPECT_NE(err.find(std::string(name) + ":"), std::string::npos) << err;
    EXPECT_NE(err.find("not valid UTF-8"), std::string::npos) << err;
    EXPECT_FALSE(fs::exists(dir / "o"));
  }
  EXPECT_NE(error_of([&] {
              PrepareConfig c = cfg;
              c.inputs = {{(dir / "in/latin1.txt").string()}};
              prepare(c);
            }).find("latin1.txt:2: not valid UTF-8 (byte 0xef)"),
            std::string::npos);
  cfg.on_bad = BadInput::skip;
  cfg.inputs.push_back({(dir / "in/bad.jsonl").string()});
  cfg.inputs.push_back({(dir / "in/latin1.txt").string()});
  const PrepareResult r = prepare(cfg);
  EXPECT_EQ(r.skipped, 2u);
  EXPECT_EQ(r.train_documents + r.val_documents, 202u);  // the 200, "fine", "fine too"
  const auto meta = nlohmann::json::parse(read_file(dir / "out/meta.json"));
  EXPECT_EQ(meta["skipped"], 2);
  EXPECT_EQ(meta["sources"].back()["skipped"], 1);
  EXPECT_EQ(meta["sources"].back()["documents"], 0);
}

#ifdef XSA_TEST_COMPRESSION
void write_gzip(const fs::path& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_TRUE(f);
  ASSERT_EQ(gzwrite(f, bytes.data(), (unsigned)bytes.size()), (int)bytes.size());
  gzclose(f);
}
void write_zstd(const fs::path& path, const std::string& bytes) {
  std::string out(ZSTD_compressBound(bytes.size()), '\0');
  const size_t n = ZSTD_compress(out.data(), out.size(), bytes.data(), bytes.size(), 3);
  ASSERT_FALSE(ZSTD_isError(n));
  out.resize(n);
  std::ofstream(path, std::ios::binary) << out;
}

// What a decoder fed a truncated .gz or .zst gives before its input runs out (zlib's inflate and
// libzstd's stream decoder driven directly, as zcat does).
std::string decode_prefix(const std::string& packed, const std::string& ext) {
  std::string out;
  std::string chunk(1 << 16, '\0');
  if (ext == "gz") {
    z_stream z{};
    inflateInit2(&z, 16 + MAX_WBITS);
    z.next_in = (Bytef*)packed.data(), z.avail_in = (uInt)packed.size();
    int code = Z_OK;
    do {
      z.next_out = (Bytef*)chunk.data(), z.avail_out = (uInt)chunk.size();
      code = inflate(&z, Z_NO_FLUSH);
      out.append(chunk.data(), chunk.size() - z.avail_out);
    } while (code == Z_OK && (z.avail_in > 0 || z.avail_out == 0));
    inflateEnd(&z);
    return out;
  }
  ZSTD_DStream* d = ZSTD_createDStream();
  ZSTD_inBuffer in{packed.data(), packed.size(), 0};
  while (in.pos < in.size) {
    ZSTD_outBuffer o{chunk.data(), chunk.size(), 0};
    if (ZSTD_isError(ZSTD_decompressStream(d, &o, &in))) break;
    out.append(chunk.data(), o.pos);
  }
  for (;;) {  // what it holds back once the input is spent
    ZSTD_outBuffer o{chunk.data(), chunk.size(), 0};
    if (ZSTD_isError(ZSTD_decompressStream(d, &o, &in)) || o.pos == 0) break;
    out.append(chunk.data(), o.pos);
  }
  ZSTD_freeDStream(d);
  return out;
}

size_t whole_lines(const std::string& text) {
  return (size_t)std::count(text.begin(), text.end(), '\n');
}

// .gz and .zst, text and JSON lines, give the shards of the plain files; a truncated archive stops
// with its name, or (skip) ends its file there.
TEST_F(PrepareTest, CompressedInputsReadAsPlainOnes) {
  prepare(cfg);
  const auto plain = prepared_files(dir / "out");
  const std::string jsonl = read_file(dir / "in/b.jsonl");
  for (const char* ext : {"gz", "zst"}) {
    fs::path packed = dir / "packed" / ext;
    fs::create_directories(packed / "texts");
    for (int i = 0; i < 50; i++) {
      const std::string name = fmt::format("{:03d}.txt", i);
      const std::string text = read_file(dir / "in/texts" / name);
      (ext == std::string("gz") ? write_gzip : write_zstd)(packed / "texts" / (name + "." + ext),
                                                           text);
    }
    (ext == std::string("gz") ? write_gzip : write_zstd)(packed / (std::string("b.jsonl.") + ext),
                                                         jsonl);
    PrepareConfig c = cfg;
    c.inputs = {{(packed / "texts").string()},
                {(packed / (std::string("b.jsonl.") + ext)).string()},
                {(dir / "in/c.json").string()}};
    c.out = (dir / fmt::format("out-{}", ext)).string();
    prepare(c);
    EXPECT_EQ(prepared_files(c.out), plain) << ext;

    // Cut in the middle (of many compressed blocks): named, with the line reached; skipped, the
    // documents before the cut stay.
    std::string many;
    for (int i = 0; i < 40000; i++)
      many +=
          nlohmann::json{{"text", fmt::format("line {} {}", i, i * 7919 % 10007)}}.dump() + "\n";
    const fs::path cut = packed / (std::string("cut.jsonl.") + ext);
    (ext == std::string("gz") ? write_gzip : write_zstd)(cut, many);
    const std::string bytes = read_file(cut);
    std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() * 2 / 3);
    c.inputs = {{cut.string()}};
    c.out = (dir / "cut").string();
    const std::string err = error_of([&] { prepare(c); });
    EXPECT_NE(err.find(cut.string() + ": "), std::string::npos) << err;
    EXPECT_NE(err.find("truncated"), std::string::npos) << err;
    EXPECT_NE(err.find("(line "), std::string::npos) << err;
    c.on_bad = BadInput::skip;
    const PrepareResult r = prepare(c);
    EXPECT_EQ(r.skipped, 1u) << ext;
    // Every whole line before the cut is kept: as many as a decoder fed the cut bytes and stopped
    // where its input ends gives (zcat's count; the bytes decoded with the error go first).
    const std::string cut_bytes = read_file(cut);
    EXPECT_EQ(r.train_documents + r.val_documents, whole_lines(decode_prefix(cut_bytes, ext)))
        << ext;
    EXPECT_GT(r.train_documents + r.val_documents, 20000u) << ext;
    fs::remove_all(c.out);
    // Data after the last member or frame that is not another one: an error, as for both.
    const fs::path tail = packed / (std::string("tail.jsonl.") + ext);
    (ext == std::string("gz") ? write_gzip : write_zstd)(tail, jsonl);
    std::ofstream(tail, std::ios::binary | std::ios::app) << "trailing garbage";
    c.inputs = {{tail.string()}};
    c.on_bad = BadInput::stop;
    const std::string tail_err = error_of([&] { prepare(c); });
    EXPECT_NE(tail_err.find(tail.string() + ": "), std::string::npos) << tail_err;
    EXPECT_TRUE(tail_err.find("data after the gzip data") != std::string::npos ||
                tail_err.find("corrupt zstd data") != std::string::npos)
        << tail_err;
    // Two gzip members (or zstd frames) one after the other: read as one file.
    const fs::path two = packed / (std::string("two.jsonl.") + ext);
    (ext == std::string("gz") ? write_gzip : write_zstd)(two, jsonl);
    const std::string one_member = read_file(two);
    std::ofstream(two, std::ios::binary | std::ios::app) << one_member;
    c.inputs = {{two.string()}};
    c.out = (dir / "two").string();
    const PrepareResult doubled = prepare(c);
    c.inputs = {{(dir / "in/b.jsonl").string()}};
    c.out = (dir / "one").string();
    const PrepareResult once = prepare(c);
    EXPECT_EQ(doubled.train_documents + doubled.val_documents,
              2 * (once.train_documents + once.val_documents))
        << ext;
    fs::remove_all(dir / "two"), fs::remove_all(dir / "one");
  }
}
#endif

}  // namespace
}  // namespace xsa

// xsa bench --data: the data side of training. The tokenizer alone (one thread and all), prepare
// on JSON lines of the same text (its streaming rate, the tokenizer's loading left out, against
// the tokenizer's single-thread rate times the threads), and the loader serving shuffled windows
// from memory-mapped shards of a few GB against what training the `gpt2` model consumes.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "xsa/backend/device.h"
#include "xsa/bench/measure.h"
#include "xsa/data/dataset.h"
#include "xsa/data/prepare.h"
#include "xsa/data/shards.h"
#include "xsa/model/attention.h"
#include "xsa/tokenizer/tokenizer.h"
#include "xsa/util/error.h"
#include "xsa/util/files.h"
#include "xsa/util/memory.h"
#include "xsa/util/rng.h"
#include "xsa/util/threads.h"

namespace xsa::bench {
namespace {

namespace fs = std::filesystem;

// English-like documents (words of a fixed list at Zipf-like frequencies, sentences, paragraphs),
// `bytes` of them in all, the same every run: text a byte-pair tokenizer works on as on prose.
std::vector<std::string> sample_documents(size_t bytes) {
  static const char* kWords[] = {
      "the",      "of",       "and",     "to",         "in",      "a",        "is",
      "that",     "for",      "it",      "as",         "was",     "with",     "be",
      "by",       "on",       "not",     "he",         "this",    "are",      "or",
      "his",      "from",     "at",      "which",      "but",     "have",     "an",
      "had",      "they",     "you",     "were",       "their",   "one",      "all",
      "we",       "can",      "her",     "has",        "there",   "been",     "if",
      "more",     "when",     "will",    "would",      "who",     "so",       "no",
      "time",     "people",   "year",    "government", "country", "state",    "world",
      "history",  "question", "number",  "attention",  "context", "language", "model",
      "training", "data",     "America", "Congress",   "report",  "1890",     "economic",
      "public",   "interest"};
  const size_t n_words = sizeof kWords / sizeof kWords[0];
  Rng rng(2026);
  std::vector<std::string> docs;
  size_t total = 0;
  while (total < bytes) {
    std::string doc;
    const size_t target = 200 + (size_t)(rng.uniform() * rng.uniform() * 20000);
    while (doc.size() < target) {
      const int words = 6 + (int)(rng.uniform() * 20);
      for (int w = 0; w < words; w++) {
        const size_t k = (size_t)(n_words * rng.uniform() * rng.uniform());  // the first, often
        std::string word = kWords[std::min(k, n_words - 1)];
        if (w == 0) word[0] = (char)std::toupper((unsigned char)word[0]);
        doc += (w ? " " : "") + word;
      }
      doc += rng.uniform() < 0.15 ? ".\n\n" : ". ";
    }
    total += doc.size();
    docs.push_back(std::move(doc));
  }
  return docs;
}

// MB/s of encoding `docs` on `threads` threads (documents spread over them), by a fresh tokenizer
// whose caches start empty, as prepare's do.
double encode_mbs(TokenizerKind kind, const std::vector<std::string>& docs, size_t bytes,
                  int threads) {
  const std::unique_ptr<Tokenizer> tokenizer = make_tokenizer(kind);
  const auto t0 = clock_type::now();
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (size_t i = 0; i < docs.size(); i++) {
    std::vector<int32_t> ids;
    tokenizer->encode(docs[i], ids);
  }
  return bytes / 1e6 / (ms_since(t0) / 1000);
}

struct TempFolder {
  fs::path path;
  explicit TempFolder(const std::string& name)
      : path(fs::temp_directory_path() / fmt::format("xsa-bench-{}-{}", name, ::getpid())) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempFolder() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// `bytes` of prose: the State of the Union addresses of the default corpus, taken again from the
// first when they run out (scripts/get_data.sh installs them); else sample_documents().
std::vector<std::string> prose(size_t bytes, std::string& source) {
  std::vector<std::string> addresses;
  try {
    for (const PrepareInput& in : default_corpus_config(TokenizerKind::byte).inputs) {
      if (in.format != "text") continue;
      DocumentReader reader(in, "text", BadInput::stop);
      for (std::string doc; reader.next(doc);) addresses.push_back(std::move(doc));
    }
  } catch (const Error&) {
    addresses.clear();
  }
  if (addresses.empty()) {
    source =
        "English-like text generated from a list of words (the default corpus is not installed)";
    return sample_documents(bytes);
  }
  source = "the State of the Union addresses of the default corpus";
  std::vector<std::string> docs;
  for (size_t total = 0, i = 0; total < bytes; i++) {
    docs.push_back(addresses[i % addresses.size()]);
    total += docs.back().size();
  }
  return docs;
}

void bench_tokenize_and_prepare(const BenchOptions& o, int threads, json& records) {
  keep_freed_memory_for_reuse();  // as xsa prepare runs
  std::string source;
  const std::vector<std::string> docs = prose((size_t)o.data_text_mb << 20, source);
  size_t bytes = 0;
  for (const auto& d : docs) bytes += d.size();
  TempFolder folder("prepare");
  {
    std::ofstream jsonl(folder.path / "sample.jsonl");
    for (const auto& d : docs) jsonl << json{{"text", d}}.dump() << "\n";
  }
  // Rounds of (tokenizer on 1 thread, tokenizer on t, prepare on t) for each t: the ratio is taken
  // within a round, as the shared machine's speed drifts between rounds, and its median reported.
  constexpr int kRounds = 5;
  std::printf(
      "\n## Tokenizing and preparing %.1f MB of text (%zu documents: %s; prepare reads them as "
      "JSON lines), medians of %d rounds\n\n| tokenizer | threads | tokenizer MB/s | prepare MB/s "
      "| prepare ÷ (tokenizer on 1 thread × threads), median (range) |\n|---|---|---|---|---|\n",
      bytes / 1e6, docs.size(), source.c_str(), kRounds);
  for (TokenizerKind kind : {TokenizerKind::gpt2, TokenizerKind::byte}) {
    try {
      make_tokenizer(kind);
    } catch (const Error& e) {
      std::printf("| %s | – | not available: %s | | |\n", to_string(kind), e.what());
      continue;
    }
    std::vector<int> counts = {1};
    if (threads > 1) counts.push_back(threads);
    std::vector<std::vector<double>> encode(counts.size()), prepared(counts.size()),
        efficiency(counts.size());
    std::vector<json> rounds(counts.size(), json::array());
    for (int round = 0; round < kRounds; round++) {
      const double single = encode_mbs(kind, docs, bytes, 1);
      for (size_t c = 0; c < counts.size(); c++) {
        const int t = counts[c];
        encode[c].push_back(t == 1 ? single : encode_mbs(kind, docs, bytes, t));
        PrepareConfig cfg;
        cfg.inputs = {{(folder.path / "sample.jsonl").string()}};
        cfg.tokenizer = kind;
        cfg.out = (folder.path / "out").string();
        cfg.force = true, cfg.quiet = true, cfg.threads = t;
        cfg.val_fraction = 0;  // (each document is drawn all the same: a short text may get none)
        const PrepareResult r = prepare(cfg);
        prepared[c].push_back(r.bytes / 1e6 / r.stream_seconds);
        efficiency[c].push_back(prepared[c].back() / (single * t));
        rounds[c].push_back({{"tokenizer_1_thread_mbs", single},
                             {"tokenizer_mbs", encode[c].back()},
                             {"prepare_mbs", prepared[c].back()}});
      }
    }
    for (size_t c = 0; c < counts.size(); c++) {
      const Stats e = stats_of(efficiency[c]);
      const double encode_median = stats_of(encode[c]).median,
                   prepare_median = stats_of(prepared[c]).median;
      std::printf("| %s | %d | %.1f | %.1f | %.2f (%.2f-%.2f) |\n", to_string(kind), counts[c],
                  encode_median, prepare_median, e.median, e.min, e.max);
      records.push_back({{"kind", "prepare"},
                         {"tokenizer", to_string(kind)},
                         {"threads", counts[c]},
                         {"text_mb", bytes / 1e6},
                         {"rounds", rounds[c]},
                         {"tokenizer_mbs", encode_median},
                         {"prepare_mbs", prepare_median},
                         {"efficiency", e.median},
                         {"efficiency_min", e.min},
                         {"efficiency_max", e.max}});
    }
  }
  set_thread_count(threads);
}

// Shards of random tokens, `gb` of them, and the loader cutting shuffled windows of `gpt2`'s
// shape out of them: tokens served per second against what training consumes.
void bench_loader(const BenchOptions& o, int threads, json& records) {
  TempFolder folder("loader");
  const size_t total_tokens = (size_t)(o.data_gb * 1e9 / 2);
  const size_t shard_tokens = 100'000'000;
  Rng rng(11);
  std::vector<uint16_t> tokens(std::min(total_tokens, shard_tokens));
  int shards = 0;
  for (size_t done = 0; done < total_tokens; done += tokens.size(), shards++) {
    tokens.resize(std::min(shard_tokens, total_tokens - done));
    for (auto& t : tokens) t = (uint16_t)(rng.next_u64() % 50257);
    write_file_atomic(folder.path / fmt::format("train_{:06d}.bin", shards),
                      encode_shard(tokens.data(), tokens.size()));
  }
  write_file_atomic(folder.path / "val_000000.bin", encode_shard(tokens.data(), 1 << 20));
  tokens = {};
  // Training's consumption: --model's (gpt2 unless one is named) at T 1 024.
  BenchShape model = shapes_of(o.config == "all" ? "gpt2" : o.config).front();
  model.T = 1024;
  const int B = model.B, T = model.T;
  const Dataset data = open_dataset(folder.path.string(), TokenizerKind::gpt2, 0, B, T);
  BatchLoader loader(data.train, B, T, /*shuffle=*/true, 1);
  std::vector<int32_t> inputs((size_t)B * T), targets((size_t)B * T);
  size_t batches = 0;
  const auto t0 = clock_type::now();
  while (ms_since(t0) < 3000) {
    loader.next(inputs.data(), targets.data());
    batches++;
  }
  const double loader_tps = batches * (double)B * T / (ms_since(t0) / 1000);

  // What training consumes: the model's step at T 1024, two timed after one warm-up.
  const ModelConfig cfg = model_of(model, AttnKind::xsa);
  StepBench step(cfg, B, T, cpu_backend<float>());
  std::vector<int32_t> in, tg;
  random_batch(cfg, B * T, in, tg);
  step.time_step(in, tg);
  std::vector<double> ms = {step.time_step(in, tg), step.time_step(in, tg)};
  const double train_tps = B * T / (stats_of(ms).median / 1000);
  std::printf(
      "\n## The loader: shuffled windows of %d × %d from %d memory-mapped shards (%.1f GB, just "
      "written: in the page cache)\n\n| served tokens/s | %s training tokens/s (T 1024, %d "
      "threads) | ratio |\n|---|---|---|\n| %.3g | %.0f | %.3g× |\n",
      B, T, shards, total_tokens * 2 / 1e9, model.name, threads, loader_tps, train_tps,
      loader_tps / train_tps);
  records.push_back({{"kind", "loader"},
                     {"gb", total_tokens * 2 / 1e9},
                     {"shards", shards},
                     {"batch", B},
                     {"seq_len", T},
                     {"served_tokens_per_s", loader_tps},
                     {"model", model.name},
                     {"train_tokens_per_s", train_tps}});
}

}  // namespace

void bench_data(const BenchOptions& o, int threads, json& records) {
  bench_tokenize_and_prepare(o, threads, records);
  bench_loader(o, threads, records);
}

}  // namespace xsa::bench

// Encoding speed on English text (Google Benchmark; reports bytes/s per thread): GPT-2's BPE, and a
// 4 096-piece SentencePiece BPE of the same corpus (trained once into /tmp/xsa_bench_spm4096), on
// one thread and on two at once (one tokenizer shared: SentencePiece's encode is const).
//   ./build/tokenizer_bench [--benchmark_repetitions=5]   (needs data/nlp-corpus.txt and data/gpt2)
#include <benchmark/benchmark.h>

#include <filesystem>
#include <string>

#include "xsa/data/tokenizer_training.h"
#include "xsa/tokenizer/gpt2_tokenizer.h"
#include "xsa/tokenizer/spm_tokenizer.h"
#include "xsa/util/files.h"

namespace {

const std::string& english() {
  static const std::string text = xsa::read_file("data/nlp-corpus.txt").substr(0, 4 << 20);  // 4 MB
  return text;
}

// A fresh tokenizer per run would measure the cold piece cache; real runs (prepare) keep it warm
// across documents, so the first iteration warms it and the timed ones are steady.
void BM_Gpt2Encode(benchmark::State& state) {
  static xsa::Gpt2Tokenizer tok(xsa::find_vocab_dir(""));
  const std::string& text = english();
  std::vector<int32_t> ids;
  for (auto _ : state) {
    ids.clear();
    tok.encode(text, ids);
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed((int64_t)state.iterations() * text.size());
  state.counters["tokens_per_byte"] = (double)ids.size() / text.size();
}
BENCHMARK(BM_Gpt2Encode)->Unit(benchmark::kMillisecond)->MinTime(2.0);

// Cold: every piece is new to the cache (a new tokenizer object clears it).
void BM_Gpt2EncodeCold(benchmark::State& state) {
  const std::string& text = english();
  const auto dir = xsa::find_vocab_dir("");
  std::vector<int32_t> ids;
  for (auto _ : state) {
    state.PauseTiming();
    auto tok = std::make_unique<xsa::Gpt2Tokenizer>(dir);
    ids.clear();
    state.ResumeTiming();
    tok->encode(text, ids);
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed((int64_t)state.iterations() * text.size());
}
BENCHMARK(BM_Gpt2EncodeCold)->Unit(benchmark::kMillisecond)->Iterations(3);

const xsa::SpmTokenizer& spm4096() {
  static const xsa::SpmTokenizer tok = [] {
    const std::filesystem::path dir = "/tmp/xsa_bench_spm4096";
    if (!std::filesystem::exists(dir / "tokenizer.model")) {
      xsa::SpmTrainConfig cfg;
      cfg.inputs = {{"data/nlp-corpus.txt", "text"}};
      cfg.vocab = 4096, cfg.out = dir.string(), cfg.quiet = true, cfg.force = true;
      xsa::train_spm_tokenizer(cfg);
    }
    return xsa::SpmTokenizer(dir);
  }();
  return tok;
}

// Line by line, as documents go through xsa prepare: SentencePiece's BPE merges over a whole
// input with no pre-tokenization, so the 4 MB text as one input takes seconds (about 0.5 MB/s).
void BM_SpmEncode(benchmark::State& state) {
  const xsa::SpmTokenizer& tok = spm4096();
  const std::string& text = english();
  std::vector<std::string_view> lines;
  for (size_t start = 0, end; start < text.size(); start = end + 1) {
    end = std::min(text.find('\n', start), text.size());
    lines.push_back(std::string_view(text).substr(start, end + 1 - start));
  }
  std::vector<int32_t> ids;
  for (auto _ : state) {
    ids.clear();
    for (std::string_view line : lines) tok.encode(line, ids);
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed((int64_t)state.iterations() * text.size());
  state.counters["tokens_per_byte"] = (double)ids.size() / text.size();
}
BENCHMARK(BM_SpmEncode)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0)
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();

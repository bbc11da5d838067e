// GPT-2 encoding speed on English text (Google Benchmark; reports bytes/s per thread).
//   ./build/tokenizer_bench [--benchmark_repetitions=5]   (needs data/nlp-corpus.txt and data/gpt2)
#include <benchmark/benchmark.h>

#include <string>

#include "xsa/tokenizer/gpt2_tokenizer.h"
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

}  // namespace

BENCHMARK_MAIN();

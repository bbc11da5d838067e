// The training step's kernels outside the matrix products, on `small`'s shapes (2048 rows of 384
// channels, a 512-row chunk of the 50 304-column head): what a bf16 step spends besides its
// products (docs/perf-log.md #21). Google Benchmark; both threads, as the step runs them.
//   ./build/kernels_bench [--benchmark_repetitions=5 --benchmark_report_aggregates_only=true]
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "xsa/ops/matmul_bf16.h"
#include "xsa/ops/ops.h"
#include "xsa/util/rng.h"

namespace {

constexpr int kRows = 2048, kChannels = 384, kHeadRows = 512, kVocab = 50257, kPaddedVocab = 50304;

std::vector<float> normal(size_t n, double scale, uint64_t seed) {
  xsa::Rng rng(seed);
  std::vector<float> x(n);
  for (float& v : x) v = float(scale * rng.normal());
  return x;
}

void BM_LayerNormForward(benchmark::State& state) {
  const size_t n = (size_t)kRows * kChannels;
  std::vector<float> x = normal(n, 1, 1), w = normal(kChannels, 0.1, 2),
                     b = normal(kChannels, 0.1, 3);
  std::vector<float> out(n), mean(kRows), rstd(kRows);
  for (auto _ : state)
    xsa::ops::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(),
                                kRows, kChannels);
  state.SetBytesProcessed((int64_t)state.iterations() * n * 8);
}
BENCHMARK(BM_LayerNormForward)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_LayerNormBackward(benchmark::State& state) {
  const size_t n = (size_t)kRows * kChannels;
  std::vector<float> x = normal(n, 1, 1), w = normal(kChannels, 0.1, 2),
                     b = normal(kChannels, 0.1, 3);
  std::vector<float> out(n), mean(kRows), rstd(kRows), dout = normal(n, 1, 4), dx(n), dw(kChannels),
                                                       db(kChannels);
  xsa::ops::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(),
                              kRows, kChannels);
  for (auto _ : state)
    xsa::ops::layernorm_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(),
                                 mean.data(), rstd.data(), kRows, kChannels);
  state.SetBytesProcessed((int64_t)state.iterations() * n * 12);
}
BENCHMARK(BM_LayerNormBackward)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_GeluForward(benchmark::State& state) {
  const size_t n = (size_t)kRows * 4 * kChannels;
  std::vector<float> x = normal(n, 1, 1), out(n);
  for (auto _ : state) xsa::ops::gelu_forward(out.data(), x.data(), n);
  state.SetBytesProcessed((int64_t)state.iterations() * n * 8);
}
BENCHMARK(BM_GeluForward)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_GeluBackward(benchmark::State& state) {
  const size_t n = (size_t)kRows * 4 * kChannels;
  std::vector<float> x = normal(n, 1, 1), dout = normal(n, 1, 2), dx(n);
  for (auto _ : state) xsa::ops::gelu_backward(dx.data(), x.data(), dout.data(), n);
  state.SetBytesProcessed((int64_t)state.iterations() * n * 12);
}
BENCHMARK(BM_GeluBackward)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_ToBf16(benchmark::State& state) {
  const size_t n = (size_t)kRows * 4 * kChannels;
  std::vector<float> x = normal(n, 1, 1);
  std::vector<xsa::ops::bf16> out(n);
  for (auto _ : state) xsa::ops::to_bf16(x.data(), out.data(), n);
  state.SetBytesProcessed((int64_t)state.iterations() * n * 6);
}
BENCHMARK(BM_ToBf16)->Unit(benchmark::kMicrosecond)->UseRealTime();

// One head chunk's softmax cross-entropy with its gradient written in bf16 (the bf16 step's).
void BM_CrossEntropyBf16(benchmark::State& state) {
  const int kHeadRows = (int)state.range(0);
  const size_t n = (size_t)kHeadRows * kPaddedVocab;
  std::vector<float> logits = normal(n, 2, 1), losses(kHeadRows);
  std::vector<xsa::ops::bf16> grad(n);
  std::vector<int32_t> targets(kHeadRows);
  for (int r = 0; r < kHeadRows; r++) targets[r] = (r * 7919) % kVocab;
  for (auto _ : state)
    xsa::ops::crossentropy_forward_backward_bf16(logits.data(), grad.data(), losses.data(),
                                                 targets.data(), kHeadRows, kVocab, kPaddedVocab,
                                                 1.0f / kRows);
  state.SetBytesProcessed((int64_t)state.iterations() * n * 6);
}
BENCHMARK(BM_CrossEntropyBf16)
    ->Arg(kHeadRows)
    ->Arg(4)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();

// The training step's kernels outside the matrix products, on `small`'s shapes (2048 rows of 384
// channels, a 512-row chunk of the 50 304-column head), attention and the optimizer also on
// `gpt2`'s: what a bf16 step spends besides its products (docs/perf-log.md #21, #22). Google
// Benchmark; both threads, as the step runs them.
//   ./build/kernels_bench [--benchmark_repetitions=5 --benchmark_report_aggregates_only=true]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "xsa/ops/attention.h"
#include "xsa/ops/matmul_bf16.h"
#include "xsa/ops/ops.h"
#include "xsa/util/rng.h"

namespace {

constexpr int kRows = 2048, kChannels = 384, kHeadRows = 512, kVocab = 50257, kPaddedVocab = 50304;

// The bf16 cases that need AVX512_BF16 (or AMX) report themselves skipped where it is missing, as
// xsa itself refuses --precision bf16 there; the rest run on any CPU.
bool skipped_without_bf16(benchmark::State& state) {
  std::string why;
  if (xsa::ops::bf16_available(&why)) return false;
  state.SkipWithError(("skipped: " + why).c_str());
  return true;
}

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
    xsa::ops::layernorm_backward(
        dx.data(), dw.data(), db.data(), dout.data(),
        {x.data(), w.data(), nullptr, mean.data(), rstd.data(), kRows, kChannels});
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

// A product input (backend.h) as a bf16 step makes it: before (arg 1) the producer wrote fp32 and
// the forward's product and the backward's weight gradient each converted it to bf16; now (arg 0)
// the producer writes the bf16 values once. LayerNorm over `small`'s rows, GELU over its MLP.
void BM_ProductInputLayerNorm(benchmark::State& state) {
  const bool convert_twice = state.range(0) == 1;
  const size_t n = (size_t)kRows * kChannels;
  std::vector<float> x = normal(n, 1, 1), w = normal(kChannels, 0.1, 2),
                     b = normal(kChannels, 0.1, 3);
  std::vector<float> out(n), mean(kRows), rstd(kRows);
  std::vector<xsa::ops::bf16> forward_copy(n), backward_copy(n);
  for (auto _ : state) {
    if (!convert_twice) {
      xsa::ops::layernorm_forward_bf16(forward_copy.data(), mean.data(), rstd.data(), x.data(),
                                       w.data(), b.data(), kRows, kChannels);
      continue;
    }
    xsa::ops::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(),
                                kRows, kChannels);
    xsa::ops::to_bf16(out.data(), forward_copy.data(), n);
    xsa::ops::to_bf16(out.data(), backward_copy.data(), n);
  }
}
BENCHMARK(BM_ProductInputLayerNorm)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_ProductInputGelu(benchmark::State& state) {
  const bool convert_twice = state.range(0) == 1;
  const size_t n = (size_t)kRows * 4 * kChannels;
  std::vector<float> x = normal(n, 1, 1), out(n);
  std::vector<xsa::ops::bf16> forward_copy(n), backward_copy(n);
  for (auto _ : state) {
    if (!convert_twice) {
      xsa::ops::gelu_forward_bf16(forward_copy.data(), x.data(), n);
      continue;
    }
    xsa::ops::gelu_forward(out.data(), x.data(), n);
    xsa::ops::to_bf16(out.data(), forward_copy.data(), n);
    xsa::ops::to_bf16(out.data(), backward_copy.data(), n);
  }
}
BENCHMARK(BM_ProductInputGelu)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond)->UseRealTime();

// Gradients as product inputs: before (arg 1) GELU's and RoPE's backward wrote fp32 in place and
// the weight gradient's product converted it; now (arg 0) they write bf16 once. `small`'s shapes
// (8 sequences of 256, 6 heads of 64).
void BM_ProductInputGeluBackward(benchmark::State& state) {
  const bool convert = state.range(0) == 1;
  const size_t n = (size_t)kRows * 4 * kChannels;
  // (Not in place, as the step runs it: repeated in place, the gradient would shrink each
  // iteration into denormals.)
  std::vector<float> x = normal(n, 1, 1), grad = normal(n, 1, 2), dx(n);
  std::vector<xsa::ops::bf16> out(n);
  for (auto _ : state) {
    if (!convert) {
      xsa::ops::gelu_backward_bf16(out.data(), x.data(), grad.data(), n);
      continue;
    }
    xsa::ops::gelu_backward(dx.data(), x.data(), grad.data(), n);
    xsa::ops::to_bf16(dx.data(), out.data(), n);
  }
}
BENCHMARK(BM_ProductInputGeluBackward)
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

void BM_ProductInputRopeBackward(benchmark::State& state) {
  const bool convert = state.range(0) == 1;
  constexpr int B = 8, T = kRows / B, H = 6, D = kChannels / H;
  const size_t n = (size_t)kRows * 3 * kChannels;
  std::vector<float> dqkv = normal(n, 1, 1), cos((size_t)T * D / 2), sin((size_t)T * D / 2);
  xsa::ops::rope_table(cos.data(), sin.data(), T, D, 10000.0);
  std::vector<xsa::ops::bf16> out(n);
  for (auto _ : state) {
    if (!convert) {
      xsa::ops::rope_backward_bf16(out.data(), dqkv.data(),
                                   {cos.data(), sin.data(), B, T, kChannels, H, H});
      continue;
    }
    xsa::ops::rope_backward(dqkv.data(), {cos.data(), sin.data(), B, T, kChannels, H, H});
    xsa::ops::to_bf16(dqkv.data(), out.data(), n);
  }
}
BENCHMARK(BM_ProductInputRopeBackward)
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

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

// AdamW over `gpt2`'s 124 M parameters with the bf16 copy written in the same pass (the bf16
// step's optimizer: 30 bytes per parameter), the gradient's sum of squares before it, and a plain
// stream (read one array, write another) as the memory's own speed to hold them against.
constexpr size_t kParams = 124'000'000;

void BM_AdamWBf16(benchmark::State& state) {
  std::vector<float> param = normal(kParams, 0.02, 1), grad = normal(kParams, 1e-3, 2), m(kParams),
                     v(kParams);
  std::vector<xsa::ops::bf16> copy(kParams);
  xsa::ops::AdamWSettings s{1e-4, 0.9, 0.95, 1e-8, 0.1, 1.0, 1};
  for (auto _ : state)
    xsa::ops::adamw_update(param.data(), grad.data(), m.data(), v.data(), kParams, s, copy.data());
  state.SetBytesProcessed((int64_t)state.iterations() * kParams * 30);  // 16 read, 14 written
}
BENCHMARK(BM_AdamWBf16)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_SumOfSquares(benchmark::State& state) {
  std::vector<float> grad = normal(kParams, 1e-3, 2);
  for (auto _ : state) benchmark::DoNotOptimize(xsa::ops::sum_of_squares(grad.data(), kParams));
  state.SetBytesProcessed((int64_t)state.iterations() * kParams * 4);
}
BENCHMARK(BM_SumOfSquares)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_StreamScale(benchmark::State& state) {
  std::vector<float> x = normal(kParams, 1, 1), out(kParams);
  for (auto _ : state) {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < kParams; i++) out[i] = 2.0f * x[i];
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed((int64_t)state.iterations() * kParams * 8);
}
BENCHMARK(BM_StreamScale)->Unit(benchmark::kMillisecond)->UseRealTime();

// One layer's causal attention with bf16 tile products (the bf16 step's), SA (third argument 0)
// or XSA (1), on `small`'s shape (8 sequences, 6 heads) and `gpt2`'s (4 sequences, 12 heads),
// T = 256, head size 64. GFLOP/s counts the tile products' useful work as `xsa bench` does
// (causal: 2·T·(T+1) per channel and product pair), the backward as twice the forward.
void attention_setup(int B, int H, bool exclusive, std::vector<float>& qkv, std::vector<float>& y,
                     std::vector<float>& z, std::vector<float>& lse,
                     xsa::ops::AttentionArgs<float>& args) {
  constexpr int T = 256, D = 64;
  const int C = H * D;
  qkv = normal((size_t)B * T * 3 * C, 1, 1), y.resize((size_t)B * T * C), lse.resize(B * H * T);
  z.resize(exclusive ? y.size() : 0);
  args.B = B, args.T = T, args.C = C, args.H = H;
  args.exclusive = exclusive;
  args.qkv = qkv.data(), args.y = y.data(), args.z = exclusive ? z.data() : nullptr;
  args.lse = lse.data();
}

// `small`'s 8 sequences of 6 heads and `gpt2`'s 4 of 12, SA and XSA.
void attention_shapes(benchmark::internal::Benchmark* b) {
  for (int exclusive : {0, 1}) b->Args({8, 6, exclusive})->Args({4, 12, exclusive});
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
}

double attention_flops(int B, int H) {
  constexpr double T = 256, D = 64;
  return 2.0 * B * H * D * T * (T + 1);
}

void BM_AttentionBf16Forward(benchmark::State& state) {
  if (skipped_without_bf16(state)) return;
  const int B = (int)state.range(0), H = (int)state.range(1);
  std::vector<float> qkv, y, z, lse;
  xsa::ops::AttentionArgs<float> args;
  attention_setup(B, H, state.range(2) == 1, qkv, y, z, lse, args);
  for (auto _ : state) xsa::ops::attention_forward(args, xsa::ops::Storage::bf16);
  state.counters["GFLOP"] = benchmark::Counter(attention_flops(B, H) * 1e-9 * state.iterations(),
                                               benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AttentionBf16Forward)->Apply(attention_shapes);

void BM_AttentionBf16Backward(benchmark::State& state) {
  if (skipped_without_bf16(state)) return;
  const int B = (int)state.range(0), H = (int)state.range(1);
  std::vector<float> qkv, y, z, lse;
  xsa::ops::AttentionArgs<float> args;
  attention_setup(B, H, state.range(2) == 1, qkv, y, z, lse, args);
  xsa::ops::attention_forward(args, xsa::ops::Storage::bf16);
  std::vector<float> dout = normal(y.size(), 1, 2), dqkv(qkv.size());
  // dqkv written, as a training step has it (no zeroing before).
  args.dqkv = dqkv.data(), args.write_dqkv = true, args.d_out = dout.data();
  for (auto _ : state) xsa::ops::attention_backward(args, xsa::ops::Storage::bf16);
  state.counters["GFLOP"] = benchmark::Counter(
      2 * attention_flops(B, H) * 1e-9 * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AttentionBf16Backward)->Apply(attention_shapes);

// A `gpt2` step's weight gradients (12 layers' four matrices and the head's two 512-row chunks,
// bf16 products): formed onto gradients zeroed first, as a step did before (arg 1), against
// written by the products themselves (arg 0), the head's second chunk accumulating in both. The
// 496 MB of gradients are cold at each product, as in a step.
// A `gpt2` layer's four weights (qkv, attention projection, fc, MLP projection), 12 layers, on a
// batch of 1024 rows; the head's products run on chunks of 512.
constexpr int kGpt2Rows = 1024, kGpt2C = 768, kGpt2Layers = 12, kGpt2HeadChunk = 512;
struct LayerWeight {
  int in, out;
};
constexpr LayerWeight kGpt2LayerWeights[] = {
    {kGpt2C, 3 * kGpt2C}, {kGpt2C, kGpt2C}, {kGpt2C, 4 * kGpt2C}, {4 * kGpt2C, kGpt2C}};

void BM_WeightGradientsGpt2(benchmark::State& state) {
  if (skipped_without_bf16(state)) return;
  const bool zero_then_accumulate = state.range(0) == 1;
  constexpr int N = kGpt2Rows, C = kGpt2C, L = kGpt2Layers, Vp = kPaddedVocab,
                kHead = kGpt2HeadChunk;
  size_t total = (size_t)Vp * C;
  for (const LayerWeight& sh : kGpt2LayerWeights) total += (size_t)L * sh.in * sh.out;
  std::vector<float> grads(total);
  std::vector<xsa::ops::bf16> dout((size_t)N * Vp), inp((size_t)N * 4 * C);
  xsa::ops::to_bf16(normal(dout.size(), 1e-3, 1).data(), dout.data(), dout.size());
  xsa::ops::to_bf16(normal(inp.size(), 1, 2).data(), inp.data(), inp.size());
  for (auto _ : state) {
    if (zero_then_accumulate) std::fill(grads.begin(), grads.end(), 0.0f);
    float* g = grads.data();
    for (int l = 0; l < L; l++)
      for (const LayerWeight& sh : kGpt2LayerWeights) {
        xsa::ops::matmul_backward_bf16(nullptr, g, dout.data(), inp.data(), nullptr,
                                       {N, sh.in, sh.out}, zero_then_accumulate);
        g += (size_t)sh.in * sh.out;
      }
    for (int chunk = 0; chunk < N / kHead; chunk++)
      xsa::ops::matmul_backward_bf16(nullptr, g, dout.data(), inp.data(), nullptr, {kHead, C, Vp},
                                     zero_then_accumulate || chunk > 0);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_WeightGradientsGpt2)->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond)->UseRealTime();

// All the bf16 products of a `gpt2` step (each layer's four weights and the head's two 512-row
// chunks, forward, input and weight gradients), as one block of columns per thread (arg 0, the
// default) or as one product on oneDNN's own threads (arg 1, before perf-log #30). The counter is
// the products' GFLOP/s.
void BM_ProductsGpt2(benchmark::State& state) {
  if (skipped_without_bf16(state)) return;
  xsa::ops::set_bf16_column_blocks(state.range(0) == 0);
  constexpr int N = kGpt2Rows, C = kGpt2C, Vp = kPaddedVocab, kHead = kGpt2HeadChunk;
  struct Shape {
    int rows, in, out, count;
  };
  std::vector<Shape> shapes;
  for (const LayerWeight& lw : kGpt2LayerWeights) shapes.push_back({N, lw.in, lw.out, kGpt2Layers});
  shapes.push_back({kHead, C, Vp, N / kHead});
  std::vector<xsa::ops::bf16> x((size_t)N * 4 * C), w((size_t)Vp * C), dout((size_t)kHead * Vp);
  xsa::ops::to_bf16(normal(x.size(), 1, 1).data(), x.data(), x.size());
  xsa::ops::to_bf16(normal(w.size(), 0.02, 2).data(), w.data(), w.size());
  xsa::ops::to_bf16(normal(dout.size(), 1e-3, 3).data(), dout.data(), dout.size());
  std::vector<float> out((size_t)kHead * Vp), dx((size_t)N * 4 * C), dw((size_t)Vp * C);
  double flops = 0;
  for (const Shape& sh : shapes) flops += 6.0 * sh.rows * sh.in * sh.out * sh.count;
  for (auto _ : state)
    for (const Shape& sh : shapes)
      for (int i = 0; i < sh.count; i++) {
        xsa::ops::matmul_forward_bf16(out.data(), x.data(), w.data(), sh.rows, sh.in, sh.out,
                                      false);
        xsa::ops::matmul_backward_bf16(dx.data(), dw.data(), dout.data(), x.data(), w.data(),
                                       {sh.rows, sh.in, sh.out}, i > 0);
      }
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * state.iterations() / 1e9, benchmark::Counter::kIsRate);
  xsa::ops::set_bf16_column_blocks(true);
}
BENCHMARK(BM_ProductsGpt2)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();

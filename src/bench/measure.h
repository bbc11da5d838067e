// What the tables of xsa bench share: the configurations, medians and ranges, a model's step
// timed, SA and XSA stepped in ABBA order, and the JSON/CSV records.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "xsa/backend/backend.h"
#include "xsa/bench/bench.h"
#include "xsa/model/gpt.h"
#include "xsa/model/model_config.h"
#include "xsa/train/step.h"

namespace xsa::bench {

using clock_type = std::chrono::steady_clock;
using nlohmann::json;

struct BenchShape {
  const char* name;
  int V, L, C, H, T, B;
  bool gpt2_architecture = false;  // --arch gpt2: learned positions and linear biases
};
inline constexpr BenchShape kShapes[] = {{"tiny", 256, 2, 64, 4, 64, 4},
                                         {"demo", 256, 4, 128, 4, 256, 16},
                                         {"small", 50304, 6, 384, 6, 256, 8},
                                         {"gpt2", 50304, 12, 768, 12, 256, 4}};

ModelConfig model_of(const BenchShape& s, AttnKind attn);
// The configurations --config names (Error when none).
std::vector<BenchShape> shapes_of(const std::string& config);

struct Stats {
  double median = 0, min = 0, max = 0;
};
Stats stats_of(std::vector<double> v);
double ms_since(clock_type::time_point t0);

// FLOPs of one training step, counted as 3× the forward's (the usual convention): the matrix
// products of every layer and of the tied head, and causal attention (q·k and p·v over the
// T(T+1)/2 visible pairs of each head).
double step_flops(const ModelConfig& cfg, int B, int T);
// FLOPs of `products` causal attention products over B sequences of T with C = heads × D (each
// over the T(T+1)/2 visible pairs of every head): 2 forward (q·kᵀ, p·v), 5 backward (the
// probabilities recomputed, dv, dp, dq, dk), as FlashAttention counts them.
double attention_flops(int B, int T, int C, int products);

// A model and its training step on a backend, timed step by step.
struct StepBench {
  Backend<float>& backend;
  Gpt<float> model;
  TrainStep trainer;
  int64_t step = 0;
  StepBench(const ModelConfig& cfg, int B, int T, Backend<float>& backend,
            const OptimizerSettings& optimizer = {});
  // forward + backward + clipping + AdamW: the training step itself (to its end on a device that
  // runs asynchronously)
  double time_step(const std::vector<int32_t>& inputs, const std::vector<int32_t>& targets);
};

// N random token ids and targets of the model's vocabulary (the same every call).
void random_batch(const ModelConfig& cfg, int N, std::vector<int32_t>& inputs,
                  std::vector<int32_t>& targets);

// SA's and XSA's steps timed in ABBA order (neither arm always runs first), with each pair's ratio;
// before_pair (when given) runs before each pair.
struct InterleavedTimes {
  std::vector<double> ms_sa, ms_xsa, ratio;
};
InterleavedTimes interleaved_steps(StepBench& sa, StepBench& xsa, int steps,
                                   const std::vector<int32_t>& inputs,
                                   const std::vector<int32_t>& targets,
                                   const std::function<void()>& before_pair = {});

// --json and --csv: every record, and every scalar field as a column.
void write_outputs(const BenchOptions& o, const json& records);

// The tables (cpu_tables.cpp, gpu_tables.cpp).
void bench_gemm(const std::vector<BenchShape>& shapes, bool bf16, const std::string& library_config,
                json& records);
void bench_steps(const std::vector<BenchShape>& shapes, int steps, int warmup, bool bf16,
                 double fma_peak, json& records);
void bench_attention(const BenchOptions& o, double fma_peak, json& records);
// --profile (profile.cpp): each kernel entry's time in a training step, with its roofline share.
void bench_profile(const BenchOptions& o, double fma_peak, json& records);
// The machine's memory bandwidth in GB/s (a triad on every thread), the streaming ops' roofline.
double memory_bandwidth_gbs();
void bench_decode(const std::vector<BenchShape>& shapes, int steps, json& records);
// --data (data_bench.cpp): tokenizer, prepare and loader rates against training's consumption.
void bench_data(const BenchOptions& o, int threads, json& records);
void run_gpu_bench(const BenchOptions& o, const std::vector<int>& attn_T);

}  // namespace xsa::bench

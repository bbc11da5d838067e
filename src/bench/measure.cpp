#include "xsa/bench/measure.h"

#include <algorithm>

#include "xsa/util/error.h"
#include "xsa/util/files.h"
#include "xsa/util/rng.h"

namespace xsa::bench {

ModelConfig model_of(const BenchShape& s, AttnKind attn) {
  ModelConfig cfg;
  cfg.tokenizer = s.V == 256 ? TokenizerKind::byte : TokenizerKind::gpt2;
  cfg.vocab_size = vocab_size_of(cfg.tokenizer);
  cfg.padded_vocab = s.V;
  cfg.n_layer = s.L, cfg.n_head = s.H, cfg.n_embd = s.C, cfg.seq_len = s.T;
  for (LayerAttention& a : cfg.attention) a.kind = attn;
  if (s.gpt2_architecture) set_architecture(cfg, "gpt2");
  return cfg;
}

Stats stats_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return {n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]), v.front(), v.back()};
}

double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

double attention_flops(int B, int T, int C, int products) {
  return products * 2.0 * B * C * (T * (T + 1.0) / 2);  // each a (visible pairs) × D per head
}

double step_flops(const ModelConfig& cfg, int B, int T) {
  const double N = (double)B * T, C = cfg.n_embd;
  const double matmul = 12.0 * C * C * cfg.n_layer + C * cfg.padded_vocab;
  const double attention = cfg.n_layer * attention_flops(B, T, cfg.n_embd, 2);  // per forward
  return 3.0 * (2.0 * N * matmul + attention);
}

StepBench::StepBench(const ModelConfig& cfg, int B, int T, Backend<float>& backend,
                     const OptimizerSettings& optimizer)
    : backend(backend), model(cfg, B, T, GptMode::training, backend), trainer(model, optimizer) {
  model.params().init(cfg, 1);
}

double StepBench::time_step(const std::vector<int32_t>& inputs,
                            const std::vector<int32_t>& targets) {
  auto t0 = clock_type::now();
  trainer.run(inputs.data(), targets.data(), 1e-4, ++step);
  backend.synchronize();
  return ms_since(t0);
}

void random_batch(const ModelConfig& cfg, int N, std::vector<int32_t>& inputs,
                  std::vector<int32_t>& targets) {
  inputs.resize(N), targets.resize(N);
  Rng rng(7);
  for (int i = 0; i < N; i++)
    inputs[i] = rng.next_u64() % cfg.vocab_size, targets[i] = rng.next_u64() % cfg.vocab_size;
}

InterleavedTimes interleaved_steps(StepBench& sa, StepBench& xsa, int steps,
                                   const std::vector<int32_t>& inputs,
                                   const std::vector<int32_t>& targets,
                                   const std::function<void()>& before_pair) {
  InterleavedTimes t;
  for (int i = 0; i < steps; i++) {
    if (before_pair) before_pair();
    if (i % 2 == 0) {
      t.ms_sa.push_back(sa.time_step(inputs, targets));
      t.ms_xsa.push_back(xsa.time_step(inputs, targets));
    } else {
      t.ms_xsa.push_back(xsa.time_step(inputs, targets));
      t.ms_sa.push_back(sa.time_step(inputs, targets));
    }
    t.ratio.push_back(t.ms_xsa.back() / t.ms_sa.back());
  }
  return t;
}

std::vector<BenchShape> shapes_of(const std::string& config) {
  std::vector<BenchShape> shapes;
  for (const BenchShape& s : kShapes)
    if (config == "all" || config == s.name) shapes.push_back(s);
  if (shapes.empty())
    fail("--model {} is not known (expected tiny, demo, small, gpt2 or all)", config);
  return shapes;
}

void write_outputs(const BenchOptions& o, const json& records) {
  if (!o.json_path.empty()) write_file_atomic(o.json_path, records.dump(2) + "\n");
  if (o.csv_path.empty()) return;
  std::vector<std::string> columns;
  for (const auto& r : records)
    for (auto& [k, v] : r.items())
      if (!v.is_structured() && std::find(columns.begin(), columns.end(), k) == columns.end())
        columns.push_back(k);
  std::string csv;
  for (size_t i = 0; i < columns.size(); i++) csv += (i ? "," : "") + columns[i];
  csv += "\n";
  for (const auto& r : records) {
    for (size_t i = 0; i < columns.size(); i++) {
      if (i) csv += ",";
      if (r.contains(columns[i]))
        csv += r[columns[i]].is_string() ? r[columns[i]].get<std::string>() : r[columns[i]].dump();
    }
    csv += "\n";
  }
  write_file_atomic(o.csv_path, csv);
}

}  // namespace xsa::bench

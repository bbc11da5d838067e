// xsa bench: training-step speed of the docs/SPEC.md §4 configurations (SA and XSA, interleaved
// in one process), the GEMM ceiling on the same shapes, attention alone up to T = 8192, the effect
// of the BLAS kernel choice, and decoding with the key/value cache against recomputing the whole
// sequence. Markdown on stdout; --json / --csv for scripts.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "xsa/backend/device.h"
#include "xsa/dist/agree.h"
#include "xsa/model/decoder.h"
#include "xsa/model/gpt.h"
#include "xsa/ops/matmul_bf16.h"
#include "xsa/ops/ops.h"
#include "xsa/tools/commands.h"
#include "xsa/train/step.h"
#include "xsa/util/blas.h"
#include "xsa/util/cpu.h"
#include "xsa/util/error.h"
#include "xsa/util/files.h"
#include "xsa/util/memory.h"
#include "xsa/util/rng.h"
#include "xsa/util/threads.h"

namespace xsa::cli {
namespace {

using clock_type = std::chrono::steady_clock;
using nlohmann::json;

struct BenchShape {
  const char* name;
  int V, L, C, H, T, B;
  bool gpt2_architecture = false;  // --arch gpt2: learned positions and linear biases
};
constexpr BenchShape kShapes[] = {{"tiny", 256, 2, 64, 4, 64, 4},
                                  {"small", 50304, 6, 384, 6, 256, 8},
                                  {"gpt2", 50304, 12, 768, 12, 256, 4}};

ModelConfig model_of(const BenchShape& s, AttnKind attn) {
  ModelConfig cfg;
  cfg.tokenizer = s.V == 256 ? TokenizerKind::byte : TokenizerKind::gpt2;
  cfg.vocab_size = vocab_size_of(cfg.tokenizer);
  cfg.padded_vocab = s.V;
  cfg.n_layer = s.L, cfg.n_head = s.H, cfg.n_embd = s.C, cfg.seq_len = s.T;
  for (auto& a : cfg.layer_attn) a = attn;
  if (s.gpt2_architecture) set_architecture(cfg, "gpt2");
  return cfg;
}

struct Stats {
  double median = 0, min = 0, max = 0;
};
Stats stats_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return {n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]), v.front(), v.back()};
}

double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

// FLOPs of one training step, counted as 3× the forward's (the usual convention): the matrix
// products of every layer and of the tied head, and causal attention (q·k and p·v over the
// T(T+1)/2 visible pairs of each head).
double step_flops(const ModelConfig& cfg, int B, int T) {
  const double N = (double)B * T, C = cfg.n_embd;
  const double matmul = 12.0 * C * C * cfg.n_layer + C * cfg.padded_vocab;
  const double attention = 2.0 * B * cfg.n_layer * C * T * (T + 1.0);  // per forward, all heads
  return 3.0 * (2.0 * N * matmul + attention);
}

struct StepBench {
  Backend<float>& backend;
  Gpt<float> model;
  TrainStep trainer;
  int64_t step = 0;
  StepBench(const ModelConfig& cfg, int B, int T, Backend<float>& backend = cpu_backend<float>())
      : backend(backend), model(cfg, B, T, GptMode::training, backend), trainer(model) {
    model.params().init(cfg, 1);
  }
  // forward + backward + clipping + AdamW: the training step itself (to its end on a device that
  // runs asynchronously)
  double time_step(const std::vector<int32_t>& inputs, const std::vector<int32_t>& targets) {
    auto t0 = clock_type::now();
    trainer.run(inputs.data(), targets.data(), 1e-4, ++step);
    backend.synchronize();
    return ms_since(t0);
  }
};

// N random token ids and targets of the model's vocabulary (the same every call).
void random_batch(const ModelConfig& cfg, int N, std::vector<int32_t>& inputs,
                  std::vector<int32_t>& targets) {
  inputs.resize(N), targets.resize(N);
  Rng rng(7);
  for (int i = 0; i < N; i++)
    inputs[i] = rng.next_u64() % cfg.vocab_size, targets[i] = rng.next_u64() % cfg.vocab_size;
}

// SA's and XSA's steps timed in ABBA order (neither arm always runs first), with each pair's ratio;
// before_pair (when given) runs before each pair.
void interleaved_steps(StepBench& sa, StepBench& xsa, int steps, const std::vector<int32_t>& inputs,
                       const std::vector<int32_t>& targets, std::vector<double>& ms_sa,
                       std::vector<double>& ms_xsa, std::vector<double>& ratio,
                       const std::function<void()>& before_pair = {}) {
  for (int i = 0; i < steps; i++) {
    if (before_pair) before_pair();
    if (i % 2 == 0) {
      ms_sa.push_back(sa.time_step(inputs, targets));
      ms_xsa.push_back(xsa.time_step(inputs, targets));
    } else {
      ms_xsa.push_back(xsa.time_step(inputs, targets));
      ms_sa.push_back(sa.time_step(inputs, targets));
    }
    ratio.push_back(ms_xsa.back() / ms_sa.back());
  }
}

// The matrix products of one training step, each timed alone on its real shape; the ceiling is
// their FLOPs over their summed time: what the step would reach if nothing else took time.
struct GemmCeiling {
  double gflops = 0, seconds = 0, flops = 0;
  // The slowest and the fastest round's rate (every product timed once per round): how far the
  // machine's speed moved while the ceiling was timed.
  double round_min_gflops = 0, round_max_gflops = 0;
  json rows = json::array();
};

// The step's products with their inputs made once (bf16: the products of --precision bf16, their
// inputs converted beforehand, not timed). A round times each product once, forward and backward;
// the step table runs one round before each pair of steps, so that the ceiling and the steps see
// the same machine (on a shared machine its speed drifts by a fifth within minutes).
class GemmProducts {
 public:
  GemmProducts(const ModelConfig& cfg, int B, int T, bool bf16) : bf16_(bf16) {
    const int N = B * T, C = cfg.n_embd, Vp = cfg.padded_vocab;
    const int head_rows = Gpt<float>::head_chunk_rows(cfg, N);
    // As a step of one micro-batch forms them: the layers' weight gradients and the head's first
    // chunk's overwrite theirs, the head's further chunks accumulate onto it.
    const auto add = [&](const char* name, int rows, int in, int out, int count, bool accumulate) {
      Op& op = ops_.emplace_back();
      op.name = name, op.rows = rows, op.in = in, op.out = out, op.count = count;
      op.accumulate = accumulate;
    };
    add("qkv", N, C, 3 * C, cfg.n_layer, false);
    add("attn_proj", N, C, C, cfg.n_layer, false);
    add("fc", N, C, 4 * C, cfg.n_layer, false);
    add("mlp_proj", N, 4 * C, C, cfg.n_layer, false);
    add("head", head_rows, C, Vp, 1, false);
    if (N / head_rows > 1) add("head, further chunks", head_rows, C, Vp, N / head_rows - 1, true);
    if (N % head_rows) add("head_tail", N % head_rows, C, Vp, 1, true);
    Rng rng(3);
    for (Op& op : ops_) {
      op.x = AlignedBuffer<float>((size_t)op.rows * op.in);
      op.w = AlignedBuffer<float>((size_t)op.out * op.in);
      op.y = AlignedBuffer<float>((size_t)op.rows * op.out);
      op.dx = AlignedBuffer<float>((size_t)op.rows * op.in);
      op.dw = AlignedBuffer<float>((size_t)op.out * op.in);
      for (size_t i = 0; i < op.x.size(); i++) op.x[i] = (float)rng.normal();
      for (size_t i = 0; i < op.w.size(); i++) op.w[i] = 0.02f * (float)rng.normal();
      if (bf16) {
        op.xb.resize(op.x.size()), op.wb.resize(op.w.size()), op.yb.resize(op.y.size());
        ops::to_bf16(op.x.data(), op.xb.data(), op.x.size());
        ops::to_bf16(op.w.data(), op.wb.data(), op.w.size());
        ops::to_bf16(op.x.data(), op.yb.data(), std::min(op.x.size(), op.y.size()));  // any will do
      }
    }
  }

  // One timing of each product, right after an untimed run of it (as a product runs in a step,
  // its operands just written).
  void time_round() {
    for (Op& op : ops_) {
      forward(op);
      auto t0 = clock_type::now();
      forward(op);
      op.fwd_ms.push_back(ms_since(t0));
      backward(op);
      t0 = clock_type::now();
      backward(op);
      op.bwd_ms.push_back(ms_since(t0));
    }
  }

  // The ceiling from each product's median timing over the rounds so far.
  GemmCeiling ceiling() const {
    GemmCeiling g;
    // A product's share of the step's product time, in seconds, at the given timings of it.
    const auto seconds_of = [](const Op& op, double fwd_ms, double bwd_ms) {
      return op.count * (fwd_ms + bwd_ms) / 1000.0;
    };
    for (const Op& op : ops_) {
      const double f = 2.0 * op.rows * op.in * op.out;  // one product
      g.flops += op.count * 3 * f;
      const double fwd_ms = stats_of(op.fwd_ms).median, bwd_ms = stats_of(op.bwd_ms).median;
      g.seconds += seconds_of(op, fwd_ms, bwd_ms);
      g.rows.push_back({{"op", op.name},
                        {"rows", op.rows},
                        {"in", op.in},
                        {"out", op.out},
                        {"count", op.count},
                        {"fwd_gflops", f / fwd_ms / 1e6},
                        {"bwd_gflops", 2 * f / bwd_ms / 1e6}});
    }
    g.gflops = g.flops / g.seconds / 1e9;
    const size_t rounds = ops_.empty() ? 0 : ops_.front().fwd_ms.size();
    for (size_t r = 0; r < rounds; r++) {
      double seconds = 0;
      for (const Op& op : ops_) seconds += seconds_of(op, op.fwd_ms[r], op.bwd_ms[r]);
      const double rate = g.flops / seconds / 1e9;
      g.round_min_gflops = r ? std::min(g.round_min_gflops, rate) : rate;
      g.round_max_gflops = r ? std::max(g.round_max_gflops, rate) : rate;
    }
    return g;
  }

 private:
  struct Op;
  void forward(Op& op) {
    if (bf16_)
      ops::matmul_forward_bf16(op.y.data(), op.xb.data(), op.wb.data(), op.rows, op.in, op.out,
                               false);
    else
      ops::matmul_forward(op.y.data(), op.x.data(), op.w.data(), op.rows, op.in, op.out);
  }
  void backward(Op& op) {
    if (bf16_)
      ops::matmul_backward_bf16(op.dx.data(), op.dw.data(), op.yb.data(), op.xb.data(),
                                op.wb.data(), op.rows, op.in, op.out, op.accumulate);
    else
      ops::matmul_backward(op.dx.data(), op.dw.data(), op.y.data(), op.x.data(), op.w.data(),
                           op.rows, op.in, op.out, op.accumulate);
  }
  struct Op {
    std::string name;
    int rows = 0, in = 0, out = 0, count = 0;
    bool accumulate = true;  // the weight gradient onto what is there
    AlignedBuffer<float> x, w, y, dx, dw;
    std::vector<ops::bf16> xb, wb, yb;
    std::vector<double> fwd_ms, bwd_ms;
  };
  bool bf16_;
  std::vector<Op> ops_;
};

// The ceiling alone: the median of `reps` timings per product.
GemmCeiling gemm_ceiling(const ModelConfig& cfg, int B, int T, int reps, bool bf16 = false) {
  GemmProducts products(cfg, B, T, bf16);
  for (int r = 0; r < reps; r++) products.time_round();
  return products.ceiling();
}

// Decoding at the end of a full context: `tokens` new tokens after a prompt that brings the cache
// to T − tokens, one incremental forward each, against recomputing the whole T-token sequence for
// one new token (the last row's logits only, as nanoGPT's generate; or every row's, as llm.c's
// sampling loop).
struct DecodeTimes {
  std::vector<double> cached, prompt, recompute, recompute_all;
};
struct DecodeArm {
  Gpt<float> full;
  Decoder<float> decoder;
  DecodeTimes times;
  DecodeArm(const ModelConfig& cfg)
      : full(cfg, 1, cfg.seq_len, GptMode::inference),
        decoder(cfg, (full.params().init(cfg, 1), full.params().w), cfg.seq_len) {}

  void run(const std::vector<int32_t>& seq, const std::vector<int32_t>& targets, int tokens,
           bool keep) {
    const int T = (int)seq.size();
    std::vector<int32_t> none(T, -1);
    std::vector<float> logits(full.config().padded_vocab);
    decoder.truncate(0);
    auto t0 = clock_type::now();
    decoder.append(seq.data(), T - tokens);
    if (keep) times.prompt.push_back(ms_since(t0));
    for (int i = T - tokens; i < T; i++) {
      t0 = clock_type::now();
      decoder.append(&seq[i], 1);
      if (keep) times.cached.push_back(ms_since(t0));
    }
    t0 = clock_type::now();
    full.forward(seq.data(), none.data());
    full.logits_row(T - 1, logits.data());
    if (keep) times.recompute.push_back(ms_since(t0));
    t0 = clock_type::now();
    full.forward(seq.data(), targets.data());  // every row's logits, through the loss
    if (keep) times.recompute_all.push_back(ms_since(t0));
  }
};

struct Options {
  std::string config = "all", json_path, csv_path, precision = "fp32", arch = "xsa", device = "cpu";
  int steps = 5, warmup = 2, threads = 0, batch = 0, seq_len = 0;
  bool tf32 = false, deterministic = false, attn_T_given = false;
  std::vector<int> attn_T = {256, 1024, 4096, 8192};
  bool gemm = false, no_steps = false, no_attention = false, decode = false, allreduce = false;
};

void write_outputs(const Options& o, const json& records) {
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

// The GEMM ceiling of `small` as another process measures it with other BLAS kernels: to show what
// the kernel choice is worth. Returns NaN if the child fails.
double gemm_in_child(const std::string& env) {
  std::error_code ec;
  const std::string self =
      std::filesystem::read_symlink("/proc/self/exe", ec).string();  // not the shell's
  std::string cmd = env + " '" + self + "' bench --gemm-child 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return NAN;
  char buf[256] = {};
  std::string out;
  while (fgets(buf, sizeof buf, p)) out += buf;
  pclose(p);
  return out.empty() ? NAN : std::atof(out.c_str());
}

// The configurations --config names.
std::vector<BenchShape> shapes_of(const std::string& config) {
  std::vector<BenchShape> shapes;
  for (const BenchShape& s : kShapes)
    if (config == "all" || config == s.name) shapes.push_back(s);
  if (shapes.empty()) fail("--config {} is not known (expected tiny, small, gpt2 or all)", config);
  return shapes;
}

// The `small` ceiling as xsa runs, against OpenBLAS's own kernel detection and its generic
// fallback (each measured in a child process, where the other kernels can be chosen).
void bench_kernel_choice(json& records) {
  const double used =
      gemm_ceiling(model_of(kShapes[1], AttnKind::sa), kShapes[1].B, kShapes[1].T, 3).gflops;
  // The library: oneDNN's matmul against the BLAS's sgemm, each in a child process.
  const double onednn = gemm_in_child("XSA_GEMM=onednn");
  const double blas = gemm_in_child("XSA_GEMM=blas");
  std::printf(
      "\nLibrary choice, `small` ceiling: %.1f GFLOP/s as xsa runs; %.1f with oneDNN's matmul "
      "(XSA_GEMM=onednn), %.1f with the BLAS's sgemm (XSA_GEMM=blas): oneDNN/BLAS %.3f.\n",
      used, onednn, blas, onednn / blas);
  records.push_back(
      {{"kind", "ratio"}, {"what", "gemm_small_onednn_over_blas"}, {"value", onednn / blas}});
  // OpenBLAS's kernels, in the BLAS's products.
  const double own = gemm_in_child(
      "env -u OPENBLAS_CORETYPE -u XSA_BLAS_CORRECTED_FROM XSA_KEEP_BLAS_CORE=1 XSA_GEMM=blas");
  const double generic =
      gemm_in_child("env -u XSA_BLAS_CORRECTED_FROM OPENBLAS_CORETYPE=Prescott XSA_GEMM=blas");
  std::printf(
      "OpenBLAS's kernel choice, `small` ceiling with the BLAS: %.1f GFLOP/s as xsa runs it (%s); "
      "%.1f with OpenBLAS's own detection; %.1f with its generic fallback (Prescott), what an "
      "unrecognised CPU gets.\n",
      blas, blas_core().c_str(), own, generic);
  records.push_back(
      {{"kind", "ratio"}, {"what", "gemm_small_in_use_over_generic"}, {"value", blas / generic}});
}

// Each product's speed on the model's shapes, in the precision of the step table: OpenBLAS's
// sgemm, or (bf16) oneDNN's products as the bf16 backend runs them.
void bench_gemm(const std::vector<BenchShape>& shapes, bool bf16, json& records) {
  std::printf("\n## GEMM ceiling on the model's shapes (%s)\n\n",
              bf16 ? "oneDNN, bf16 inputs, fp32 accumulation"
              : ops::fp32_product_library() == ops::ProductLibrary::onednn ? "oneDNN matmul, fp32"
                                                                           : "BLAS sgemm");
  for (const BenchShape& s : shapes) {
    GemmCeiling g = gemm_ceiling(model_of(s, AttnKind::sa), s.B, s.T, 3, bf16);
    std::printf(
        "%s: %.1f GFLOP/s over a step's products\n\n| op | rows × in → out | per step | fwd "
        "GFLOP/s | bwd GFLOP/s |\n|---|---|---|---|---|\n",
        s.name, g.gflops);
    for (const auto& r : g.rows)
      std::printf("| %s | %d × %d → %d | %d | %.1f | %.1f |\n", r["op"].get<std::string>().c_str(),
                  r["rows"].get<int>(), r["in"].get<int>(), r["out"].get<int>(),
                  r["count"].get<int>(), r["fwd_gflops"].get<double>(),
                  r["bwd_gflops"].get<double>());
    records.push_back({{"kind", "gemm"},
                       {"config", s.name},
                       {"gemm_ceiling_gflops", g.gflops},
                       {"ops", g.rows},
                       {"precision", bf16 ? "bf16" : "fp32"},
                       {"blas_core", blas_core()}});
  }
  if (!bf16) bench_kernel_choice(records);  // the fp32 products' library and kernels
}

// Peak memory of each arm alone (a fresh model, two steps): SA, then XSA.
std::array<double, 2> step_peak_mb(const ModelConfig& sa, const ModelConfig& xsa_cfg, int B, int T,
                                   const std::vector<int32_t>& inputs,
                                   const std::vector<int32_t>& targets, Backend<float>& backend) {
  std::array<double, 2> peak;
  for (int k = 0; k < 2; k++) {
    reset_peak_rss();
    StepBench b(k ? xsa_cfg : sa, B, T, backend);
    b.time_step(inputs, targets);
    b.time_step(inputs, targets);
    peak[k] = peak_rss_mb();
  }
  return peak;
}

// One configuration's rows of the training-step table: SA, XSA and their ratio; a line for `notes`
// when the machine's speed moved during the run.
void bench_step_config(const BenchShape& s, int steps, int warmup, bool bf16, double fma_peak,
                       json& records, std::vector<std::string>& notes) {
  const ModelConfig sa = model_of(s, AttnKind::sa), xsa_cfg = model_of(s, AttnKind::xsa);
  const int N = s.B * s.T;
  std::vector<int32_t> inputs, targets;
  random_batch(sa, N, inputs, targets);
  Backend<float>& backend = bf16 ? cpu_bf16_backend() : cpu_backend<float>();
  const std::array<double, 2> peak = step_peak_mb(sa, xsa_cfg, s.B, s.T, inputs, targets, backend);
  // The ceiling is timed in rounds between the pairs of steps, so that it and the steps see the
  // same machine: timed minutes apart, the share moved by ±5 points on this shared VM.
  GemmProducts products(sa, s.B, s.T, bf16);
  StepBench a(sa, s.B, s.T, backend), x(xsa_cfg, s.B, s.T, backend);
  for (int i = 0; i < warmup; i++) a.time_step(inputs, targets), x.time_step(inputs, targets);
  std::vector<double> ms_sa, ms_xsa, ratio;
  interleaved_steps(a, x, steps, inputs, targets, ms_sa, ms_xsa, ratio,
                    [&] { products.time_round(); });
  const GemmCeiling ceiling = products.ceiling();
  const double flops = step_flops(sa, s.B, s.T);
  for (int k = 0; k < 2; k++) {
    Stats st = stats_of(k ? ms_xsa : ms_sa);
    double gflops = flops / st.median / 1e6;
    // Against the ceiling of each product's median timing (one disturbed timing in a round
    // would make a round-by-round share read high).
    const double share = gflops / ceiling.gflops;
    std::printf("| %s | %s | %.1f | %.1f–%.1f | %.0f | %.1f | %.0f%% | %.0f%% | %.0f |\n", s.name,
                k ? "xsa" : "sa", st.median, st.min, st.max, N / (st.median / 1000), gflops,
                100 * share, 100 * gflops / fma_peak, peak[k]);
    records.push_back({{"kind", "step"},
                       {"config", s.name},
                       {"attn", k ? "xsa" : "sa"},
                       {"ms_median", st.median},
                       {"ms_min", st.min},
                       {"ms_max", st.max},
                       {"tokens_per_s", N / (st.median / 1000)},
                       {"gflops", gflops},
                       {"gemm_ceiling_gflops", ceiling.gflops},
                       {"gemm_ceiling_round_min_gflops", ceiling.round_min_gflops},
                       {"gemm_ceiling_round_max_gflops", ceiling.round_max_gflops},
                       {"share_of_ceiling", share},
                       {"share_of_fma_peak", gflops / fma_peak},
                       {"precision", bf16 ? "bf16" : "fp32"},
                       {"arch", architecture_name(sa)},
                       {"peak_mb", peak[k]}});
  }
  Stats r = stats_of(ratio);
  std::printf("| %s | XSA/SA | %.3f | %.3f–%.3f | | | %s GEMM ceiling %.1f GFLOP/s | | |\n", s.name,
              r.median, r.min, r.max, bf16 ? "bf16" : "fp32", ceiling.gflops);
  // On a shared machine the speed drifts; past a tenth between the ceiling's rounds, the shares
  // above are uncertain by about as much, and the reader should know.
  if (ceiling.round_min_gflops > 0 && ceiling.round_max_gflops > 1.1 * ceiling.round_min_gflops)
    notes.push_back(fmt::format(
        "`{}`: the ceiling's rounds ranged over {:.3g}–{:.3g} GFLOP/s: the machine's speed moved "
        "by {:.0f} % during the run, so its shares of the ceiling are uncertain by about as much.",
        s.name, ceiling.round_min_gflops, ceiling.round_max_gflops,
        100 * (ceiling.round_max_gflops / ceiling.round_min_gflops - 1)));
  records.push_back({{"kind", "ratio"},
                     {"what", std::string("step_xsa_over_sa_") + s.name},
                     {"value", r.median}});
}

void bench_steps(const std::vector<BenchShape>& shapes, int steps, int warmup, bool bf16,
                 double fma_peak, json& records) {
  std::printf(
      "\n## Training step (forward + backward + AdamW), median of %d after %d warm-up; SA and "
      "XSA interleaved\n\n| config | attn | ms median | ms min–max | tokens/s | GFLOP/s | of GEMM "
      "ceiling | of FMA peak | peak MB |\n|---|---|---|---|---|---|---|---|---|\n",
      steps, warmup);
  std::vector<std::string> notes;
  for (const BenchShape& s : shapes)
    bench_step_config(s, steps, warmup, bf16, fma_peak, records, notes);
  for (const std::string& note : notes) std::printf("\nNote: %s\n", note.c_str());
}

// The attention-alone table's layer at sequence length T: one sequence, 8 heads of 64, random
// inputs and output gradients.
struct AttentionBench {
  static constexpr int B = 1, H = 8, D = 64, C = H * D;
  int T;
  AlignedBuffer<float> qkv, y, z, lse, dqkv, dout, grad;
  explicit AttentionBench(int T)
      : T(T),
        qkv((size_t)B * T * 3 * C),
        y((size_t)B * T * C),
        z((size_t)B * T * C),
        lse((size_t)B * H * T),
        dqkv((size_t)B * T * 3 * C),
        dout((size_t)B * T * C),
        grad((size_t)B * T * C) {
    Rng rng(5);
    for (size_t i = 0; i < qkv.size(); i++) qkv[i] = (float)rng.normal();
    for (size_t i = 0; i < grad.size(); i++) grad[i] = (float)rng.normal();
  }
  // One forward (and backward) pass; returns its milliseconds.
  double run(bool exclusive, bool backward) {
    auto t0 = clock_type::now();
    ops::AttentionArgs<float> args;
    args.B = B, args.T = T, args.C = C, args.H = H, args.exclusive = exclusive;
    args.qkv = qkv.data(), args.y = y.data(), args.z = z.data(), args.lse = lse.data();
    ops::attention_forward(args);
    if (backward) {
      std::copy(grad.data(), grad.data() + grad.size(), dout.data());
      dqkv.zero();
      args.dqkv = dqkv.data(), args.d_out = dout.data();
      ops::attention_backward(args);
    }
    return ms_since(t0);
  }
};

// One row of the attention-alone table: SA and XSA on one pass, interleaved.
void bench_attention_pass(AttentionBench& bench, bool backward, json& records) {
  const int T = bench.T;
  const int reps = T >= 8192 ? 5 : T >= 4096 ? 9 : 21;
  std::vector<double> ms[2], ratio;
  double extra[2] = {0, 0};
  for (int r = 0; r <= reps; r++) {  // r = 0: warm-up, and the memory measurement
    for (int kk = 0; kk < 2; kk++) {
      const int k = r % 2 ? 1 - kk : kk;  // ABBA order: neither arm always runs first
      const double before = rss_mb();
      reset_peak_rss();
      double t = bench.run(k == 1, backward);
      if (r == 0)
        extra[k] = std::max(0.0, peak_rss_mb() - before);
      else
        ms[k].push_back(t);
    }
    if (r) ratio.push_back(ms[1].back() / ms[0].back());
  }
  const char* pass = backward ? "fwdbwd" : "fwd";
  Stats rs = stats_of(ratio);
  std::printf("| %d | %s | %.2f | %.2f | %.3f | %.1f | %.1f |\n", T, pass, stats_of(ms[0]).median,
              stats_of(ms[1]).median, rs.median, extra[0], extra[1]);
  for (int k = 0; k < 2; k++)
    records.push_back({{"kind", "attention"},
                       {"T", T},
                       {"pass", pass},
                       {"attn", k ? "xsa" : "sa"},
                       {"ms_median", stats_of(ms[k]).median},
                       {"extra_mb", extra[k]}});
  records.push_back({{"kind", "ratio"},
                     {"what", fmt::format("attention_{}_T{}_xsa_over_sa", pass, T)},
                     {"value", rs.median}});
}

void bench_attention(const std::vector<int>& attn_T, json& records) {
  std::printf(
      "\n## Attention alone (B %d, H %d, D %d, causal), median ms; extra MB = peak resident "
      "memory "
      "above inputs and outputs\n\n| T | pass | SA ms | XSA ms | XSA/SA | SA extra MB | XSA "
      "extra MB |\n"
      "|---|---|---|---|---|---|---|\n",
      AttentionBench::B, AttentionBench::H, AttentionBench::D);
  for (int T : attn_T) {
    AttentionBench bench(T);
    for (bool backward : {false, true}) bench_attention_pass(bench, backward, records);
  }
}

// One configuration's rows of the decoding table: SA, XSA and their ratio per cached token.
void bench_decode_config(const BenchShape& s, int tokens, int reps, json& records) {
  const int T = s.T, n = std::min(tokens, T - 1);
  DecodeArm arms[2] = {DecodeArm(model_of(s, AttnKind::sa)), DecodeArm(model_of(s, AttnKind::xsa))};
  std::vector<int32_t> seq(T), targets(T);
  Rng rng(9);
  for (int i = 0; i < T; i++)
    seq[i] = rng.next_u64() % arms[0].full.config().vocab_size,
    targets[i] = rng.next_u64() % arms[0].full.config().vocab_size;
  for (int r = 0; r <= reps; r++)  // r = 0: warm-up; ABBA order
    for (int kk = 0; kk < 2; kk++) arms[r % 2 ? 1 - kk : kk].run(seq, targets, n, r > 0);
  std::vector<double> ratio;
  for (size_t i = 0; i < arms[0].times.cached.size(); i++)
    ratio.push_back(arms[1].times.cached[i] / arms[0].times.cached[i]);
  for (int k = 0; k < 2; k++) {
    const DecodeTimes& d = arms[k].times;
    const double cached = stats_of(d.cached).median, prompt = stats_of(d.prompt).median,
                 recompute = stats_of(d.recompute).median,
                 recompute_all = stats_of(d.recompute_all).median;
    std::printf("| %s | %s | %.1f | %.2f | %.0f | %.1f | %.1f× | %.1f | %.1f× |\n", s.name,
                k ? "xsa" : "sa", prompt, cached, 1000 / cached, recompute, recompute / cached,
                recompute_all, recompute_all / cached);
    records.push_back({{"kind", "decode"},
                       {"config", s.name},
                       {"attn", k ? "xsa" : "sa"},
                       {"context", T},
                       {"prompt_ms", prompt},
                       {"cached_ms_per_token", cached},
                       {"tokens_per_s", 1000 / cached},
                       {"recompute_ms", recompute},
                       {"recompute_all_logits_ms", recompute_all},
                       {"speedup", recompute / cached},
                       {"speedup_all_logits", recompute_all / cached}});
  }
  const double r = stats_of(ratio).median;
  std::printf("| %s | XSA/SA | | %.3f | | | | | |\n", s.name, r);
  records.push_back(
      {{"kind", "ratio"}, {"what", std::string("decode_xsa_over_sa_") + s.name}, {"value", r}});
}

void bench_decode(const std::vector<BenchShape>& shapes, int steps, json& records) {
  const int tokens = 32, reps = std::max(3, steps);  // per-token times: reps × 32 of them
  std::printf(
      "\n## Decoding with the key/value cache (batch 1), context T: %d new tokens after T − %d, "
      "median ms per token; recompute = one full forward of all T tokens for the next token "
      "(last row's logits / every row's)\n\n| config | attn | prompt ms | cached ms/token | "
      "tokens/s | recompute ms | speed-up | recompute, all logits, ms | speed-up |\n"
      "|---|---|---|---|---|---|---|---|---|\n",
      tokens, tokens);
  for (const BenchShape& s : shapes) bench_decode_config(s, tokens, reps, records);
}

// The gradient sum of a data-parallel step (Comm::all_reduce: reduce-scatter, then all-gather)
// over the ranks of this job, for buffers from 1 MB to the `gpt2` model's gradients. Times are the
// slowest rank's; bus bandwidth counts the 2(W−1)/W of the buffer each rank sends (as nccl-tests
// does), so it compares across rank counts.
void bench_allreduce(int reps, json& records) {
  Comm& comm = world_comm();
  const int W = comm.size();
  std::vector<std::pair<std::string, size_t>> sizes;
  for (size_t mb : {1, 4, 16, 64, 256}) sizes.push_back({fmt::format("{} MiB", mb), mb << 18});
  for (const BenchShape& s : kShapes)
    if (s.V > 256)
      sizes.push_back({fmt::format("{} gradients", s.name),
                       param_arena_size(param_layout(model_of(s, AttnKind::sa)))});
  std::sort(sizes.begin(), sizes.end(), [](auto& a, auto& b) { return a.second < b.second; });
  if (comm.is_root())
    std::printf(
        "\n## Gradient sum over %d process%s (reduce-scatter + all-gather, rank order), median of "
        "%d\n\n| buffer | MB | ms | algorithm GB/s | bus GB/s |\n|---|---|---|---|---|\n",
        W, W == 1 ? "" : "es", reps);
  for (const auto& [label, n] : sizes) {
    std::vector<float> buf(n, 1.0f + comm.rank());
    std::vector<double> ms;
    for (int r = 0; r <= reps; r++) {
      comm.sum(0.0);  // line the ranks up
      const auto t0 = clock_type::now();
      comm.all_reduce(buf.data(), n);
      std::vector<double> each(W, 0.0);
      each[comm.rank()] = ms_since(t0);
      comm.all_reduce(each.data(), each.size());
      if (r > 0) ms.push_back(*std::max_element(each.begin(), each.end()));  // r 0: warm-up
    }
    const double med = stats_of(ms).median, bytes = n * 4.0;
    const double algbw = bytes / (med / 1000) / 1e9, busbw = algbw * 2.0 * (W - 1) / W;
    if (comm.is_root())
      std::printf("| %s | %.1f | %.2f | %.2f | %.2f |\n", label.c_str(), bytes / 1e6, med, algbw,
                  busbw);
    records.push_back({{"kind", "allreduce"},
                       {"buffer", label},
                       {"ranks", W},
                       {"bytes", bytes},
                       {"ms", med},
                       {"algbw_gbs", algbw},
                       {"busbw_gbs", busbw}});
  }
}

// ---- --device cuda: the step and attention tables on a GPU, against its bf16 dense peak ----

// Device memory in use (the context, cuBLAS and every buffer), in GB.
double device_used_gb(Backend<float>& backend) {
  size_t free_bytes = 0, total = 0;
  backend.synchronize();
  if (!backend.memory_info(&free_bytes, &total)) return 0;
  return (double)(total - free_bytes) / 1e9;
}

// The shapes on a GPU: gpt2 at its own context (T = 1024) unless --seq-len says otherwise, and a
// batch that fills the GPU (32 768 tokens per step unless --batch).
BenchShape gpu_shape(BenchShape s, const Options& o) {
  if (o.seq_len > 0)
    s.T = o.seq_len;
  else if (std::string(s.name) == "gpt2")
    s.T = 1024;
  s.B = o.batch > 0 ? o.batch : std::max(s.B, 32768 / s.T);
  return s;
}

void bench_gpu_steps(Backend<float>& backend, const Options& o, json& records) {
  const double peak = backend.peak_bf16_flops();
  std::printf(
      "\n## Training step on the GPU (forward + backward + AdamW), median of %d after %d "
      "warm-up; SA and XSA interleaved; MFU against the bf16 dense peak (%.0f TFLOP/s)\n\n| "
      "config | attn | B × T | ms median | ms min–max | tokens/s | TFLOP/s | MFU | device GB "
      "|\n|---|---|---|---|---|---|---|---|---|\n",
      o.steps, o.warmup, peak / 1e12);
  for (BenchShape s : shapes_of(o.config)) {
    s.gpt2_architecture = o.arch == "gpt2";
    s = gpu_shape(s, o);
    const ModelConfig sa = model_of(s, AttnKind::sa), xsa_cfg = model_of(s, AttnKind::xsa);
    const int N = s.B * s.T;
    std::vector<int32_t> inputs, targets;
    random_batch(sa, N, inputs, targets);
    // Each arm's memory: what the device holds once its model has stepped, above what it held
    // before (the context and cuBLAS's workspace are there from the start).
    const double base = device_used_gb(backend);
    double used[2];
    StepBench a(sa, s.B, s.T, backend);
    for (int i = 0; i < std::max(1, o.warmup); i++) a.time_step(inputs, targets);
    used[0] = device_used_gb(backend) - base;
    StepBench x(xsa_cfg, s.B, s.T, backend);
    for (int i = 0; i < std::max(1, o.warmup); i++) x.time_step(inputs, targets);
    used[1] = device_used_gb(backend) - base - used[0];
    std::vector<double> ms_sa, ms_xsa, ratio;
    interleaved_steps(a, x, o.steps, inputs, targets, ms_sa, ms_xsa, ratio);
    const double flops = step_flops(sa, s.B, s.T);
    for (int k = 0; k < 2; k++) {
      const Stats st = stats_of(k ? ms_xsa : ms_sa);
      const double tflops = flops / st.median / 1e9;
      std::printf("| %s | %s | %d × %d | %.2f | %.2f–%.2f | %.0f | %.1f | %.1f%% | %.2f |\n",
                  s.name, k ? "xsa" : "sa", s.B, s.T, st.median, st.min, st.max,
                  N / (st.median / 1000), tflops, peak > 0 ? 100 * tflops * 1e12 / peak : 0.0,
                  used[k]);
      records.push_back({{"kind", "step"},
                         {"device", backend.describe()},
                         {"config", s.name},
                         {"attn", k ? "xsa" : "sa"},
                         {"B", s.B},
                         {"T", s.T},
                         {"ms_median", st.median},
                         {"ms_min", st.min},
                         {"ms_max", st.max},
                         {"tokens_per_s", N / (st.median / 1000)},
                         {"tflops", tflops},
                         {"mfu", peak > 0 ? tflops * 1e12 / peak : 0.0},
                         {"precision", o.precision},
                         {"arch", architecture_name(sa)},
                         {"device_gb", used[k]}});
    }
    const Stats r = stats_of(ratio);
    std::printf("| %s | XSA/SA | | %.3f | %.3f–%.3f | | | | |\n", s.name, r.median, r.min, r.max);
    records.push_back({{"kind", "ratio"},
                       {"what", std::string("gpu_step_xsa_over_sa_") + s.name},
                       {"value", r.median}});
  }
}

// Attention alone on the GPU: C = 2048 (16 heads of 128 or 32 of 64), 16 384 tokens per call
// (B = 16384 / T), forward and forward + backward, SA against XSA. FLOPs as flash-attention counts
// them: forward 4·B·H·D·T²/2 (causal), backward 2.5× the forward.
void bench_gpu_attention(Backend<float>& backend, const std::vector<int>& Ts, json& records) {
  const double peak = backend.peak_bf16_flops();
  std::printf(
      "\n## Attention alone on the GPU (C 2048, B·T = 16384, causal), median ms of 10 after 3 "
      "warm-up\n\n| D | T | pass | SA ms | XSA ms | XSA/SA | SA TFLOP/s | XSA TFLOP/s | of peak "
      "(XSA) |\n|---|---|---|---|---|---|---|---|---|\n");
  for (int D : {64, 128}) {
    for (int T : Ts) {
      const int H = 2048 / D, C = H * D, B = std::max(1, 16384 / T);
      const size_t rows = (size_t)B * T;
      DeviceBuffer<float> qkv(backend, rows * 3 * C, MemoryUse::activations),
          y(backend, rows * C, MemoryUse::activations),
          z(backend, rows * C, MemoryUse::activations),
          lse(backend, (size_t)B * H * T, MemoryUse::activations),
          dqkv(backend, rows * 3 * C, MemoryUse::activations),
          dout(backend, rows * C, MemoryUse::activations);
      {
        std::vector<float> host(rows * 3 * C);
        Rng rng(5);
        for (float& v : host) v = (float)rng.normal();
        backend.from_host(qkv.data(), host.data(), host.size());
        backend.from_host(dout.data(), host.data(), rows * C);
      }
      for (bool backward : {false, true}) {
        std::vector<double> ms[2], ratio;
        for (int r = 0; r < 13; r++) {
          for (int kk = 0; kk < 2; kk++) {
            const int k = r % 2 ? 1 - kk : kk;
            ops::AttentionArgs<float> args;
            args.B = B, args.T = T, args.C = C, args.H = H, args.exclusive = k == 1;
            args.qkv = qkv.data(), args.y = y.data(), args.z = z.data(), args.lse = lse.data();
            args.dqkv = dqkv.data(), args.d_out = dout.data();
            backend.synchronize();
            const auto t0 = clock_type::now();
            backend.attention_forward(args);
            if (backward) backend.attention_backward(args);
            backend.synchronize();
            if (r >= 3) ms[k].push_back(ms_since(t0));
          }
          if (r >= 3) ratio.push_back(ms[1].back() / ms[0].back());
        }
        const double fwd = 4.0 * B * H * D * (double)T * (T + 1) / 2;
        const double flops = backward ? 3.5 * fwd : fwd;
        const double sa = stats_of(ms[0]).median, xs = stats_of(ms[1]).median;
        const char* pass = backward ? "fwdbwd" : "fwd";
        std::printf("| %d | %d | %s | %.3f | %.3f | %.3f | %.1f | %.1f | %.1f%% |\n", D, T, pass,
                    sa, xs, stats_of(ratio).median, flops / sa / 1e9, flops / xs / 1e9,
                    peak > 0 ? 100 * flops / (xs / 1e3) / peak : 0.0);
        for (int k = 0; k < 2; k++)
          records.push_back({{"kind", "gpu_attention"},
                             {"D", D},
                             {"T", T},
                             {"pass", pass},
                             {"attn", k ? "xsa" : "sa"},
                             {"ms_median", k ? xs : sa},
                             {"tflops", flops / (k ? xs : sa) / 1e9}});
        records.push_back(
            {{"kind", "ratio"},
             {"what", fmt::format("gpu_attention_{}_D{}_T{}_xsa_over_sa", pass, D, T)},
             {"value", stats_of(ratio).median}});
      }
    }
  }
}

void run_gpu_bench(const Options& o, const std::vector<int>& attn_T) {
  Backend<float>& backend = select_backend({o.device, o.precision, o.tf32, o.deterministic});
  std::printf("# xsa bench --device %s\n\n%s\n", o.device.c_str(), backend.describe().c_str());
  json records = json::array();
  if (!o.no_steps) bench_gpu_steps(backend, o, records);
  if (!o.no_attention) bench_gpu_attention(backend, attn_T, records);
  write_outputs(o, records);
}

void run_bench(const Options& o) {
  if (o.allreduce) {  // under mpirun: every rank takes part, rank 0 reports
    Comm& comm = world_comm();
    const int threads = set_thread_count(o.threads, comm.local_size());
    json records = json::array();
    if (comm.is_root())
      std::printf(
          "# xsa bench --allreduce\n\n%d processes (%d on this machine), %d thread%s each; %s\n",
          comm.size(), comm.local_size(), threads, threads == 1 ? "" : "s",
          built_with_mpi() ? mpi_library_version().c_str() : "built without MPI");
    bench_allreduce(std::max(3, o.steps), records);
    if (comm.is_root()) write_outputs(o, records);
    return;
  }
  if (world_comm().size() > 1)
    throw AgreedError("under mpirun, xsa bench measures the gradient sum only: add --allreduce");
  if (o.device != "cpu" && (o.device != "auto" || cuda_available(nullptr))) {
    set_thread_count(o.threads);
    return run_gpu_bench(
        o, o.attn_T_given ? o.attn_T : std::vector<int>{1024, 2048, 4096, 8192, 16384});
  }
  const int threads = set_thread_count(o.threads);
  json records = json::array();
  // What runs (the CPU's kernel level, the product libraries), and the yardstick: the CPU's FMA
  // peak at that level's widest vectors, measured.
  const double fma_peak = ops::fma_peak_gflops();
  std::printf(
      "# xsa bench\n\n%d threads; %s\nFMA peak: %.1f GFLOP/s (fp32, %s vectors, independent FMA "
      "chains on every thread, measured)\n",
      threads, cpu_backend<float>().describe().c_str(), fma_peak,
      cpu_level() >= CpuLevel::avx512 ? "512-bit" : "256-bit");
  records.push_back({{"kind", "machine"},
                     {"cpu", cpu_summary()},
                     {"products", ops::products_summary()},
                     {"fma_peak_gflops", fma_peak}});
  const char* pinned = std::getenv("OPENBLAS_CORETYPE");
  const std::string note =
      blas_kernels_note(blas_core(), pinned ? pinned : "", best_blas_core_for_cpu());
  if (!note.empty()) std::printf("%s\n", note.c_str());
  std::vector<BenchShape> shapes = shapes_of(o.config);
  for (BenchShape& s : shapes) s.gpt2_architecture = o.arch == "gpt2";
  if (o.arch == "gpt2") std::printf("architecture: gpt2 (learned positions, linear biases)\n");
  const bool bf16 = o.precision == "bf16";
  if (bf16)
    std::printf("precision: bf16 products (oneDNN) with fp32 accumulation, fp32 elsewhere\n");
  if (o.gemm) bench_gemm(shapes, bf16, records);
  if (!o.no_steps) bench_steps(shapes, o.steps, o.warmup, bf16, fma_peak, records);
  if (!o.no_attention) bench_attention(o.attn_T, records);
  if (o.decode) bench_decode(shapes, o.steps, records);
  write_outputs(o, records);
}

}  // namespace

void add_bench_command(CLI::App& root) {
  auto* cmd = root.add_subcommand("bench",
                                  "Measure training-step, attention and (--decode) decoding speed, "
                                  "SA vs XSA, and the GEMM ceiling");
  auto o = std::make_shared<Options>();
  auto child = std::make_shared<bool>(false);
  cmd->add_option("--config", o->config, "tiny, small, gpt2 or all (docs/SPEC.md §4)")
      ->capture_default_str();
  cmd->add_option("--arch", o->arch,
                  "xsa (RoPE, no linear biases) or gpt2 (learned positions, linear biases)")
      ->capture_default_str();
  cmd->add_option("--steps", o->steps, "Timed steps per arm")->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "Warm-up steps per arm")->capture_default_str();
  cmd->add_option("--threads", o->threads, "Threads (0: every core)")->capture_default_str();
  cmd->add_option("--attn-T", o->attn_T, "Sequence lengths of the attention-alone table")
      ->delimiter(',');
  cmd->add_flag(
      "--gemm", o->gemm,
      "Also print the GEMM ceiling per shape (bf16 with --precision bf16) and the effect of "
      "the BLAS kernel choice");
  cmd->add_flag("--no-steps", o->no_steps, "Skip the training-step table");
  cmd->add_flag("--no-attention", o->no_attention, "Skip the attention-alone table");
  cmd->add_flag("--decode", o->decode,
                "Also time decoding with the key/value cache against recomputing the sequence");
  cmd->add_option("--precision", o->precision,
                  "fp32, or bf16: the step table and its GEMM ceiling with bf16 products")
      ->capture_default_str();
  cmd->add_option("--device", o->device,
                  "cpu, cuda, cuda:N or auto: on a GPU the step table (gpt2 at T 1024) reports "
                  "model FLOPs utilisation and device memory, the attention table T 1024-16384")
      ->capture_default_str();
  cmd->add_option("--batch", o->batch,
                  "Sequences per step (0: the configuration's; on a GPU 32768 tokens)")
      ->capture_default_str();
  cmd->add_option("--seq-len", o->seq_len,
                  "Tokens per sequence (0: the configuration's; gpt2 on a GPU 1024)")
      ->capture_default_str();
  cmd->add_flag("--tf32", o->tf32, "On a GPU with --precision fp32: TF32 products");
  cmd->add_flag("--deterministic", o->deterministic,
                "On a GPU: attention's backward without atomics");
  cmd->add_flag("--allreduce", o->allreduce,
                "Time the gradient sum over the processes of this job (run under mpirun), 1 MB to "
                "the gpt2 model's gradients");
  cmd->add_option("--json", o->json_path,
                  "Write one JSON record per row (a JSON array) to this file");
  cmd->add_option("--csv", o->csv_path, "Write the rows as CSV to this file");
  cmd->add_flag("--gemm-child", *child)->group("");  // internal: prints the `small` ceiling alone
  cmd->callback([o, child, cmd] {
    if (o->steps < 1 || o->warmup < 0) fail("--steps must be at least 1 and --warmup non-negative");
    if (o->precision != "fp32" && o->precision != "bf16")
      fail("--precision {} is not known (fp32 or bf16)", o->precision);
    ModelConfig unused;
    set_architecture(unused, o->arch);  // an unknown --arch, before anything runs
    validate_device(o->device);
    if (o->device == "isolated")
      fail(
          "--device isolated is a test device (the CPU's kernels behind a fake device): bench "
          "cpu or cuda");
    if (o->batch < 0 || o->seq_len < 0) fail("--batch and --seq-len must be non-negative");
    o->attn_T_given = cmd->count("--attn-T") > 0;
    std::string why;
    if (o->precision == "bf16" && o->device == "cpu" && !bf16_products_available(&why))
      fail("--precision bf16: {}", why);
    if (*child) {
      set_thread_count(o->threads);
      std::printf(
          "%.3f\n",
          gemm_ceiling(model_of(kShapes[1], AttnKind::sa), kShapes[1].B, kShapes[1].T, 3).gflops);
      return;
    }
    run_bench(*o);
  });
}

}  // namespace xsa::cli

// The tables xsa bench measures on the CPU: the GEMM ceiling per product shape (the product kernels
// alone: what the step's products could reach), what the product library and OpenBLAS's kernel
// choice are worth, the training step against that ceiling and the FMA peak, attention alone, and
// decoding with the key/value cache.
#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>

#include "xsa/bench/measure.h"
#include "xsa/model/decoder.h"
#include "xsa/ops/matmul_bf16.h"
#include "xsa/ops/ops.h"
#include "xsa/util/blas.h"
#include "xsa/util/error.h"
#include "xsa/util/fmt.h"
#include "xsa/util/memory.h"
#include "xsa/util/rng.h"

namespace xsa::bench {
namespace {

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
                                op.wb.data(), {op.rows, op.in, op.out}, op.accumulate);
    else
      ops::matmul_backward(op.dx.data(), op.dw.data(), op.y.data(), op.x.data(), op.w.data(),
                           {op.rows, op.in, op.out}, op.accumulate);
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
GemmCeiling gemm_ceiling(const ModelConfig& cfg, int B, int T, int reps, bool bf16) {
  GemmProducts products(cfg, B, T, bf16);
  for (int r = 0; r < reps; r++) products.time_round();
  return products.ceiling();
}

// The GEMM ceiling of `config` as another process measures it with another product library or
// other BLAS kernels: to show what the choice is worth. Returns NaN if the child fails.
double gemm_in_child(const std::string& env, const std::string& config) {
  std::error_code ec;
  const std::string self =
      std::filesystem::read_symlink("/proc/self/exe", ec).string();  // not the shell's
  std::string cmd = env + " '" + self + "' bench --gemm-child --config " + config + " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return NAN;
  char buf[256] = {};
  std::string out;
  while (fgets(buf, sizeof buf, p)) out += buf;
  pclose(p);
  return out.empty() ? NAN : std::atof(out.c_str());
}

}  // namespace

double gemm_ceiling_gflops(const std::string& config) {
  const BenchShape s = shapes_of(config).front();
  return gemm_ceiling(model_of(s, AttnKind::sa), s.B, s.T, 3, false).gflops;
}

namespace {

// The ceiling of configuration `config` as xsa runs, against the other product library and
// against OpenBLAS's own kernel detection and its generic fallback (each measured in a child
// process, where the other library or kernels can be chosen).
void bench_kernel_choice(const std::string& config, json& records) {
  const double used = gemm_ceiling_gflops(config);
  const auto child = [&](const std::string& env) { return gemm_in_child(env, config); };
  // The library: oneDNN's matmul against the BLAS's sgemm.
  const double onednn = child("XSA_GEMM=onednn"), blas = child("XSA_GEMM=blas");
  std::printf(
      "\nLibrary choice, `%s` ceiling: %.1f GFLOP/s as xsa runs; %.1f with oneDNN's matmul "
      "(XSA_GEMM=onednn), %.1f with the BLAS's sgemm (XSA_GEMM=blas): oneDNN/BLAS %.3f.\n",
      config.c_str(), used, onednn, blas, onednn / blas);
  records.push_back({{"kind", "ratio"},
                     {"what", "gemm_" + config + "_onednn_over_blas"},
                     {"value", onednn / blas}});
  // OpenBLAS's kernels, in the BLAS's products.
  const double own = child(
      "env -u OPENBLAS_CORETYPE -u XSA_BLAS_CORRECTED_FROM XSA_KEEP_BLAS_CORE=1 XSA_GEMM=blas");
  const double generic =
      child("env -u XSA_BLAS_CORRECTED_FROM OPENBLAS_CORETYPE=Prescott XSA_GEMM=blas");
  std::printf(
      "OpenBLAS's kernel choice, `%s` ceiling with the BLAS: %.1f GFLOP/s as xsa runs it (%s); "
      "%.1f with OpenBLAS's own detection; %.1f with its generic fallback (Prescott), what an "
      "unrecognised CPU gets.\n",
      config.c_str(), blas, blas_core().c_str(), own, generic);
  records.push_back({{"kind", "ratio"},
                     {"what", "gemm_" + config + "_in_use_over_generic"},
                     {"value", blas / generic}});
}

// Each product's speed on the model's shapes, in the precision of the step table: OpenBLAS's
// sgemm, or (bf16) oneDNN's products as the bf16 backend runs them.
}  // namespace

void bench_gemm(const std::vector<BenchShape>& shapes, bool bf16, const std::string& library_config,
                json& records) {
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
  if (!bf16)
    bench_kernel_choice(library_config, records);  // the fp32 products' library and kernels
}

namespace {

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
  Backend<float>& backend = bf16 ? cpu_backend(Precision::bf16) : cpu_backend<float>();
  const std::array<double, 2> peak = step_peak_mb(sa, xsa_cfg, s.B, s.T, inputs, targets, backend);
  // The ceiling is timed in rounds between the pairs of steps, so that it and the steps see the
  // same machine: timed minutes apart, the share moved by ±5 points on this shared VM.
  GemmProducts products(sa, s.B, s.T, bf16);
  StepBench a(sa, s.B, s.T, backend), x(xsa_cfg, s.B, s.T, backend);
  for (int i = 0; i < warmup; i++) a.time_step(inputs, targets), x.time_step(inputs, targets);
  const InterleavedTimes times =
      interleaved_steps(a, x, steps, inputs, targets, [&] { products.time_round(); });
  const GemmCeiling ceiling = products.ceiling();
  const double flops = step_flops(sa, s.B, s.T);
  for (int k = 0; k < 2; k++) {
    Stats st = stats_of(k ? times.ms_xsa : times.ms_sa);
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
  Stats r = stats_of(times.ratio);
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

}  // namespace

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

namespace {

// The attention-alone table's layer at sequence length T: one sequence, 8 heads of D, random
// inputs and output gradients, through the CPU backend of the bench's precision (bf16: bf16 tiles).
struct AttentionBench {
  static constexpr int B = 1, H = 8;
  int T, D, C;
  Backend<float>& backend;
  AlignedBuffer<float> qkv, y, z, lse, dqkv, dout, grad;
  AttentionBench(int T, int D, Precision precision)
      : T(T),
        D(D),
        C(H * D),
        backend(cpu_backend(precision)),
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
  // The products' GFLOPs: the forward's two, and with the backward seven.
  double gflop(bool backward) const { return attention_flops(B, T, C, backward ? 7 : 2) / 1e9; }
  // One forward (and backward) pass; returns its milliseconds.
  double run(bool exclusive, bool backward) {
    auto t0 = clock_type::now();
    ops::AttentionArgs<float> args;
    args.B = B, args.T = T, args.C = C, args.H = H, args.exclusive = exclusive;
    args.qkv = qkv.data(), args.y = y.data(), args.z = z.data(), args.lse = lse.data();
    backend.attention_forward(args);
    if (backward) {
      std::copy(grad.data(), grad.data() + grad.size(), dout.data());
      dqkv.zero();
      args.dqkv = dqkv.data(), args.d_out = dout.data();
      backend.attention_backward(args);
    }
    return ms_since(t0);
  }
};

// One row of the attention-alone table: SA and XSA on one pass, interleaved.
void bench_attention_pass(AttentionBench& bench, bool backward, double fma_peak, json& records) {
  const int T = bench.T;
  const double work = bench.gflop(/*backward=*/true);  // the same repetitions for both passes
  const int reps = work >= 200 ? 5 : work >= 50 ? 9 : 21;
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
  const Stats rs = stats_of(ratio);
  const double sa_ms = stats_of(ms[0]).median, xsa_ms = stats_of(ms[1]).median;
  const double gflops = bench.gflop(backward) / (sa_ms / 1e3);
  std::printf("| %d | %d | %s | %.2f | %.2f | %.3f | %.0f | %.0f %% | %.1f | %.1f |\n", bench.D, T,
              pass, sa_ms, xsa_ms, rs.median, gflops, 100 * gflops / fma_peak, extra[0], extra[1]);
  for (int k = 0; k < 2; k++) {
    const double ms_k = k ? xsa_ms : sa_ms, gflops_k = bench.gflop(backward) / (ms_k / 1e3);
    records.push_back({{"kind", "attention"},
                       {"D", bench.D},
                       {"T", T},
                       {"pass", pass},
                       {"attn", k ? "xsa" : "sa"},
                       {"ms_median", ms_k},
                       {"gflops", gflops_k},
                       {"share_of_fma_peak", gflops_k / fma_peak},
                       {"extra_mb", extra[k]}});
  }
  records.push_back({{"kind", "ratio"},
                     {"what", fmt::format("attention_{}_D{}_T{}_xsa_over_sa", pass, bench.D, T)},
                     {"value", rs.median}});
}

}  // namespace

void bench_attention(const BenchOptions& o, double fma_peak, json& records) {
  std::printf(
      "\n## Attention alone (B %d, H %d, causal, %s tiles), median ms; GFLOP/s and the share of "
      "the FMA peak are SA's (7 products over the T(T+1)/2 visible pairs per head forward and "
      "backward, 2 forward); extra "
      "MB = peak resident memory above inputs and outputs\n\n"
      "| D | T | pass | SA ms | XSA ms | XSA/SA | GFLOP/s | of peak | SA extra MB | XSA extra MB "
      "|\n"
      "|---|---|---|---|---|---|---|---|---|---|\n",
      AttentionBench::B, AttentionBench::H, to_string(o.precision));
  for (int D : o.attn_D)
    for (int T : o.attn_T) {
      AttentionBench bench(T, D, o.precision);
      for (bool backward : {false, true}) bench_attention_pass(bench, backward, fma_peak, records);
    }
}

namespace {

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

}  // namespace

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

}  // namespace xsa::bench

// The tables xsa bench measures on a GPU (--device cuda): the training step's model FLOPs
// utilisation against the device's dense peak for the run's products (bf16, TF32 or fp32: the
// vendor's figure for a known GPU, backend/gpu_peaks.h) and its memory, and attention alone.
#include <algorithm>
#include <cstdio>

#include "xsa/backend/device.h"
#include "xsa/bench/measure.h"
#include "xsa/util/fmt.h"
#include "xsa/util/rng.h"

namespace xsa::bench {
namespace {

// Device memory in use (the context, cuBLAS and every buffer), in GB.
double device_used_gb(Backend<float>& backend) {
  size_t free_bytes = 0, total = 0;
  backend.synchronize();
  if (!backend.memory_info(&free_bytes, &total)) return 0;
  return (double)(total - free_bytes) / 1e9;
}

// The shapes on a GPU: gpt2 at its own context (T = 1024) unless --seq-len says otherwise, and a
// batch that fills the GPU (32 768 tokens per step unless --batch).
BenchShape gpu_shape(BenchShape s, const BenchOptions& o) {
  if (o.seq_len > 0)
    s.T = o.seq_len;
  else if (std::string(s.name) == "gpt2")
    s.T = 1024;
  s.B = o.batch > 0 ? o.batch : std::max(s.B, 32768 / s.T);
  return s;
}

// The dense peak the run's products can reach, and its name: bf16 tensor cores, TF32 ones, or
// fp32 FMA (attention's fp32 kernels use FMA even with --tf32).
struct ProductPeak {
  double flops;
  const char* kind;
};
ProductPeak product_peak(const PeakFlops& p, const BenchOptions& o, bool attention) {
  if (o.precision == Precision::bf16) return {p.bf16, "bf16"};
  if (o.tf32 && !attention) return {p.tf32, "TF32"};
  return {p.fp32, "fp32"};
}

void bench_gpu_steps(Backend<float>& backend, const BenchOptions& o, json& records) {
  const PeakFlops peaks = backend.peak_flops();
  const auto [peak, kind] = product_peak(peaks, o, false);
  std::printf(
      "\n## Training step on the GPU (forward + backward + AdamW), median of %d after %d "
      "warm-up; SA and XSA interleaved; MFU against the %s dense peak (%.0f TFLOP/s, %s)\n\n| "
      "config | attn | B × T | ms median | ms min–max | tokens/s | TFLOP/s | MFU | device GB "
      "|\n|---|---|---|---|---|---|---|---|---|\n",
      o.steps, o.warmup, kind, peak / 1e12, peaks.source.c_str());
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
    const InterleavedTimes times = interleaved_steps(a, x, o.steps, inputs, targets);
    const double flops = step_flops(sa, s.B, s.T);
    for (int k = 0; k < 2; k++) {
      const Stats st = stats_of(k ? times.ms_xsa : times.ms_sa);
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
                         {"peak_tflops", peak / 1e12},
                         {"peak_source", peaks.source},
                         {"precision", to_string(o.precision)},
                         {"arch", architecture_name(sa)},
                         {"device_gb", used[k]}});
    }
    const Stats r = stats_of(times.ratio);
    std::printf("| %s | XSA/SA | | %.3f | %.3f–%.3f | | | | |\n", s.name, r.median, r.min, r.max);
    records.push_back({{"kind", "ratio"},
                       {"what", std::string("gpu_step_xsa_over_sa_") + s.name},
                       {"value", r.median}});
  }
}

// Attention alone on the GPU: C = 2048 (16 heads of 128 or 32 of 64), 16 384 tokens per call
// (B = 16384 / T), forward and forward + backward, SA against XSA. FLOPs as flash-attention counts
// them: forward 4·B·H·D·T²/2 (causal), backward 2.5× the forward.
void bench_gpu_attention(Backend<float>& backend, const BenchOptions& o, const std::vector<int>& Ts,
                         json& records) {
  const PeakFlops peaks = backend.peak_flops();
  const auto [peak, kind] = product_peak(peaks, o, true);
  std::printf(
      "\n## Attention alone on the GPU (C 2048, B·T = 16384, causal), median ms of 10 after 3 "
      "warm-up; of peak: the %s dense peak (%.0f TFLOP/s, %s)\n\n| D | T | pass | SA ms | XSA "
      "ms | XSA/SA | SA TFLOP/s | XSA TFLOP/s | of peak (XSA) "
      "|\n|---|---|---|---|---|---|---|---|---|\n",
      kind, peak / 1e12, peaks.source.c_str());
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
                             {"tflops", flops / (k ? xs : sa) / 1e9},
                             {"of_peak", peak > 0 ? flops / ((k ? xs : sa) / 1e3) / peak : 0.0}});
        records.push_back(
            {{"kind", "ratio"},
             {"what", fmt::format("gpu_attention_{}_D{}_T{}_xsa_over_sa", pass, D, T)},
             {"value", stats_of(ratio).median}});
      }
    }
  }
}

}  // namespace

void run_gpu_bench(const BenchOptions& o, const std::vector<int>& attn_T) {
  Backend<float>& backend = select_backend({o.device, o.precision, o.tf32, o.deterministic});
  std::printf("# xsa bench --device %s\n\n%s\n", o.device.c_str(), backend.describe().c_str());
  json records = json::array();
  if (!o.no_steps) bench_gpu_steps(backend, o, records);
  if (!o.no_attention) bench_gpu_attention(backend, o, attn_T, records);
  write_outputs(o, records);
}

}  // namespace xsa::bench

// xsa bench --profile: where a training step's time goes. The model's step runs on a backend that
// times every entry of the kernel table (src/ops/op_list.txt) as it hands it on, so each op
// family's time, its share of the step, its rate and that rate's share of its roofline come from
// the step itself: the FMA peak for the products and attention, the machine's measured memory
// bandwidth for the ops that stream memory. A new entry of the table is timed with no line here.
#include <algorithm>
#include <array>
#include <cstdio>
#include <tuple>

#include "xsa/backend/forwarding_backend.h"
#include "xsa/backend/generated/entry_list.h"
#include "xsa/bench/measure.h"
#include "xsa/model/attention.h"
#include "xsa/util/error.h"
#include "xsa/util/fmt.h"
#include "xsa/util/memory.h"

namespace xsa::bench {
namespace {

using Entry = KernelEntry;  // every entry of the table (backend/generated/entry_list.h)

// What an entry's call does: FLOPs of its products (0 where it has none) and bytes it must move
// at least (each array read or written once; 0 where no model of it is written, and then no rate
// is printed).
struct Work {
  double flops = 0, bytes = 0;
};

template <size_t I, typename... Args>
const auto& arg(const Args&... args) {
  return std::get<I>(std::forward_as_tuple(args...));
}

// The work of one call of entry E, from its arguments. Attention counts the causal products as
// FlashAttention does (q·kᵀ and p·v forward; the recomputed probabilities, dv, dp, dq and dk
// backward) over the T(T+1)/2 visible pairs.
template <Entry E, typename... Args>
Work work_of(const Args&... args) {
  constexpr double f = sizeof(float);
  if constexpr (E == Entry::matmul_forward || E == Entry::matmul_forward_residual) {
    const MatmulShape s = arg < E == Entry::matmul_forward ? 3 : 4 > (args...);
    return {2.0 * s.N * s.in_dim * s.out_dim,
            f * ((double)s.N * s.in_dim + (double)s.in_dim * s.out_dim + (double)s.N * s.out_dim)};
  } else if constexpr (E == Entry::matmul_backward) {
    const MatmulShape s = arg<5>(args...);
    const int products = (arg<0>(args...) != nullptr) + (arg<1>(args...) != nullptr);
    return {2.0 * products * s.N * s.in_dim * s.out_dim, 0};
  } else if constexpr (E == Entry::attention_forward || E == Entry::attention_backward) {
    const auto& a = arg<0>(args...);
    return {attention_flops(a.B, a.T, a.C, E == Entry::attention_forward ? 2 : 5), 0};
  } else if constexpr (E == Entry::classifier_forward_backward) {
    const auto& a = arg<0>(args...);
    const double product = 2.0 * a.rows * a.C * a.Vp;
    return {a.dloss != 0 ? 3 * product : product, 0};
  } else if constexpr (E == Entry::layernorm_forward) {
    const auto& a = arg<1>(args...);
    return {0, f * 2 * a.N * a.C};  // the input read, the output written
  } else if constexpr (E == Entry::layernorm_backward) {
    const auto& a = arg<4>(args...);
    return {0, f * 4 * a.N * a.C};  // dout and the input read, dinp read and written
  } else if constexpr (E == Entry::gelu_forward) {
    return {0, f * 2 * arg<2>(args...)};
  } else if constexpr (E == Entry::gelu_backward) {
    return {0, f * 3 * arg<3>(args...)};
  } else if constexpr (E == Entry::rope_forward) {
    const auto& a = arg<1>(args...);
    const double qk = (double)a.B * a.T * (a.C + (a.Hkv ? a.Hkv : a.H) * (a.C / a.H));
    return {0, f * 2 * qk};  // q and k read and written in place
  } else if constexpr (E == Entry::rope_backward) {
    const auto& a = arg<2>(args...);
    const double qk = (double)a.B * a.T * (a.C + (a.Hkv ? a.Hkv : a.H) * (a.C / a.H));
    return {0, f * 2 * qk};
  } else if constexpr (E == Entry::xsa_forward) {
    const auto& a = arg<0>(args...);
    return {0, f * 3 * a.B * a.T * a.C};  // y and v read, z written
  } else if constexpr (E == Entry::bias_forward) {
    return {0, f * 2 * arg<2>(args...) * arg<3>(args...)};
  } else if constexpr (E == Entry::crossentropy_forward_backward) {
    return {0, f * 2 * arg<3>(args...) * arg<5>(args...)};  // the logits read and written
  } else if constexpr (E == Entry::adamw_update) {
    return {0, f * 7 * arg<4>(args...)};  // param, grad, m, v read; param, m, v written
  } else if constexpr (E == Entry::sum_of_squares || E == Entry::sum) {
    return {0, f * arg<1>(args...)};
  } else if constexpr (E == Entry::newton_schulz) {
    // Per step and matrix of the batch: X Xᵀ and P X (rows · cols · k each) and A² (k³), k the
    // smaller side.
    const auto& a = arg<0>(args...);
    const double k = std::min(a.rows, a.cols);
    return {a.count * ops::kNewtonSchulzSteps * 2.0 * (2.0 * a.rows * a.cols * k + k * k * k), 0};
  } else if constexpr (E == Entry::encoder_forward || E == Entry::embedding_add) {
    return {0, f * 2 * arg<3>(args...) * arg<4>(args...)};
  } else {
    return {};
  }
}

struct EntryTotals {
  double seconds = 0, flops = 0, bytes = 0;
  long calls = 0;
};

// Times every kernel entry on the calling thread (the ops run their own threads inside a call and
// return when done), then hands it on.
class ProfilingBackend final : public ForwardingBackend<float> {
 public:
  using Real = float;
  using ForwardingBackend<float>::ForwardingBackend;
  std::array<EntryTotals, (size_t)Entry::count> totals{};
  void clear() { totals = {}; }

  // Every entry of the table, timed (generated from src/ops/op_list.txt).
#include "xsa/bench/generated/profiling_entries.h"

 private:
  struct Timing {
    EntryTotals& totals;
    clock_type::time_point start = clock_type::now();
    Timing(EntryTotals& totals, Work work) : totals(totals) {
      totals.calls++, totals.flops += work.flops, totals.bytes += work.bytes;
    }
    ~Timing() { totals.seconds += ms_since(start) / 1e3; }
  };
};

const char* phase_of(const std::string& entry) {
  if (entry == "adamw_update" || entry == "sum_of_squares" || entry == "sum" ||
      entry.rfind("muon_", 0) == 0 || entry.rfind("newton_schulz", 0) == 0)
    return "optimizer";
  if (entry == "classifier_forward_backward") return "fwd+bwd";
  return entry.find("backward") != std::string::npos ? "backward" : "forward";
}

// The shape the options ask for: --model's, with --layers, --embd, --heads, --seq-len and --batch
// in place of its own where given.
BenchShape profile_shape(const BenchOptions& o, BenchShape s) {
  if (o.layers > 0) s.L = o.layers;
  if (o.embd > 0) s.C = o.embd;
  if (o.heads > 0) s.H = o.heads;
  if (o.seq_len > 0) s.T = o.seq_len;
  if (o.batch > 0) s.B = o.batch;
  if (s.C % s.H) fail("--embd {} is not a multiple of --heads {}", s.C, s.H);
  return s;
}

void profile_shape_run(const BenchOptions& o, const BenchShape& s, double fma_peak,
                       double bandwidth, json& records) {
  ModelConfig cfg = model_of(s, AttnKind::sa);
  cfg.attention = parse_attention(o.attn, cfg.n_layer, "--attn");
  set_mlp_activation(cfg, o.mlp);
  cfg.logit_softcap = o.logit_softcap;
  OptimizerSettings optimizer;
  optimizer.muon = o.optimizer == "muon";
  const int N = s.B * s.T;
  std::vector<int32_t> inputs, targets;
  random_batch(cfg, N, inputs, targets);
  ProfilingBackend backend(cpu_backend(o.precision));
  StepBench bench(cfg, s.B, s.T, backend, optimizer);
  for (int i = 0; i < std::max(1, o.warmup); i++) bench.time_step(inputs, targets);
  backend.clear();
  double step_seconds = 0;
  for (int i = 0; i < o.steps; i++) step_seconds += bench.time_step(inputs, targets) / 1e3;
  const double per_step = step_seconds / o.steps;
  std::printf(
      "\n## Profile: `%s` (%d layers × %d, %d heads, T %d, batch %d, --attn %s, %s, %s, MLP %s%s), "
      "%.1f ms per step (mean of %d)\n\n| op | phase | calls | ms per step | share | GFLOP/s | "
      "GB/s | of roofline |\n|---|---|---|---|---|---|---|---|\n",
      s.name, s.L, s.C, s.H, s.T, s.B, o.attn.c_str(), to_string(o.precision), o.optimizer.c_str(),
      o.mlp.c_str(),
      o.logit_softcap > 0 ? fmt::format(", soft-cap {:g}", o.logit_softcap).c_str() : "",
      per_step * 1e3, o.steps);
  double in_ops = 0;
  for (int e = 0; e < (int)Entry::count; e++) {
    const EntryTotals& t = backend.totals[e];
    if (t.calls == 0) continue;
    in_ops += t.seconds;
    const double seconds = t.seconds / o.steps, share = t.seconds / step_seconds;
    const double gflops = t.flops / t.seconds / 1e9, gbs = t.bytes / t.seconds / 1e9;
    // Products and attention against the FMA peak; streaming ops against the bandwidth.
    const double roofline = t.flops > 0 ? gflops / fma_peak : t.bytes > 0 ? gbs / bandwidth : 0;
    const std::string name = kKernelEntries[e].name;
    std::printf("| %s | %s | %ld | %.2f | %.1f %% | %s | %s | %s |\n", name.c_str(), phase_of(name),
                t.calls / o.steps, seconds * 1e3, 100 * share,
                t.flops > 0 ? fmt::format("{:.0f}", gflops).c_str() : "",
                t.bytes > 0 && t.flops == 0 ? fmt::format("{:.1f}", gbs).c_str() : "",
                roofline > 0 ? fmt::format("{:.0f} %", 100 * roofline).c_str() : "");
    records.push_back({{"kind", "profile"},
                       {"model", s.name},
                       {"op", name},
                       {"phase", phase_of(name)},
                       {"calls_per_step", t.calls / o.steps},
                       {"ms_per_step", seconds * 1e3},
                       {"share", share},
                       {"gflops", t.flops > 0 ? gflops : 0.0},
                       {"gbs", t.bytes > 0 ? gbs : 0.0},
                       {"share_of_roofline", roofline}});
  }
  const double flops = step_flops(cfg, s.B, s.T);
  std::printf(
      "| (between the ops: the step's own code, allocation, waits) | | | %.2f | %.1f %% | | | |\n"
      "\nThe step: %.1f GFLOP (3× the forward's products and attention), %.0f GFLOP/s, %.0f %% of "
      "the FMA peak; %.0f tokens/s.\n",
      (step_seconds - in_ops) / o.steps * 1e3, 100 * (1 - in_ops / step_seconds), flops / 1e9,
      flops / per_step / 1e9, 100 * flops / per_step / 1e9 / fma_peak, N / per_step);
  records.push_back({{"kind", "profile_step"},
                     {"model", s.name},
                     {"ms_per_step", per_step * 1e3},
                     {"gflops", flops / per_step / 1e9},
                     {"share_of_fma_peak", flops / per_step / 1e9 / fma_peak},
                     {"tokens_per_s", N / per_step}});
}

}  // namespace

double memory_bandwidth_gbs() {
  // A triad over arrays far larger than the caches, on every thread; bytes counted as the three
  // arrays once each (a write's read for ownership not counted, as STREAM counts); the best of 5.
  const size_t n = (size_t)1 << 24;  // 64 MB per array
  AlignedBuffer<float> a(n), b(n), c(n);
#pragma omp parallel for simd
  for (size_t i = 0; i < n; i++) a[i] = 0, b[i] = 1, c[i] = 2;
  double best = 0;
  for (int round = 0; round < 5; round++) {
    const auto t0 = clock_type::now();
#pragma omp parallel for simd
    for (size_t i = 0; i < n; i++) a[i] = b[i] + 0.5f * c[i];
    best = std::max(best, 3.0 * sizeof(float) * n / (ms_since(t0) / 1e3) / 1e9);
  }
  return best;
}

void bench_profile(const BenchOptions& o, double fma_peak, json& records) {
  const double bandwidth = memory_bandwidth_gbs();
  std::printf("memory bandwidth: %.1f GB/s (a triad on every thread, measured)\n", bandwidth);
  records.push_back({{"kind", "bandwidth"}, {"gbs", bandwidth}});
  for (const BenchShape& s : shapes_of(o.config))
    profile_shape_run(o, profile_shape(o, s), fma_peak, bandwidth, records);
}

}  // namespace xsa::bench

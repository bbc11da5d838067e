// xsa bench: which tables run, what the machine is, and the gradient sum over a job's processes.
#include "xsa/bench/bench.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "xsa/backend/device.h"
#include "xsa/bench/measure.h"
#include "xsa/dist/agree.h"
#include "xsa/dist/comm.h"
#include "xsa/model/attention.h"
#include "xsa/ops/matmul_bf16.h"
#include "xsa/ops/ops.h"
#include "xsa/util/blas.h"
#include "xsa/util/cpu.h"
#include "xsa/util/error.h"
#include "xsa/util/fmt.h"
#include "xsa/util/threads.h"

namespace xsa::bench {
namespace {

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

}  // namespace

void validate(const BenchOptions& o) {
  if (o.steps < 1 || o.warmup < 0) fail("--steps must be at least 1 and --warmup non-negative");
  ModelConfig unused;
  set_architecture(unused, o.arch);  // an unknown --arch, before anything runs
  validate_device(o.device);
  if (o.device == "isolated")
    fail(
        "--device isolated is a test device (the CPU's kernels behind a fake device): bench cpu "
        "or cuda");
  if (o.batch < 0 || o.seq_len < 0) fail("--batch and --seq-len must be non-negative");
  // The CPU backend of that precision, or its refusal (bf16 without bf16 products; a precision
  // it does not have), before anything runs: the tables are never timed in another precision.
  if (o.device == "cpu") cpu_backend(o.precision);
  shapes_of(o.config);  // an unknown --config
  if (o.profile) {
    ModelConfig cfg;
    parse_attention(o.attn, cfg.n_layer, "--attn");  // a bad --attn, before timing
    if (o.layers < 0 || o.embd < 0 || o.heads < 0)
      fail("--layers, --embd and --heads must be non-negative");
    if (o.device != "cpu") fail("--profile runs on the CPU (--device cpu)");
  }
  if (o.data && (o.data_text_mb < 1 || !(o.data_gb > 0)))
    fail("--data-text-mb must be at least 1 and --data-gb positive");
}

void run_bench(const BenchOptions& o) {
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
  // What runs (the CPU's kernel level, the product libraries), and the yardstick of the tables
  // that report a share of it: the CPU's FMA peak at that level's widest vectors, measured only
  // where one of them runs (decoding and the data side are bound by memory and by text).
  const bool shares_of_peak = o.profile || (!o.data && (!o.no_steps || !o.no_attention));
  const double fma_peak = shares_of_peak ? ops::fma_peak_gflops() : NAN;
  std::printf("# xsa bench\n\n%d threads; %s\n", threads, cpu_backend<float>().describe().c_str());
  if (shares_of_peak)
    std::printf(
        "FMA peak: %.1f GFLOP/s (fp32, %s vectors, independent FMA chains on every thread, "
        "measured)\n",
        fma_peak, cpu_level() >= CpuLevel::avx512 ? "512-bit" : "256-bit");
  records.push_back({{"kind", "machine"},
                     {"cpu", cpu_summary()},
                     {"products", ops::products_summary()},
                     {"fma_peak_gflops", shares_of_peak ? json(fma_peak) : json(nullptr)}});
  const char* pinned = std::getenv("OPENBLAS_CORETYPE");
  const std::string note =
      blas_kernels_note(blas_core(), pinned ? pinned : "", best_blas_core_for_cpu());
  if (!note.empty()) std::printf("%s\n", note.c_str());
  std::vector<BenchShape> shapes = shapes_of(o.config);
  for (BenchShape& s : shapes) s.gpt2_architecture = o.arch == "gpt2";
  if (o.arch == "gpt2") std::printf("architecture: gpt2 (learned positions, linear biases)\n");
  if (o.profile) {
    bench_profile(o, fma_peak, records);
    return write_outputs(o, records);
  }
  if (o.data) {
    bench_data(o, threads, records);
    return write_outputs(o, records);
  }
  const bool bf16 = o.precision == Precision::bf16;
  if (bf16)
    std::printf("precision: bf16 products (oneDNN) with fp32 accumulation, fp32 elsewhere\n");
  if (o.gemm) bench_gemm(shapes, bf16, o.library_config, records);
  if (!o.no_steps) bench_steps(shapes, o.steps, o.warmup, bf16, fma_peak, records);
  if (!o.no_attention) bench_attention(o, fma_peak, records);
  if (o.decode) bench_decode(shapes, o.steps, records);
  write_outputs(o, records);
}

}  // namespace xsa::bench

// The CPU's fp32 FMA peak, measured: the benchmarks' yardstick for the products (xsa bench).
#include <omp.h>

#include <chrono>

#include "xsa/ops/ops.h"

// clang-format off: after every other include (ops/kernel_level.h)
#include "xsa/ops/kernel_level.h"
// clang-format on

namespace xsa::ops::XSA_LEVEL {

namespace {

// The level's widest vector of floats, and enough independent chains to keep every FMA unit busy
// through the instruction's latency (4-5 cycles on two units: 8-10 in flight), within the level's
// registers (16 ymm, 32 zmm).
#if XSA_LEVEL_IS_AVX512
constexpr int kFmaVectorBytes = 64, kChains = 16;
#else
constexpr int kFmaVectorBytes = 32, kChains = 12;
#endif
typedef float Vector __attribute__((vector_size(kFmaVectorBytes)));
constexpr int kLanes = kFmaVectorBytes / sizeof(float);

// `iterations` rounds of one FMA on each chain (x·a + b, contracted into one instruction);
// returns the seconds taken.
double fma_chains(long iterations) {
  Vector acc[kChains], a, b;
  for (int l = 0; l < kLanes; l++) a[l] = 0.999999f, b[l] = 1e-7f;
  for (int c = 0; c < kChains; c++)
    for (int l = 0; l < kLanes; l++) acc[c][l] = 1.0f + 0.001f * (c + l);
  const auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < iterations; i++) {
#pragma GCC unroll 16
    for (int c = 0; c < kChains; c++) acc[c] = acc[c] * a + b;  // (rounds cannot be folded:
  }                                                             // no -ffast-math)
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  volatile float sink = 0;  // the chains' results used, so that they are computed
  for (int c = 0; c < kChains; c++) sink = sink + acc[c][0];
  return seconds;
}

}  // namespace

double fma_peak_gflops() {
  // Each thread runs its chains for about 0.2 s; the peak is the threads' rates summed, the best of
  // three rounds (a round can only be slowed, by the machine's other work).
  double best = 0;
  for (int round = 0; round < 3; round++) {
    double gflops = 0;
#pragma omp parallel reduction(+ : gflops)
    {
      long iterations = 1 << 16;
      double seconds = fma_chains(iterations);
      iterations = (long)(iterations * 0.2 / seconds);
      seconds = fma_chains(iterations);
      gflops += 2.0 * kLanes * kChains * (double)iterations / seconds / 1e9;
    }
    best = gflops > best ? gflops : best;
  }
  return best;
}

}  // namespace xsa::ops::XSA_LEVEL
XSA_LEVEL_END

// The engine's kernels: graph-agnostic forward and backward passes, one family per file
// (ops/<family>.cpp), each templated on the scalar type and instantiated for float (training) and
// double (the gradient-check path). Plain, obviously-correct twins of every kernel live in
// ops/reference.h; the tests hold these kernels to them.
//
// Each kernel file is compiled once per CPU level (AVX2, AVX-512; ops/kernel_level.h). The list of
// kernels with their shapes and conventions is ops/kernels.h; from it come, here, each level's
// declarations, each level's kernels as a struct (BaselineKernels, Avx512Kernels: the CPU backend
// is built once per level on them, so its calls reach their kernels without a branch), and the
// xsa::ops functions that tests, benchmarks and tools call, which run the level util/cpu.h chose
// at each call.
#pragma once

#include <cstddef>
#include <cstdint>

#include "xsa/ops/args.h"
#include "xsa/ops/attention.h"
#include "xsa/ops/bf16.h"
#include "xsa/ops/kernels.h"
#include "xsa/util/cpu.h"

namespace xsa::ops {

// adamw_update's settings.
struct AdamWSettings {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.0;  // the caller passes 0 for tensors that do not decay
  double grad_scale = 1.0;    // global-norm clipping folds in here
  int64_t step = 1;           // 1-based, for bias correction
};

// Each level's declarations (the kernel files define them, ops/kernel_level.h).
#define XSA_DECLARE_REAL(ret, name, params, args) \
  template <typename Real>                        \
  ret name params;
#define XSA_DECLARE_FLOAT(ret, name, params, args) ret name params;
namespace baseline {
XSA_REAL_KERNELS(XSA_DECLARE_REAL)
XSA_FLOAT_KERNELS(XSA_DECLARE_FLOAT)
}  // namespace baseline
#if defined(__x86_64__)
#define XSA_HAS_AVX512_LEVEL 1
namespace avx512 {
XSA_REAL_KERNELS(XSA_DECLARE_REAL)
XSA_FLOAT_KERNELS(XSA_DECLARE_FLOAT)
}  // namespace avx512
#endif
#undef XSA_DECLARE_REAL
#undef XSA_DECLARE_FLOAT

// One level's kernels as static functions (the level's namespace in a type, so that a backend can
// be a template of it).
#define XSA_LEVEL_REAL(level, ret, name, params, args) \
  template <typename Real>                             \
  static ret name params {                             \
    return level::name<Real> args;                     \
  }
#define XSA_LEVEL_FLOAT(level, ret, name, params, args) \
  static ret name params {                              \
    return level::name args;                            \
  }
#define XSA_BASELINE_REAL(...) XSA_LEVEL_REAL(baseline, __VA_ARGS__)
#define XSA_BASELINE_FLOAT(...) XSA_LEVEL_FLOAT(baseline, __VA_ARGS__)
struct BaselineKernels {
  static constexpr CpuLevel level = CpuLevel::avx2;
  XSA_REAL_KERNELS(XSA_BASELINE_REAL)
  XSA_FLOAT_KERNELS(XSA_BASELINE_FLOAT)
};
#if defined(XSA_HAS_AVX512_LEVEL)
#define XSA_AVX512_REAL(...) XSA_LEVEL_REAL(avx512, __VA_ARGS__)
#define XSA_AVX512_FLOAT(...) XSA_LEVEL_FLOAT(avx512, __VA_ARGS__)
struct Avx512Kernels {
  static constexpr CpuLevel level = CpuLevel::avx512;
  XSA_REAL_KERNELS(XSA_AVX512_REAL)
  XSA_FLOAT_KERNELS(XSA_AVX512_FLOAT)
};
#undef XSA_AVX512_REAL
#undef XSA_AVX512_FLOAT
#endif
#undef XSA_BASELINE_REAL
#undef XSA_BASELINE_FLOAT
#undef XSA_LEVEL_REAL
#undef XSA_LEVEL_FLOAT

// The kernels at the level util/cpu.h chose, read at each call (XSA_CPU, set_cpu_level).
#if defined(XSA_HAS_AVX512_LEVEL)
#define XSA_AT_LEVEL(name, args) \
  (cpu_level() >= CpuLevel::avx512 ? avx512::name args : baseline::name args)
#else
#define XSA_AT_LEVEL(name, args) baseline::name args
#endif
#define XSA_CURRENT_REAL(ret, name, params, args) \
  template <typename Real>                        \
  inline ret name params {                        \
    return XSA_AT_LEVEL(name<Real>, args);        \
  }
#define XSA_CURRENT_FLOAT(ret, name, params, args) \
  inline ret name params {                         \
    return XSA_AT_LEVEL(name, args);               \
  }
XSA_REAL_KERNELS(XSA_CURRENT_REAL)
XSA_FLOAT_KERNELS(XSA_CURRENT_FLOAT)
#undef XSA_CURRENT_REAL
#undef XSA_CURRENT_FLOAT
#undef XSA_AT_LEVEL

}  // namespace xsa::ops

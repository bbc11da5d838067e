// The engine's kernels: graph-agnostic forward and backward passes, one family per file
// (ops/<family>.cpp), each templated on the scalar type and instantiated for float (training) and
// double (the gradient-check path). Plain, obviously-correct twins of every kernel live in
// ops/reference.h; the tests hold these kernels to them.
//
// Each kernel file is compiled once per CPU level (AVX2, AVX-512; ops/kernel_level.h). The kernels
// with their shapes and conventions are listed once, in src/ops/op_list.txt; from it
// scripts/generate_ops.py writes ops/generated/kernels.h (included at the end): each level's
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

}  // namespace xsa::ops

#if defined(__x86_64__)
#define XSA_HAS_AVX512_LEVEL 1
#endif
// Every kernel, from the one list of ops (src/ops/op_list.txt): each level's declarations, each
// level's kernels as a struct, and the xsa::ops functions that run the level chosen at each call.
#include "xsa/ops/generated/kernels.h"

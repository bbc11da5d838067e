// The engine's kernels: graph-agnostic forward and backward passes, one family per file
// (ops/<family>.cpp), each templated on the scalar type and instantiated for float (training) and
// double (the gradient-check path). Plain, obviously-correct twins of every kernel live in
// ops/reference.h; the tests hold these kernels to them.
//
// Each kernel file is compiled once per CPU level (AVX2, AVX-512; ops/kernel_level.h), and the
// functions declared here run the level util/cpu.h chose (ops/dispatch.cpp). The list of kernels
// with their shapes and conventions is ops/kernels.h.
#pragma once

#include <cstddef>
#include <cstdint>

#include "xsa/ops/args.h"
#include "xsa/ops/attention.h"
#include "xsa/ops/bf16.h"

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

#include "xsa/ops/kernels.h"

}  // namespace xsa::ops

// The kernels of XSA's rivals (docs/SPEC.md §8) that are not part of the attention itself:
// gated-attn's output gate and the value residual's mixing, forward beside backward. no-self is a
// mask of the attention kernels (AttentionArgs::no_self). Elementwise and memory-bound: plain
// loops at the baseline level, summed in a fixed order.
#pragma once

#include <cstddef>

#include "xsa/ops/args.h"

namespace xsa::ops {

// out = u ⊙ σ(pre), n values.
template <typename Real>
void output_gate_forward(Real* out, const Real* u, const Real* pre, size_t n);
// d_u = d_out ⊙ σ(pre), d_pre = d_out ⊙ u ⊙ σ(pre) (1 − σ(pre)); d_pre may be d_out.
template <typename Real>
void output_gate_backward(Real* d_u, Real* d_pre, const Real* d_out, const Real* u, const Real* pre,
                          size_t n);

// dst row r (dst_stride apart) += the first `width` values of src row r (src_stride apart): the
// second contribution to a gradient another op wrote (gated-attn's to ∂L/∂LN1(x), the later
// layers' to the first layer's values).
template <typename Real>
void add_rows(Real* dst, size_t dst_stride, const Real* src, size_t src_stride, int rows,
              int width);

template <typename Real>
void value_mix_forward(const ValueMixArgs<Real>& args);
template <typename Real>
void value_mix_backward(const ValueMixArgs<Real>& args);

}  // namespace xsa::ops

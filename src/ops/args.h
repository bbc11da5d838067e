// The argument structs of the kernel families with more operands than a call should list: shared
// by the kernels of ops/ and the backend's table (backend/backend.h), so that both take the same
// struct and a backend forwards it as it is.
#pragma once

namespace xsa::ops {

// A matrix product's shape: inp [N, in_dim], weight [out_dim, in_dim] (nn.Linear's layout), out
// [N, out_dim].
struct MatmulShape {
  int N = 0, in_dim = 0, out_dim = 0;
};

// LayerNorm over rows of C: the forward reads inp, weight and bias and writes the row statistics
// mean and rstd [N]; the backward reads all of them.
template <typename Real>
struct LayerNormArgs {
  const Real* inp = nullptr;
  const Real* weight = nullptr;
  const Real* bias = nullptr;
  Real* mean = nullptr;
  Real* rstd = nullptr;
  int N = 0, C = 0;
};

// Rotary positions for the q and k parts of qkv rows [B, T, C + 2·Hkv·D]: the table cos, sin
// [T, D/2] (rope_table), H query heads of C / H, Hkv key/value heads (0: H).
template <typename Real>
struct RopeArgs {
  const Real* cos = nullptr;
  const Real* sin = nullptr;
  int B = 1, T = 0, C = 0, H = 0, Hkv = 0;
};

}  // namespace xsa::ops

namespace xsa::ops {

// ResFormer's value residual (docs/SPEC.md §8) on the v columns [at, at + width) of qkv rows
// [N, ld]. Forward: v' = λ v + (1 − λ) v_first in place, v kept in v_raw. Backward, from dv' in
// dqkv's v columns: dλ += Σ dv'·(v − v_first), d_first (+)= (1 − λ) dv', dv' ← λ dv' in place.
template <typename Real>
struct ValueMixArgs {
  Real* qkv = nullptr;
  Real* v_raw = nullptr;          // [N, width] the layer's own values
  const Real* v_first = nullptr;  // [N, width] the first layer's values
  const Real* lambda = nullptr;   // [1]
  int N = 0, ld = 0, at = 0, width = 0;
  // Backward only.
  Real* dqkv = nullptr;
  Real* d_first = nullptr;        // [N, width]
  bool accumulate_first = false;  // d_first accumulates (else it is written)
  Real* dlambda = nullptr;        // [1] accumulates
};

}  // namespace xsa::ops

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

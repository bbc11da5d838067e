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

namespace xsa::ops {

// QK-norm: RMSNorm of each query and key head before RoPE, x̂ = x / √(mean(x²) + 1e-6), written
// back as x̂ ⊙ g with one learned scale per head dimension (q_scale for the H query heads, k_scale
// for the Hkv key heads; shared by the heads, as OLMo 2 and Gemma 3). qkv rows [N, ld] hold q at
// columns [0, H·D) and k at [H·D, (H + Hkv)·D), so a row's q and k are H + Hkv heads of D in a row.
// Forward: in place; raw [N, (H + Hkv)·D] keeps q and k as they came and rstd [N, H + Hkv] each
// head's 1/√(mean(x²) + eps) (both null: nothing kept, inference). Backward, from ∂L/∂(x̂ ⊙ g) in
// dqkv's q and k columns: dq_scale, dk_scale [D] accumulate Σ ∂L/∂out ⊙ x̂ (summed in fixed row
// chunks, so the thread count changes nothing), and dqkv's q and k become
// ∂L/∂x = rstd (d̂ − x̂ mean(d̂ ⊙ x̂)), d̂ = ∂L/∂out ⊙ g, in place.
template <typename Real>
struct QkNormArgs {
  Real* qkv = nullptr;
  Real* raw = nullptr;
  Real* rstd = nullptr;
  const Real* q_scale = nullptr;
  const Real* k_scale = nullptr;
  int N = 0, ld = 0, H = 0, Hkv = 0, D = 0;
  // Backward only.
  Real* dqkv = nullptr;
  Real* dq_scale = nullptr;
  Real* dk_scale = nullptr;
};
inline constexpr double kQkNormEps = 1e-6;

}  // namespace xsa::ops

namespace xsa::ops {

// Muon (docs/SPEC.md §11) on one matrix of the parameters, a step's settings: the momentum β, the
// clipping's factor on the gradient, the decoupled weight decay's factor 1 − ηλ and the update's
// step η · max(1, rows/cols)^½.
struct MuonSettings {
  double momentum = 0.95;
  double grad_scale = 1;
  double keep = 1;
  double step = 0;
};

// One Newton–Schulz step's polynomial: X ← a X + (b A + c A²) X, A = X Xᵀ (the quintic of
// Jordan et al., as modded-nanogpt and nanochat run it, 5 steps).
struct NewtonSchulzCoefficients {
  double a = 3.4445, b = -4.7750, c = 2.0315;
};
inline constexpr int kNewtonSchulzSteps = 5;

// The Newton–Schulz iteration on `count` matrices of one shape, x [count, rows, cols]: U on entry,
// the orthogonalised O on return, each matrix on its own. Scratch: next [count, rows, cols], and
// gram, gram2, poly [count, k, k] with k = min(rows, cols) (a matrix with more rows than columns
// iterates on XᵀX, as its transpose would on X Xᵀ). A backend may run the matrices side by side.
template <typename Real>
struct NewtonSchulzArgs {
  Real* x = nullptr;
  Real* next = nullptr;
  Real* gram = nullptr;
  Real* gram2 = nullptr;
  Real* poly = nullptr;
  int rows = 0, cols = 0;
  int count = 1;
  size_t size() const { return (size_t)rows * cols; }
  size_t gram_size() const {
    const size_t k = rows < cols ? rows : cols;
    return k * k;
  }
  // The i-th matrix alone.
  NewtonSchulzArgs one(int i) const {
    NewtonSchulzArgs a = *this;
    a.x += i * size(), a.next += i * size();
    a.gram += i * gram_size(), a.gram2 += i * gram_size(), a.poly += i * gram_size();
    a.count = 1;
    return a;
  }
};

}  // namespace xsa::ops

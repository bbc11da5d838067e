// The fused attention kernel on its own: causal softmax(q kᵀ/√D) v in flash-style tiles (O(T)
// memory, no T×T buffer), with standard (SA) or exclusive (XSA) output, a learned gate per head
// (gated XSA), a learned sink logit per head, and grouped-query attention. One parameter struct
// serves the forward, the backward and the forward over a key/value cache. docs/SPEC.md §2 gives
// the math.
//
// Layout: qkv [B, T, C + 2·Hkv·D] holds per token q (C = H·D columns, head h at h·D), then k and v
// (Hkv·D columns each, kv head g at g·D); query head h reads kv head h / (H / Hkv). y, z and d_out
// are [B, T, C] (heads side by side); lse is [B, H, T], the row log-sum-exp of the scaled scores.
#pragma once

#include <cstddef>

#include "xsa/ops/tensor.h"

namespace xsa::ops {

template <typename Real>
struct AttentionArgs {
  int B = 1, T = 0;  // sequences and tokens per sequence (the cached forward: B = 1, T = new rows)
  int C = 0, H = 0;  // query width and heads; head size D = C / H
  int Hkv = 0;       // key/value heads (grouped-query attention); 0: Hkv = H
  bool exclusive = false;  // XSA: z = y − α_h (y·u) u with u = v / ‖v‖ the token's own value
  // no-self (docs/SPEC.md §8): token i sees the keys j < i only; a token that sees no key (the
  // first, without a sink) gets y = 0 and lse = −∞.
  bool no_self = false;
  const Real* qkv = nullptr;
  Real* y = nullptr;  // forward output; the backward reads it
  // Forward output of XSA, [B, T, C] (may alias nothing else); given to the backward, it is
  // written again there (the forward's bits). Stored bf16 (float only) when only W_o's products
  // read it: a product input (backend.h).
  Tensor<Real> z = {};
  Real* lse = nullptr;  // forward output; the backward reads it (unused by the cached forward)
  const Real* alpha = nullptr;  // [H] gated XSA: α_h; null means α = 1 (plain XSA)
  const Real* sink = nullptr;   // [H] a sink logit b_h joining every row's softmax (value zero)
  // Backward only.
  Real* dqkv = nullptr;     // [B, T, C + 2·Hkv·D] accumulates ∂L/∂q, ∂L/∂k, ∂L/∂v
  bool write_dqkv = false;  // dqkv is written, not accumulated into: it may hold anything
  Real* d_out = nullptr;    // ∂L/∂y, or with XSA ∂L/∂z, turned into ∂L/∂y in place
  Real* dalpha = nullptr;   // [B·T, H] with alpha: each token's ∂L/∂α_h (overwritten)
  Real* dsink = nullptr;    // [B, H] with sink: ∂L/∂b_h = −Σ_rows p_sink D_i per sequence
};

// Inference over a key/value cache. k and v [slots, Hkv·D] hold every key (after RoPE) and value;
// the args' T new rows (q after RoPE in qkv) have already written theirs at slots slot0 + r. Every
// row sees the slots [0, prefix); with spans null it then sees [prefix, slot0 + r] (one sequence
// continuing the cache). With spans, row r sees instead its parent segment [parent_begin,
// parent_end) and its own segment [first, slot0 + r]: several sequences side by side, e.g. the
// choices of a multiple-choice question each after the question. XSA removes each row's own value.
struct SlotSpan {
  int parent_begin = 0, parent_end = 0;  // empty: no parent
  int first = 0;                         // where the row's own segment begins
};
template <typename Real>
struct KvCache {
  const Real* k = nullptr;
  const Real* v = nullptr;
  int prefix = 0, slot0 = 0;
  const SlotSpan* spans = nullptr;  // [T] or null
};

}  // namespace xsa::ops

// The attention kernels themselves (attention_forward, attention_backward,
// attention_forward_cached) are declared with the others from src/ops/op_list.txt, through
// ops/ops.h: included last here, so that either header may come first.
#include "xsa/ops/ops.h"

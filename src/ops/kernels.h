// Every kernel of ops/, listed once: XSA_REAL_KERNELS (templated on float/double) and
// XSA_FLOAT_KERNELS (float only: mixed precision, the FMA yardstick), each entry
// X(return type, name, (parameters with their defaults), (the names that pass them on)).
// From the lists come (ops/ops.h) each level's declarations (xsa::ops::baseline and
// xsa::ops::avx512, the kernel files compiled once per level: ops/kernel_level.h), each level's
// kernels as a struct of static functions (BaselineKernels, Avx512Kernels: what the CPU backend
// is built on, one per level, so its calls reach their kernels without a branch), and the
// xsa::ops functions tests and tools call, which run the level util/cpu.h chose at the call.
// The types they name (AttentionArgs, KvCache, AdamWSettings, bf16) come from ops/ops.h.
//
// Conventions (as in llm.c): outputs first, then inputs, then sizes. Shapes are given per pointer,
// row-major. N = B*T rows. Activation gradients overwrite, except where a comment says
// "accumulates" (the residual stream and parameter gradients).
#pragma once

#define XSA_REAL_KERNELS(X)                                                                             \
  /* ---- matmul.cpp: y = x · Wᵀ with W stored [out, in] like nn.Linear (oneDNN or the */            \
  /* BLAS) ---- */                                                                                      \
  /* out [N, out_dim] = inp [N, in_dim] · weightᵀ; with accumulate, out += instead of =. */          \
  X(void, matmul_forward,                                                                               \
    (Real * out, const Real* inp, const Real* weight, int N, int in_dim, int out_dim,                   \
     bool accumulate = false),                                                                          \
    (out, inp, weight, N, in_dim, out_dim, accumulate))                                                 \
  /* dinp [N, in_dim] = dout · weight (overwrite; skipped when dinp is null); dweight */               \
  /* [out_dim, in_dim] accumulates doutᵀ · inp, or is overwritten by it (accumulate false: a */      \
  /* step's first contribution, so that the gradients need no zeroing and are not read */               \
  /* first). */                                                                                         \
  X(void, matmul_backward,                                                                              \
    (Real * dinp, Real * dweight, const Real* dout, const Real* inp, const Real* weight,                \
     MatmulShape shape, bool accumulate = true),                                                        \
    (dinp, dweight, dout, inp, weight, shape, accumulate))                                              \
  /* out [N, D] += bias [D] on every row (linear layers with biases, as GPT-2's). */                    \
  X(void, bias_forward, (Real * out, const Real* bias, int N, int D), (out, bias, N, D))                \
  /* dbias [D] accumulates Σ_n dout [N, D], rows in order (the thread count changes nothing). */       \
  X(void, bias_backward, (Real * dbias, const Real* dout, int N, int D), (dbias, dout, N, D))           \
  /* ---- encoder.cpp: token embedding, and rows copied between strided layouts ---- */                 \
  /* dst row r (dst_stride apart) = the first `width` values of src row r (src_stride apart). */        \
  X(void, copy_rows,                                                                                    \
    (Real * dst, size_t dst_stride, const Real* src, size_t src_stride, int rows, int width),           \
    (dst, dst_stride, src, src_stride, rows, width))                                                    \
  /* out [N, C] = wte[tokens[n]] */                                                                     \
  X(void, encoder_forward, (Real * out, const int32_t* tokens, const Real* wte, int N, int C),          \
    (out, tokens, wte, N, C))                                                                           \
  /* dwte [V, C] accumulates dout rows at their tokens. */                                              \
  X(void, encoder_backward, (Real * dwte, const Real* dout, const int32_t* tokens, int N, int C),       \
    (dwte, dout, tokens, N, C))                                                                         \
  /* out [N, C] += table[index[n]] (learned positions: table wpe, index the positions); its */          \
  /* backward is encoder_backward with the same index. */                                               \
  X(void, embedding_add, (Real * out, const int32_t* index, const Real* table, int N, int C),           \
    (out, index, table, N, C))                                                                          \
  /* ---- layernorm.cpp ---- */                                                                         \
  /* out [N, C], mean [N], rstd [N] from inp [N, C], weight [C], bias [C]; eps 1e-5. */                 \
  X(void, layernorm_forward,                                                                            \
    (Real * out, Real * mean, Real * rstd, const Real* inp, const Real* weight, const Real* bias,       \
     int N, int C),                                                                                     \
    (out, mean, rstd, inp, weight, bias, N, C))                                                         \
  /* dinp [N, C] accumulates (it is the residual stream); dweight, dbias [C] accumulate; the */         \
  /* forward's arguments, its statistics in them. */                                                    \
  X(void, layernorm_backward,                                                                           \
    (Real * dinp, Real * dweight, Real * dbias, const Real* dout,                                       \
     const LayerNormArgs<Real>& args),                                                                  \
    (dinp, dweight, dbias, dout, args))                                                                 \
  /* ---- rope.cpp: rotary positions, rotate-half pairing (j with j + D/2) over the whole */            \
  /* head ---- */                                                                                       \
  /* cos, sin [T, D/2]: angle(t, j) = t · theta^(-2j/D), computed in double. */                        \
  X(void, rope_table, (Real * cos, Real * sin, int T, int D, double theta),                             \
    (cos, sin, T, D, theta))                                                                            \
  /* Rotates q and k of qkv [B, T, 3C] in place (v untouched). Position of row (b, t) is t. */          \
  X(void, rope_forward, (Real * qkv, const RopeArgs<Real>& args), (qkv, args))                          \
  /* dqkv [B, T, 3C]: the q and k parts are rotated back in place (the transpose rotation). */          \
  X(void, rope_backward, (Real * dqkv, const RopeArgs<Real>& args), (dqkv, args))                       \
  /* ---- qk_norm.cpp: QK-norm, RMSNorm of each q and k head before RoPE (QkNormArgs) ---- */           \
  X(void, qk_norm_forward, (const QkNormArgs<Real>& args), (args))                                      \
  X(void, qk_norm_backward, (const QkNormArgs<Real>& args), (args))                                     \
  /* ---- attention.cpp: causal attention with SA, XSA, gated XSA, sinks, GQA */                        \
  /* (ops/attention.h) ---- */                                                                          \
  /* The forward: y and lse (and z with XSA) from qkv. With tile_products bf16 (float only, */          \
  /* mixed precision: AVX512_BF16, which the bf16 backend checked) the tile products take */            \
  /* bf16 inputs and accumulate in fp32; the online softmax, the row statistics and the */              \
  /* accumulated outputs and gradients stay fp32. */                                                    \
  X(void, attention_forward,                                                                            \
    (const AttentionArgs<Real>& args, Storage tile_products = Storage::fp32),                           \
    (args, tile_products))                                                                              \
  /* The backward: probabilities recomputed from qkv and lse; see the fields for what it */             \
  /* writes. Every task owns one (sequence, kv head), so the result does not depend on the */           \
  /* thread count. */                                                                                   \
  X(void, attention_backward,                                                                           \
    (const AttentionArgs<Real>& args, Storage tile_products = Storage::fp32),                           \
    (args, tile_products))                                                                              \
  /* Inference over a key/value cache (KvCache above). */                                               \
  X(void, attention_forward_cached, (const AttentionArgs<Real>& args, const KvCache<Real>& cache),      \
    (args, cache))                                                                                      \
  /* ---- xsa.cpp: the exclusive step z = y − (y·u) u, u = v/max(‖v‖, 1e-6), per token and */    \
  /* head ---- */                                                                                       \
  /* (row functions in ops/xsa_row.h; the cached attention applies them per row, the tiled */           \
  /* kernels */                                                                                         \
  /* call these batch forms in a separate pass, docs/perf-log.md #3) The attention's */                 \
  /* arguments (ops/attention.h) name the step's tensors: args.z [B, T, C], in its storage */           \
  /* (bf16, float only: each z rounded as it is written, a product input), from args.y and */           \
  /* the v part of args.qkv, gated by args.alpha [H] where given. z may alias y. */                     \
  X(void, xsa_forward, (const AttentionArgs<Real>& args), (args))                                       \
  /* args.d_out holds g = ∂L/∂z [B, T, C] and becomes ∂L/∂y = g − (g·u) u in place; the v */ \
  /* part of args.dqkv accumulates the own-value gradient (with args.write_dqkv, a kv group's */        \
  /* first head writes it). With alpha, args.dalpha [B·T, H] receives each token's ∂L/∂α_h = */   \
  /* −s (g·u) */                                                                                     \
  /* (overwritten). With args.z, the forward's z is written again on the way (xsa_forward's */          \
  /* bits, */                                                                                           \
  /* from the rows of y and v this pass has in cache anyway). */                                        \
  X(void, xsa_backward, (const AttentionArgs<Real>& args), (args))                                      \
  /* ---- rivals.cpp: XSA's rivals outside the attention (docs/SPEC.md §8; no-self is a mask */        \
  /* of the attention kernels, AttentionArgs::no_self), forward beside backward; elementwise, */        \
  /* plain loops summed in a fixed order ---- */                                                        \
  /* gated-attn's gate: out = u ⊙ σ(pre), n values. */                                               \
  X(void, output_gate_forward, (Real * out, const Real* u, const Real* pre, size_t n),                  \
    (out, u, pre, n))                                                                                   \
  /* d_u = d_out ⊙ σ(pre), d_pre = d_out ⊙ u ⊙ σ(pre) (1 − σ(pre)); d_pre may be d_out. */   \
  X(void, output_gate_backward,                                                                         \
    (Real * d_u, Real * d_pre, const Real* d_out, const Real* u, const Real* pre, size_t n),            \
    (d_u, d_pre, d_out, u, pre, n))                                                                     \
  /* dst row r (dst_stride apart) += the first `width` values of src row r (src_stride apart): */       \
  /* the second contribution to a gradient another op wrote (gated-attn's to ∂L/∂LN1(x), the */     \
  /* later layers' to the first layer's values). */                                                     \
  X(void, add_rows,                                                                                     \
    (Real * dst, size_t dst_stride, const Real* src, size_t src_stride, int rows, int width),           \
    (dst, dst_stride, src, src_stride, rows, width))                                                    \
  /* The value residual's mixing (ValueMixArgs). */                                                     \
  X(void, value_mix_forward, (const ValueMixArgs<Real>& args), (args))                                  \
  X(void, value_mix_backward, (const ValueMixArgs<Real>& args), (args))                                 \
  /* ---- gelu.cpp: the MLP's activations, GELU (tanh approximation) and ReLU² ---- */                 \
  X(void, gelu_forward, (Real * out, const Real* inp, size_t n), (out, inp, n))                         \
  /* dinp = gelu'(inp) · dout (overwrite). */                                                          \
  X(void, gelu_backward, (Real * dinp, const Real* inp, const Real* dout, size_t n),                    \
    (dinp, inp, dout, n))                                                                               \
  /* out = relu(x)² (docs/SPEC.md §11); dinp = 2 relu(x) · dout, dinp may be dout. */                \
  X(void, relu2_forward, (Real * out, const Real* inp, size_t n), (out, inp, n))                        \
  X(void, relu2_backward, (Real * dinp, const Real* inp, const Real* dout, size_t n),                   \
    (dinp, inp, dout, n))                                                                               \
  /* ---- crossentropy.cpp: fused softmax + cross-entropy over the real vocabulary ---- */              \
  /* logits [N, Vp] with V real columns (padded columns never win). losses [N] = −log */              \
  /* p[target]; rows whose target is −1 get loss 0. When dloss != 0 the logits are replaced */        \
  /* by their gradient (p − onehot(target)) · dloss (0 on padded columns and ignored rows). */       \
  X(void, crossentropy_forward_backward,                                                                \
    (Real * logits, Real * losses, const int32_t* targets, int N, int V, int Vp, Real dloss),           \
    (logits, losses, targets, N, V, Vp, dloss))                                                         \
  /* Soft-capping (docs/SPEC.md §11): the V real columns of logits [N, Vp] become */                   \
  /* cap · tanh(x / cap) in place (before sampling and scoring). */                                    \
  X(void, softcap_forward, (Real * logits, int N, int V, int Vp, Real cap),                             \
    (logits, N, V, Vp, cap))                                                                            \
  /* crossentropy_forward_backward of the capped logits (capped in place first), the cap's */           \
  /* derivative (1 − (c/cap)²) in the gradient. */                                                   \
  X(void, crossentropy_softcap,                                                                         \
    (Real * logits, Real * losses, const int32_t* targets, int N, int V, int Vp, Real dloss,            \
     Real cap),                                                                                         \
    (logits, losses, targets, N, V, Vp, dloss, cap))                                                    \
  /* ---- muon.cpp: Muon's elementwise steps (docs/SPEC.md §11) ---- */                                \
  /* m ← β m + (1 − β) g, u = (1 − β) g + β m (Nesterov), g the gradient times grad_scale. */ \
  X(void, muon_momentum, (Real * m, Real * u, const Real* grad, size_t n, const MuonSettings& s),       \
    (m, u, grad, n, s))                                                                                 \
  /* poly [k, k] = b gram + c gram2 + a I: one Newton–Schulz step's matrix. */                        \
  X(void, newton_schulz_poly,                                                                           \
    (Real * poly, const Real* gram, const Real* gram2, int k, const NewtonSchulzCoefficients& c),       \
    (poly, gram, gram2, k, c))                                                                          \
  /* w = w · keep − step · o (o may be w). */                                                       \
  X(void, muon_apply, (Real * w, const Real* o, size_t n, const MuonSettings& s), (w, o, n, s))         \
  /* ---- adamw.cpp ---- */                                                                             \
  /* Decoupled AdamW as torch.optim.AdamW: p *= 1 − lr·wd; m, v moments; bias-corrected */           \
  /* update. With bf16_copy (mixed precision's copy of the weights) each updated value is */            \
  /* also written there, rounded to bf16, in the same pass. */                                          \
  X(void, adamw_update,                                                                                 \
    (Real * param, const Real* grad, Real* m, Real* v, size_t n, const AdamWSettings& s,                \
     uint16_t* bf16_copy = nullptr),                                                                    \
    (param, grad, m, v, n, s, bf16_copy))                                                               \
  /* Σ g² in double, summed in fixed chunks so the result does not depend on the thread */            \
  /* count. */                                                                                          \
  X(double, sum_of_squares, (const Real* x, size_t n), (x, n))

#define XSA_FLOAT_KERNELS(X)                                                                      \
  /* ---- bf16 product inputs (mixed precision, ops/matmul_bf16.h): written rounded as */         \
  /* produced ---- */                                                                             \
  /* convert.cpp: round_to_bf16 over an array, split across the threads when it is large and */   \
  /* no parallel region is running; and back, exactly. */                                         \
  X(void, to_bf16, (const float* x, bf16* out, size_t n), (x, out, n))                            \
  X(void, from_bf16, (const bf16* x, float* out, size_t n), (x, out, n))                          \
  /* crossentropy_forward_backward (ops.h) whose gradient (p − onehot)·dloss goes, rounded, */ \
  /* into grad [N, Vp]; the logits are only read (their memory is not written back) and each */   \
  /* row's gradient is rounded while its exps are in cache, which saves two passes over the */    \
  /* chunk. */                                                                                    \
  X(void, crossentropy_forward_backward_bf16,                                                     \
    (float* logits, bf16* grad, float* losses, const int32_t* targets, int N, int V, int Vp,      \
     float dloss),                                                                                \
    (logits, grad, losses, targets, N, V, Vp, dloss))                                             \
  /* Producers of product inputs: layernorm_forward and gelu_forward (ops.h) with their */        \
  /* outputs, which only products read, rounded to bf16 as they are written (the products' */     \
  /* input conversions done once, in the producer's pass). The same bits as the fp32 op's */      \
  /* output through to_bf16. */                                                                   \
  X(void, layernorm_forward_bf16,                                                                 \
    (bf16 * out, float* mean, float* rstd, const float* inp, const float* weight,                 \
     const float* bias, int N, int C),                                                            \
    (out, mean, rstd, inp, weight, bias, N, C))                                                   \
  X(void, gelu_forward_bf16, (bf16 * out, const float* inp, size_t n), (out, inp, n))             \
  /* And gradients that only products read: gelu_backward's and rope_backward's (ops.h) */        \
  /* written rounded to bf16 into out (not in place); rope_backward_bf16 rounds each row's v */   \
  /* beside its rotated q and k. */                                                               \
  X(void, gelu_backward_bf16, (bf16 * dinp, const float* inp, const float* dout, size_t n),       \
    (dinp, inp, dout, n))                                                                         \
  X(void, rope_backward_bf16, (bf16 * out, const float* dqkv, const RopeArgs<float>& args),       \
    (out, dqkv, args))                                                                            \
  /* ---- fma_peak.cpp: the yardstick of xsa bench ---- */                                        \
  /* The fp32 FMA peak of this CPU at the running level's widest vectors (AVX2's 256 bits, */     \
  /* AVX-512's 512), on every thread of an OpenMP team, in GFLOP/s: independent FMA chains, */    \
  /* measured (~0.6 s). */                                                                        \
  X(double, fma_peak_gflops, (), ())

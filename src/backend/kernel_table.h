// The backend's kernel table, written once: every op of the model's forward and backward, the
// optimizer and the reductions, with its family (for supports() and refusals), its return type,
// its parameters and the names that pass them on. From this list come the Backend's pure virtual
// entries (backend.h), every forwarding backend (forwarding_backend.h: the isolated device, the
// tests' one-thread-products and recording backends) and the op-test table's coverage check
// (tests/backend_ops_test.cpp: an entry no row calls fails it), and the CPU backend's plain entries
// (P below). Every other entry a backend writes itself (CUDA's: all of them), and the compiler
// lists those it lacks.
//
// An X-macro rather than a generated header or a typed table: the entries are C++ signatures that
// the compiler checks where they are written, nothing runs at build time, and a reader sees each
// entry with its comment. Kept in a header of its own so a new op is one line here.
//
// X(family, return type, name, (parameters), (arguments)); `Real` is the backend's float type.
// P(...) marks a plain entry: no storage to choose, so a backend on the CPU's kernels runs it as
// the ops/ kernel of the same name and arguments (ops/kernels.h), and the CPU backend's entry is
// generated from this line (cpu_backend.cpp). X entries each backend writes itself.
// Conventions: device pointers, except token ids (inputs, targets), which stay on the host: a
// device backend copies the B·T ids itself. Sizes and layouts as in ops/ops.h.
//
// Precision is data: an activation that only matrix products read (a product input: LayerNorm's
// and GELU's outputs, XSA's z, the gradients of GELU's and RoPE's inputs where no bias reads
// them) comes as a Tensor whose storage the model's activation plan declared (model/block.h):
// fp32, or bf16 in the first half of its buffer, written so by its producer and read so by the
// products. supports() says which storage each op family takes; an op given one it does not take
// refuses in one line (refuse_unsupported), so no backend or wrapper runs a plainer path instead.
#pragma once

#define XSA_KERNEL_ENTRIES(X, P)                                                                      \
  /* out [N, out_dim] = inp · weightᵀ (+= with accumulate). */                                     \
  X(matmul, void, matmul_forward,                                                                     \
    (Real * out, Tensor<const Real> inp, const Real* weight, MatmulShape shape, bool accumulate),     \
    (out, inp, weight, shape, accumulate))                                                            \
  /* out = residual + inp · weightᵀ, a residual connection (out may be residual). A backend that   \
     can add the residual inside the product (oneDNN's binary post-op) saves a copy. */               \
  X(matmul, void, matmul_forward_residual,                                                            \
    (Real * out, const Real* residual, Tensor<const Real> inp, const Real* weight,                    \
     MatmulShape shape),                                                                              \
    (out, residual, inp, weight, shape))                                                              \
  /* dinp = dout · W; dweight accumulates doutᵀ · inp, or with accumulate false is overwritten (a \
     step's first contribution). Either may be null: that product is skipped (inp unread without      \
     dweight). */                                                                                     \
  X(matmul, void, matmul_backward,                                                                    \
    (Real * dinp, Real * dweight, Tensor<const Real> dout, Tensor<const Real> inp,                    \
     const Real* weight, MatmulShape shape, bool accumulate),                                         \
    (dinp, dweight, dout, inp, weight, shape, accumulate))                                            \
  P(bias, void, bias_forward, (Real * out, const Real* bias, int N, int D), (out, bias, N, D))        \
  P(bias, void, bias_backward, (Real * dbias, const Real* dout, int N, int D),                        \
    (dbias, dout, N, D))                                                                              \
  P(embedding, void, encoder_forward,                                                                 \
    (Real * out, const int32_t* tokens, const Real* wte, int N, int C), (out, tokens, wte, N, C))     \
  P(embedding, void, embedding_add,                                                                   \
    (Real * out, const int32_t* index, const Real* table, int N, int C),                              \
    (out, index, table, N, C))                                                                        \
  P(embedding, void, encoder_backward,                                                                \
    (Real * dwte, const Real* dout, const int32_t* tokens, int N, int C),                             \
    (dwte, dout, tokens, N, C))                                                                       \
  /* out [N, C] (in the args' mean and rstd the row statistics) from the args' input. */              \
  X(layernorm, void, layernorm_forward, (Tensor<Real> out, const LayerNormArgs<Real>& args),          \
    (out, args))                                                                                      \
  /* dinp [N, C] accumulates; dweight, dbias [C] accumulate; the forward's args, its statistics in    \
     them. */                                                                                         \
  P(layernorm, void, layernorm_backward,                                                              \
    (Real * dinp, Real * dweight, Real * dbias, const Real* dout,                                     \
     const LayerNormArgs<Real>& args),                                                                \
    (dinp, dweight, dbias, dout, args))                                                               \
  P(rope, void, rope_table, (Real * cos, Real * sin, int T, int D, double theta),                     \
    (cos, sin, T, D, theta))                                                                          \
  P(rope, void, rope_forward, (Real * qkv, const RopeArgs<Real>& args), (qkv, args))                  \
  /* dqkv's rows with their q and k parts rotated back, into out: dqkv itself (in place), or          \
     another buffer (as bf16: of at least N·(C + 2·Hkv·D)/2 floats; a product input). */           \
  X(rope, void, rope_backward, (Tensor<Real> out, Real * dqkv, const RopeArgs<Real>& args),           \
    (out, dqkv, args))                                                                                \
  /* QK-norm (ops::QkNormArgs): RMSNorm of the q and k heads before RoPE, and its backward. */        \
  P(qk_norm, void, qk_norm_forward, (const ops::QkNormArgs<Real>& args), (args))                      \
  P(qk_norm, void, qk_norm_backward, (const ops::QkNormArgs<Real>& args), (args))                     \
  /* z (the args' z; the attention writes it too) from the args' y and qkv, with their alpha. */      \
  X(attention, void, xsa_forward, (const ops::AttentionArgs<Real>& args), (args))                     \
  X(attention, void, attention_forward, (const ops::AttentionArgs<Real>& args), (args))               \
  X(attention, void, attention_backward, (const ops::AttentionArgs<Real>& args), (args))              \
  X(attention, void, attention_forward_cached,                                                        \
    (const ops::AttentionArgs<Real>& args, const ops::KvCache<Real>& cache), (args, cache))           \
  X(gelu, void, gelu_forward, (Tensor<Real> out, const Real* inp, size_t n), (out, inp, n))           \
  /* dinp = gelu'(inp) · dout; dinp may be dout (fp32), or another buffer (bf16). */                 \
  X(gelu, void, gelu_backward, (Tensor<Real> dinp, const Real* inp, const Real* dout, size_t n),      \
    (dinp, inp, dout, n))                                                                             \
  /* ReLU² (--mlp relu2), fp32: out = relu(x)², dinp = 2 relu(x) · dout (dinp may be dout). */     \
  P(gelu, void, relu2_forward, (Real * out, const Real* inp, size_t n), (out, inp, n))                \
  P(gelu, void, relu2_backward, (Real * dinp, const Real* inp, const Real* dout, size_t n),           \
    (dinp, inp, dout, n))                                                                             \
  P(crossentropy, void, crossentropy_forward_backward,                                                \
    (Real * logits, Real * losses, const int32_t* targets, int N, int V, int Vp, Real dloss),         \
    (logits, losses, targets, N, V, Vp, dloss))                                                       \
  /* Soft-capping (--logit-softcap): logits' real columns ← cap · tanh(x / cap) in place, and the  \
     cross-entropy of capped logits with the cap's derivative in its gradient. */                     \
  P(crossentropy, void, softcap_forward, (Real * logits, int N, int V, int Vp, Real cap),             \
    (logits, N, V, Vp, cap))                                                                          \
  P(crossentropy, void, crossentropy_softcap,                                                         \
    (Real * logits, Real * losses, const int32_t* targets, int N, int V, int Vp, Real dloss,          \
     Real cap),                                                                                       \
    (logits, losses, targets, N, V, Vp, dloss, cap))                                                  \
  /* The tied classifier (ClassifierArgs): the product, the fused softmax-cross-entropy and with      \
     dloss ≠ 0 its backward; a backend may fuse them (classifier_by_ops runs them one by one). */   \
  X(classifier, void, classifier_forward_backward, (const ClassifierArgs<Real>& args), (args))        \
  /* XSA's per-head alpha (xsa-gated) and the sinks, their parameters. alpha [H] = tanh(w [H]). */    \
  X(xsa_alpha_and_sinks, void, xsa_alpha, (Real * alpha, const Real* w, int H), (alpha, w, H))        \
  /* dw [H] += (1 − α_h²) Σ_n dalpha [N, H], summed in row order. */                             \
  X(xsa_alpha_and_sinks, void, xsa_alpha_backward,                                                    \
    (Real * dw, const Real* dalpha, const Real* alpha, int N, int H), (dw, dalpha, alpha, N, H))      \
  /* dsink [H] += Σ_b dlogit [B, H], in order. */                                                    \
  X(xsa_alpha_and_sinks, void, sink_backward, (Real * dsink, const Real* dlogit, int B, int H),       \
    (dsink, dlogit, B, H))                                                                            \
  /* XSA's rivals (docs/SPEC.md §8; no-self is the attention's AttentionArgs::no_self).              \
     gated-attn's gate: out = u ⊙ σ(pre), n values. */                                             \
  P(rivals, void, output_gate_forward, (Real * out, const Real* u, const Real* pre, size_t n),        \
    (out, u, pre, n))                                                                                 \
  /* d_u = d_out ⊙ σ(pre), d_pre = d_out ⊙ u ⊙ σ(pre)(1 − σ(pre)); d_pre may be d_out. */  \
  P(rivals, void, output_gate_backward,                                                               \
    (Real * d_u, Real * d_pre, const Real* d_out, const Real* u, const Real* pre, size_t n),          \
    (d_u, d_pre, d_out, u, pre, n))                                                                   \
  /* dst row r (dst_stride apart) += the first `width` values of src row r (src_stride apart):        \
     a second contribution to rows another op wrote (value embeddings, the rivals' gradients). */     \
  P(embedding, void, add_rows,                                                                        \
    (Real * dst, size_t dst_stride, const Real* src, size_t src_stride, int rows, int width),         \
    (dst, dst_stride, src, src_stride, rows, width))                                                  \
  /* The value residual's mixing (ops::ValueMixArgs). */                                              \
  P(rivals, void, value_mix_forward, (const ops::ValueMixArgs<Real>& args), (args))                   \
  P(rivals, void, value_mix_backward, (const ops::ValueMixArgs<Real>& args), (args))                  \
  /* Reductions: in order, in double; the sum of squares thread-count independent. */                 \
  X(reductions, double, sum, (const Real* x, size_t n), (x, n))                                       \
  P(reductions, double, sum_of_squares, (const Real* x, size_t n), (x, n))                            \
  /* Muon (docs/SPEC.md §11): the momentum, the Newton–Schulz iteration on one matrix (its         \
     products the backend's own: newton_schulz_by_ops), its polynomial, and the update. */            \
  P(muon, void, muon_momentum,                                                                        \
    (Real * m, Real * u, const Real* grad, size_t n, const ops::MuonSettings& s),                     \
    (m, u, grad, n, s))                                                                               \
  X(muon, void, newton_schulz, (const ops::NewtonSchulzArgs<Real>& args), (args))                     \
  P(muon, void, newton_schulz_poly,                                                                   \
    (Real * poly, const Real* gram, const Real* gram2, int k,                                         \
     const ops::NewtonSchulzCoefficients& c),                                                         \
    (poly, gram, gram2, k, c))                                                                        \
  P(muon, void, muon_apply, (Real * w, const Real* o, size_t n, const ops::MuonSettings& s),          \
    (w, o, n, s))                                                                                     \
  /* Decoupled AdamW, one tensor. */                                                                  \
  P(adamw, void, adamw_update,                                                                        \
    (Real * param, const Real* grad, Real* m, Real* v, size_t n,                                      \
     const ops::AdamWSettings& settings),                                                             \
    (param, grad, m, v, n, settings))

// Every entry, whichever its letter.
#define XSA_KERNEL_TABLE(X) XSA_KERNEL_ENTRIES(X, X)

// Helpers for the X-macro's parenthesised lists.
#define XSA_UNPAREN(...) __VA_ARGS__
// The table's entries as pure virtual functions (the Backend class).
#define XSA_DECLARE_KERNEL(family, ret, name, params, args) virtual ret name params = 0;

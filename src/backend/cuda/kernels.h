// The CUDA backend's kernels, one family per file (forward beside backward), launched on a stream
// and returning at once. Every pointer is a device pointer; sizes and layouts are those of the CPU
// kernels in ops/ops.h and ops/attention.h, which the GPU tests hold these to. Everything a
// training step runs is deterministic (a fixed reduction order, no floating-point atomics), so a
// resumed run repeats the uninterrupted one bit for bit; attention's backward is deterministic when
// asked.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "xsa/ops/attention.h"
#include "xsa/ops/ops.h"

namespace xsa::cuda {

using bf16_bits = uint16_t;  // a bfloat16 as its bits (round to nearest even from float)

// ---- convert.cu ----
void to_bf16(bf16_bits* dst, const float* src, size_t n, cudaStream_t stream);

// ---- elementwise.cu: embeddings, biases, GELU, RoPE, AdamW, gates and sinks ----
// dst [n, width] = table rows index[0 … n) (index on the device).
void gather_rows(float* dst, const float* table, const int32_t* index, int n, int width,
                 cudaStream_t stream);
// out [N, C] (+)= table[index[n]]; with accumulate, adds (embedding_add), else overwrites
// (encoder_forward).
void embedding_forward(float* out, const int32_t* index, const float* table, int N, int C,
                       bool accumulate, cudaStream_t stream);
// dst row r (dst_stride apart) += the first `width` values of src row r (src_stride apart).
void add_rows(float* dst, size_t dst_stride, const float* src, size_t src_stride, int rows,
              int width, cudaStream_t stream);
// The deterministic embedding backward: the rows of dout are grouped by the table row they read
// (built on the host, where the token ids are). Group g adds, in order, the rows
// rows[starts[g] … starts[g+1]) of dout to dtable[table_row[g]].
void embedding_backward(float* dtable, const float* dout, const int32_t* rows,
                        const int32_t* starts, const int32_t* table_row, int groups, int C,
                        cudaStream_t stream);
void bias_forward(float* out, const float* bias, int N, int D, cudaStream_t stream);
// dbias [D] accumulates Σ_n dout [N, D]; scratch holds bias_backward_scratch(N, D) floats.
size_t bias_backward_scratch(int N, int D);
void bias_backward(float* dbias, const float* dout, int N, int D, float* scratch,
                   cudaStream_t stream);
void gelu_forward(float* out, const float* inp, size_t n, cudaStream_t stream);
void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n, cudaStream_t stream);
void relu2_forward(float* out, const float* inp, size_t n, cudaStream_t stream);
void relu2_backward(float* dinp, const float* inp, const float* dout, size_t n,
                    cudaStream_t stream);
// Muon's elementwise steps, as ops/muon.cpp.
void muon_momentum(float* m, float* u, const float* grad, size_t n, const ops::MuonSettings& s,
                   cudaStream_t stream);
void newton_schulz_poly(float* poly, const float* gram, const float* gram2, int k,
                        const ops::NewtonSchulzCoefficients& c, cudaStream_t stream);
void muon_apply(float* w, const float* o, size_t n, const ops::MuonSettings& s,
                cudaStream_t stream);
// The args' cos, sin [T, D/2] made on the host in double, as ops::rope_table.
void rope_forward(float* qkv, const ops::RopeArgs<float>& args, cudaStream_t stream);
void rope_backward(float* dqkv, const ops::RopeArgs<float>& args, cudaStream_t stream);
void adamw_update(float* param, const float* grad, float* m, float* v, size_t n,
                  const ops::AdamWSettings& settings, cudaStream_t stream);
void xsa_alpha(float* alpha, const float* w, int H, cudaStream_t stream);
// dw [H] += (1 − α_h²) Σ_n dalpha [N, H] (each head's sum in a fixed order).
void xsa_alpha_backward(float* dw, const float* dalpha, const float* alpha, int N, int H,
                        cudaStream_t stream);
// dsink [H] += Σ_b dlogit [B, H], b in order.
void sink_backward(float* dsink, const float* dlogit, int B, int H, cudaStream_t stream);

// ---- layernorm.cu ----
void layernorm_forward(float* out, const ops::LayerNormArgs<float>& args, cudaStream_t stream);
// The gradients of layernorm_backward: dinp accumulates; dweight, dbias accumulate through scratch
// (layernorm_backward_scratch floats) in a fixed order.
struct LayerNormGrads {
  float* dinp;
  float* dweight;
  float* dbias;
  float* scratch;
};
size_t layernorm_backward_scratch(int N, int C);
void layernorm_backward(const LayerNormGrads& grads, const float* dout,
                        const ops::LayerNormArgs<float>& args, cudaStream_t stream);

// ---- crossentropy.cu: as ops::crossentropy_forward_backward (targets on the device) ----
// With dlogits_bf16 non-null (and dloss ≠ 0) the gradient is written there in bf16 and the
// logits are left as they are. With softcap > 0 the real columns are read soft-capped
// (cap · tanh(x / cap)) and the gradient carries the cap's derivative (ops::crossentropy_softcap).
struct CrossEntropyArgs {
  float* logits;           // [N, Vp]
  float* losses;           // [N]
  const int32_t* targets;  // [N], on the device
  int N, V, Vp;
  float dloss;
  bf16_bits* dlogits_bf16;
  float softcap = 0;
};
// The real columns of logits [N, Vp] soft-capped in place.
void softcap_forward(float* logits, int N, int V, int Vp, float cap, cudaStream_t stream);
void crossentropy_forward_backward(const CrossEntropyArgs& args, cudaStream_t stream);

// ---- reduce.cu: sums in double, in a fixed order whatever the launch ----
size_t sum_scratch(size_t n);  // doubles
// Σ x (squares: Σ x²), written to *result (device) in double.
void sum(double* result, const float* x, size_t n, bool squares, double* scratch,
         cudaStream_t stream);

// ---- attention.cu: the fused flash-style attention with XSA (ops/attention.h) ----
// bf16_products: the tile products on tensor cores in bf16 with fp32 accumulation (the online
// softmax, the row statistics and the XSA projection in fp32); otherwise all in fp32.
void attention_forward(const ops::AttentionArgs<float>& args, bool bf16_products,
                       cudaStream_t stream);
size_t attention_backward_workspace(const ops::AttentionArgs<float>& args, bool deterministic);
// workspace: attention_backward_workspace(args, deterministic) floats. The kernels add into dqkv
// (dQ with atomics), so with args.write_dqkv it is zeroed first.
void attention_backward(const ops::AttentionArgs<float>& args, bool bf16_products,
                        bool deterministic, float* workspace, cudaStream_t stream);
// The cache's k, v and spans (when not null) are on the device.
void attention_forward_cached(const ops::AttentionArgs<float>& args,
                              const ops::KvCache<float>& cache, cudaStream_t stream);
// The args' z (fp32) from their y, qkv and alpha, as ops::xsa_forward.
void xsa_forward(const ops::AttentionArgs<float>& args, cudaStream_t stream);

}  // namespace xsa::cuda

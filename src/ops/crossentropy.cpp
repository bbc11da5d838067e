// Softmax and cross-entropy fused, computed row by row over the real vocabulary V; padded
// columns (V..Vp) are neither normalised over nor given gradient.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "xsa/ops/matmul_bf16.h"
#include "xsa/ops/ops.h"
#include "xsa/ops/parallel.h"
#include "xsa/ops/vmath.h"
#include "xsa/ops/vmath_avx512.h"
#include "xsa/util/cpu.h"

// clang-format off: after every other include (ops/kernel_level.h)
#include "xsa/ops/kernel_level.h"
// clang-format on

namespace xsa::ops::XSA_LEVEL {
namespace {

#if XSA_LEVEL_IS_AVX512
// The largest of x[0..n), NaNs passed over as max_of passes them (vmaxps returns its second
// operand when the first is NaN). The order of a maximum does not matter, so four accumulators.
XSA_AVX512_TARGET float row_max16(const float* x, int n) {
  __m512 m[4];
  for (auto& a : m) a = _mm512_set1_ps(x[0]);
  int j = 0;
  for (; j + 64 <= n; j += 64)
    for (int u = 0; u < 4; u++) m[u] = _mm512_max_ps(_mm512_loadu_ps(x + j + 16 * u), m[u]);
  for (; j < n; j += 16) {
    const __mmask16 k = first_lanes(n - j);
    m[0] = _mm512_mask_max_ps(m[0], k, _mm512_maskz_loadu_ps(k, x + j), m[0]);
  }
  return _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m[0], m[1]), _mm512_max_ps(m[2], m[3])));
}

// Σ_j exp(x_j − shift) over x[0..n), each exp also stored to e[j] unless e is null; the sum in four
// 16-lane accumulators, in a fixed order (the same bits on any thread count). Meanwhile
// `next_bytes` of `next` (the thread's next row) are fetched into L2, four cache lines per 64
// exps, so that its max pass reads from cache: this pass is bound by arithmetic, the max pass by
// memory, and this way the two overlap.
XSA_AVX512_TARGET float row_exp_sum16(const float* x, int n, float shift, float* e,
                                      const char* next, size_t next_bytes) {
  const __m512 s = _mm512_set1_ps(shift);
  __m512 acc[4];
  for (auto& a : acc) a = _mm512_setzero_ps();
  size_t fetched = 0;
  int j = 0;
  for (; j + 64 <= n; j += 64) {
    for (int u = 0; u < 4; u++) {
      const __m512 v = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + j + 16 * u), s));
      if (e) _mm512_storeu_ps(e + j + 16 * u, v);
      acc[u] = _mm512_add_ps(acc[u], v);
    }
    for (int u = 0; u < 4 && fetched < next_bytes; u++, fetched += 64)
      _mm_prefetch(next + fetched, _MM_HINT_T1);
  }
  for (; j < n; j += 16) {
    const __mmask16 k = first_lanes(n - j);
    const __m512 v =
        _mm512_maskz_mov_ps(k, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + j), s)));
    if (e) _mm512_mask_storeu_ps(e + j, k, v);
    acc[0] = _mm512_add_ps(acc[0], v);
  }
  return _mm512_reduce_add_ps(
      _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
}

// out[j] = e[j] · scale. (Masked stores only at the end: every one costs more than a plain one.)
XSA_AVX512_TARGET void scale16(const float* e, int n, float scale, float* out) {
  const __m512 c = _mm512_set1_ps(scale);
  int j = 0;
  for (; j + 16 <= n; j += 16) _mm512_storeu_ps(out + j, _mm512_mul_ps(_mm512_loadu_ps(e + j), c));
  if (j < n) {
    const __mmask16 k = first_lanes(n - j);
    _mm512_mask_storeu_ps(out + j, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, e + j), c));
  }
}

// out[j] = round_to_bf16(e[j] · scale); with `stream`, by streaming stores (from out's first
// 32-byte boundary on), which write whole lines without reading them in first and keep them out of
// the caches: for a gradient too large to stay there until the products read it.
XSA_AVX512_BF16_TARGET void scale16_bf16(const float* e, int n, float scale, bf16* out,
                                         bool stream) {
  const __m512 c = _mm512_set1_ps(scale);
  int j = 0;
  if (stream && ((uintptr_t)out & 1) == 0) {
    const int head = std::min(n, (int)((32 - ((uintptr_t)out & 31)) & 31) / 2);
    if (head) {
      const __mmask16 k = first_lanes(head);
      _mm256_mask_storeu_epi16(out, k, bf16x16(_mm512_mul_ps(_mm512_maskz_loadu_ps(k, e), c)));
      j = head;
    }
    for (; j + 16 <= n; j += 16)
      _mm256_stream_si256((__m256i*)(out + j), bf16x16(_mm512_mul_ps(_mm512_loadu_ps(e + j), c)));
    _mm_sfence();
  }
  for (; j + 16 <= n; j += 16)
    _mm256_storeu_si256((__m256i*)(out + j), bf16x16(_mm512_mul_ps(_mm512_loadu_ps(e + j), c)));
  if (j < n) {
    const __mmask16 k = first_lanes(n - j);
    _mm256_mask_storeu_epi16(out + j, k,
                             bf16x16(_mm512_mul_ps(_mm512_maskz_loadu_ps(k, e + j), c)));
  }
}

// The rows with AVX-512 (float): the max pass, one exp per logit into a row of this thread's that
// stays in cache (so the logits are only read), their sum, then the gradient scaled from them:
// rounded to bf16 into grad_bf16 when given (AVX512_BF16), else over the logits. Each thread takes
// one contiguous range of rows, so that it knows which row comes next.
void crossentropy_rows_avx512(float* logits, float* losses, const int32_t* targets, int N, int V,
                              int Vp, float dloss, bf16* grad_bf16) {
#pragma omp parallel
  {
    const ThreadShare mine = this_threads_share(N, 1);
    // A gradient of GPT-2's vocabulary (51 MB for 512 rows) is past the caches by the time the
    // products read it; a small one (the byte-level demo's 2 MB) is read from them.
    constexpr size_t kStreamBytes = size_t(16) << 20;
    const bool stream = (size_t)N * Vp * sizeof(bf16) > kStreamBytes;
    static thread_local std::vector<float> exps;
    if (dloss != 0.0f && exps.size() < (size_t)V) exps.resize(V);
    float* e = dloss != 0.0f ? exps.data() : nullptr;
    for (size_t n = mine.begin; n < mine.end; n++) {
      float* row = logits + n * Vp;
      const int target = targets[n];
      if (target < 0) {  // ignored position: no loss, no gradient
        losses[n] = 0;
        if (dloss != 0.0f && grad_bf16)
          std::fill_n(grad_bf16 + n * Vp, Vp, bf16(0));
        else if (dloss != 0.0f)
          std::fill(row, row + Vp, 0.0f);
        continue;
      }
      size_t next = n + 1;
      while (next < mine.end && targets[next] < 0) next++;
      const bool has_next = next < mine.end;
      const float max_logit = row_max16(row, V), target_logit = row[target];
      const float sum = row_exp_sum16(row, V, max_logit, e,
                                      has_next ? (const char*)(logits + next * Vp) : nullptr,
                                      has_next ? (size_t)V * sizeof(float) : 0);
      losses[n] = std::log(sum) - (target_logit - max_logit);
      if (dloss == 0.0f) continue;
      const float scale = dloss / sum;  // ∂loss/∂logit_j = p_j − [j = target]
      // The target's p_j, by the same scaling as the row's, then the one-hot term: one code path
      // for both forms, so the bf16 gradient is the fp32 one rounded (tested).
      float p_target;
      scale16(e + target, 1, scale, &p_target);
      if (grad_bf16) {
        bf16* grad = grad_bf16 + n * Vp;
        scale16_bf16(e, V, scale, grad, stream);
        grad[target] = round_to_bf16(p_target - dloss);
        std::fill(grad + V, grad + Vp, bf16(0));
      } else {
        scale16(e, V, scale, row);
        row[target] = p_target - dloss;
        std::fill(row + V, row + Vp, 0.0f);
      }
    }
  }
}
#endif

// With grad_bf16 each row's gradient goes, rounded, there instead of into the logits.
template <typename Real>
void crossentropy_rows(Real* logits, Real* losses, const int32_t* targets, int N, int V, int Vp,
                       Real dloss, bf16* grad_bf16) {
  // One exp per logit: the row is turned into exp(logit − max) in place, summed, then scaled into
  // the gradient (p − onehot)·dloss. Without a gradient the exps are only summed; with grad_bf16
  // the logits are left as they are.
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    Real* row = logits + (size_t)n * Vp;
    const int target = targets[n];
    if (target < 0) {  // ignored position: no loss, no gradient
      losses[n] = 0;
      if (dloss != Real(0) && grad_bf16)
        std::fill_n(grad_bf16 + (size_t)n * Vp, Vp, bf16(0));
      else if (dloss != Real(0))
        std::fill(row, row + Vp, Real(0));
      continue;
    }
    const Real max_logit = max_of(row, V, row[0]);
    const Real target_logit = row[target];
    Real sum = 0;
    if (dloss == Real(0)) {
#pragma omp simd reduction(+ : sum)
      for (int j = 0; j < V; j++) sum += fast_exp(row[j] - max_logit);
    } else if (grad_bf16) {
      // The exps go to a row of this thread's that stays in cache, so the logits are only read
      // and their lines are never written back to memory; the gradient is scaled and rounded in
      // the same pass.
      static thread_local std::vector<Real> exps;
      if (exps.size() < (size_t)V) exps.resize(V);
      Real* e = exps.data();
#pragma omp simd reduction(+ : sum)
      for (int j = 0; j < V; j++) {
        e[j] = fast_exp(row[j] - max_logit);
        sum += e[j];
      }
      const Real scale = dloss / sum;  // ∂loss/∂logit_j = p_j − [j = target]
      bf16* grad = grad_bf16 + (size_t)n * Vp;
#pragma omp simd
      for (int j = 0; j < V; j++) grad[j] = round_to_bf16(float(e[j] * scale));
      grad[target] = round_to_bf16(float(e[target] * scale - dloss));
      std::fill(grad + V, grad + Vp, bf16(0));
    } else {
#pragma omp simd reduction(+ : sum)
      for (int j = 0; j < V; j++) {
        row[j] = fast_exp(row[j] - max_logit);
        sum += row[j];
      }
      const Real scale = dloss / sum;  // ∂loss/∂logit_j = p_j − [j = target]
#pragma omp simd
      for (int j = 0; j < V; j++) row[j] *= scale;
      row[target] -= dloss;
      std::fill(row + V, row + Vp, Real(0));
    }
    losses[n] = std::log(sum) - (target_logit - max_logit);
  }
}

}  // namespace

template <typename Real>
void crossentropy_forward_backward(Real* logits, Real* losses, const int32_t* targets, int N, int V,
                                   int Vp, Real dloss) {
#if XSA_LEVEL_IS_AVX512
  if constexpr (std::is_same_v<Real, float>)
    return crossentropy_rows_avx512(logits, losses, targets, N, V, Vp, dloss, nullptr);
#endif
  crossentropy_rows(logits, losses, targets, N, V, Vp, dloss, nullptr);
}

void crossentropy_forward_backward_bf16(float* logits, bf16* grad, float* losses,
                                        const int32_t* targets, int N, int V, int Vp, float dloss) {
#if XSA_LEVEL_IS_AVX512
  if (cpu_level() >= CpuLevel::avx512_bf16)  // AVX512_BF16's conversion of the gradient
    return crossentropy_rows_avx512(logits, losses, targets, N, V, Vp, dloss, grad);
#endif
  crossentropy_rows(logits, losses, targets, N, V, Vp, dloss, grad);
}

// Soft-capping (docs/SPEC.md §11): the real columns become cap · tanh(x / cap), in place.
template <typename Real>
void softcap_forward(Real* logits, int N, int V, int Vp, Real cap) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    Real* row = logits + (size_t)n * Vp;
    for (int j = 0; j < V; j++) row[j] = cap * std::tanh(row[j] / cap);
  }
}

// The cross-entropy of soft-capped logits, with the cap's derivative in the gradient: the row is
// capped in place, the softmax and loss read the capped values c_j, and the gradient is
// (p_j − [j = target]) · dloss · (1 − (c_j / cap)²). Plain loops (the capped head is the recipe's,
// not the default's).
template <typename Real>
void crossentropy_softcap(Real* logits, Real* losses, const int32_t* targets, int N, int V, int Vp,
                          Real dloss, Real cap) {
  softcap_forward(logits, N, V, Vp, cap);
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    Real* row = logits + (size_t)n * Vp;
    const int target = targets[n];
    if (target < 0) {
      losses[n] = 0;
      if (dloss != Real(0)) std::fill(row, row + Vp, Real(0));
      continue;
    }
    const Real max_logit = max_of(row, V, row[0]);
    double sum = 0;  // in order, in double
    for (int j = 0; j < V; j++) sum += std::exp(double(row[j] - max_logit));
    losses[n] = Real(std::log(sum) - double(row[target] - max_logit));
    if (dloss == Real(0)) continue;
    for (int j = 0; j < V; j++) {
      const double p = std::exp(double(row[j] - max_logit)) / sum;
      const double c = double(row[j]) / double(cap);
      row[j] = Real((p - (j == target ? 1.0 : 0.0)) * double(dloss) * (1 - c * c));
    }
    std::fill(row + V, row + Vp, Real(0));
  }
}

template void crossentropy_forward_backward<float>(float*, float*, const int32_t*, int, int, int,
                                                   float);
template void crossentropy_forward_backward<double>(double*, double*, const int32_t*, int, int, int,
                                                    double);
template void softcap_forward<float>(float*, int, int, int, float);
template void softcap_forward<double>(double*, int, int, int, double);
template void crossentropy_softcap<float>(float*, float*, const int32_t*, int, int, int, float,
                                          float);
template void crossentropy_softcap<double>(double*, double*, const int32_t*, int, int, int, double,
                                           double);

}  // namespace xsa::ops::XSA_LEVEL
XSA_LEVEL_END

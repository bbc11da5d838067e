// Softmax and cross-entropy fused, computed row by row over the real vocabulary V; padded
// columns (V..Vp) are neither normalised over nor given gradient.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "xsa/ops/matmul_bf16.h"
#include "xsa/ops/ops.h"
#include "xsa/ops/vmath.h"

namespace xsa::ops {
namespace {

// With grad_bf16 each row's gradient is also rounded into it while the row is still in cache.
template <typename Real>
void crossentropy_rows(Real* logits, Real* losses, const int32_t* targets, int N, int V, int Vp,
                       Real dloss, bf16* grad_bf16) {
  // One exp per logit: the row is turned into exp(logit − max) in place, summed, then scaled into
  // the gradient (p − onehot)·dloss. Without a gradient the exps are only summed.
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    Real* row = logits + (size_t)n * Vp;
    const int target = targets[n];
    if (target < 0) {  // ignored position: no loss, no gradient
      losses[n] = 0;
      if (dloss != Real(0)) std::fill(row, row + Vp, Real(0));
      if (dloss != Real(0) && grad_bf16) std::fill_n(grad_bf16 + (size_t)n * Vp, Vp, bf16(0));
      continue;
    }
    Real max_logit = row[0];
#pragma omp simd reduction(max : max_logit)
    for (int j = 0; j < V; j++) max_logit = std::max(max_logit, row[j]);
    const Real target_logit = row[target];
    Real sum = 0;
    if (dloss == Real(0)) {
#pragma omp simd reduction(+ : sum)
      for (int j = 0; j < V; j++) sum += fast_exp(row[j] - max_logit);
    } else {
#pragma omp simd reduction(+ : sum)
      for (int j = 0; j < V; j++) {
        row[j] = fast_exp(row[j] - max_logit);
        sum += row[j];
      }
      // ∂loss/∂logit_j = p_j − [j = target]
      const Real scale = dloss / sum;
#pragma omp simd
      for (int j = 0; j < V; j++) row[j] *= scale;
      row[target] -= dloss;
      std::fill(row + V, row + Vp, Real(0));
      if constexpr (std::is_same_v<Real, float>)
        if (grad_bf16) to_bf16(row, grad_bf16 + (size_t)n * Vp, Vp);
    }
    losses[n] = std::log(sum) - (target_logit - max_logit);
  }
}

}  // namespace

template <typename Real>
void crossentropy_forward_backward(Real* logits, Real* losses, const int32_t* targets, int N, int V,
                                   int Vp, Real dloss) {
  crossentropy_rows(logits, losses, targets, N, V, Vp, dloss, nullptr);
}

void crossentropy_forward_backward_bf16(float* logits, bf16* grad, float* losses,
                                        const int32_t* targets, int N, int V, int Vp, float dloss) {
  crossentropy_rows(logits, losses, targets, N, V, Vp, dloss, grad);
}

template void crossentropy_forward_backward<float>(float*, float*, const int32_t*, int, int, int,
                                                   float);
template void crossentropy_forward_backward<double>(double*, double*, const int32_t*, int, int, int,
                                                    double);

}  // namespace xsa::ops

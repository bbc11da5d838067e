// Softmax and cross-entropy fused, computed row by row over the real vocabulary V; padded
// columns (V..Vp) are neither normalised over nor given gradient.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "xsa/ops/matmul_bf16.h"
#include "xsa/ops/ops.h"
#include "xsa/ops/vmath.h"

namespace xsa::ops {
namespace {

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

// Softmax and cross-entropy fused, computed row by row over the real vocabulary V; padded
// columns (V..Vp) are neither normalised over nor given gradient.
#include <cmath>

#include "ops/ops.h"

namespace xsa::ops {

template <typename Real>
void crossentropy_forward_backward(Real* logits, Real* losses, const int32_t* targets, int N, int V,
                                   int Vp, Real dloss) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    Real* row = logits + (size_t)n * Vp;
    int target = targets[n];
    if (target < 0) {  // ignored position: no loss, no gradient
      losses[n] = 0;
      if (dloss != Real(0)) {
        for (int j = 0; j < Vp; j++) row[j] = 0;
      }
      continue;
    }
    Real max_logit = row[0];
    for (int j = 1; j < V; j++) max_logit = row[j] > max_logit ? row[j] : max_logit;
    double sum = 0;
    for (int j = 0; j < V; j++) sum += std::exp((double)(row[j] - max_logit));
    double log_sum = std::log(sum);
    losses[n] = Real(log_sum - (row[target] - max_logit));
    if (dloss != Real(0)) {
      // ∂loss/∂logit_j = p_j − [j = target]
      for (int j = 0; j < V; j++) {
        double p = std::exp((double)(row[j] - max_logit) - log_sum);
        row[j] = Real((p - (j == target ? 1.0 : 0.0)) * dloss);
      }
      for (int j = V; j < Vp; j++) row[j] = 0;
    }
  }
}

template void crossentropy_forward_backward<float>(float*, float*, const int32_t*, int, int, int,
                                                   float);
template void crossentropy_forward_backward<double>(double*, double*, const int32_t*, int, int, int,
                                                    double);

}  // namespace xsa::ops

// Splitting work by hand inside an OpenMP parallel region, where a `parallel for` would not fit
// (per-thread accumulators, or a loop that must stay one plain vectorized loop).
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstddef>

namespace xsa::ops {

// The calling thread's contiguous share [begin, end) of n items; shares are whole multiples of
// `multiple` items (cache lines, vector widths), the last one shorter.
struct ThreadShare {
  size_t begin, end;
};
inline ThreadShare this_threads_share(size_t n, size_t multiple) {
  const size_t threads = omp_get_num_threads(), t = omp_get_thread_num();
  const size_t share = ((n + threads - 1) / threads + multiple - 1) / multiple * multiple;
  const size_t begin = std::min(n, t * share);
  return {begin, std::min(n, begin + share)};
}

}  // namespace xsa::ops

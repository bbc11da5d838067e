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

// Runs fn(begin, end) over [0, n) in one contiguous range per thread, or at once when n is small
// or a parallel region is already running. (An `omp parallel for simd` loop that ends up serial,
// as it does inside the cross-entropy's rows, ran 4× slower than the plain vectorized loop.)
template <typename Fn>
void split_across_threads(size_t n, Fn fn) {
  if (n <= (1 << 16) || omp_in_parallel()) return fn(size_t(0), n);
#pragma omp parallel
  {
    const ThreadShare mine = this_threads_share(n, 16);  // whole cache lines of floats
    fn(mine.begin, mine.end);
  }
}

}  // namespace xsa::ops

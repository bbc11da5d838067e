// One thread count for OpenMP (our kernels) and OpenBLAS (the products), which share one pool.
#pragma once

namespace xsa {

// Sets the thread count of OpenMP and OpenBLAS (0: every core) and returns it.
int set_thread_count(int threads);

}  // namespace xsa

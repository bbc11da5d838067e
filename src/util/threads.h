// One thread count for OpenMP (our kernels) and OpenBLAS (the products), which share one pool.
#pragma once

namespace xsa {

// Sets the thread count of OpenMP and OpenBLAS and returns it. threads > 0: that many. 0: the
// OMP_NUM_THREADS variable when set, else every core this process may run on (its affinity mask);
// when that is every core of the machine and `processes_sharing` processes of one job run on it
// (data-parallel ranks not bound to cores by the launcher), their even share.
int set_thread_count(int threads, int processes_sharing = 1);

}  // namespace xsa

#include "xsa/util/threads.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

extern "C" void openblas_set_num_threads(int);

namespace xsa {

int set_thread_count(int threads, int processes_sharing) {
  int n = threads;
  if (n <= 0) {
    const char* env = std::getenv("OMP_NUM_THREADS");
    n = env ? std::atoi(env) : 0;
  }
  if (n <= 0) {
    n = omp_get_num_procs();  // honours the affinity mask a launcher set (--bind-to)
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (processes_sharing > 1 && n >= online) n = std::max(1, n / processes_sharing);
  }
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
  return n;
}

}  // namespace xsa

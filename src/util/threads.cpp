#include "xsa/util/threads.h"

#include <omp.h>

extern "C" void openblas_set_num_threads(int);

namespace xsa {

int set_thread_count(int threads) {
  int n = threads > 0 ? threads : omp_get_num_procs();
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
  return n;
}

}  // namespace xsa

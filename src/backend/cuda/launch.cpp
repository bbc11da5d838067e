#include "xsa/backend/cuda/launch.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include "xsa/util/error.h"

namespace xsa::cuda {

bool checked_launches() {
  static const bool on = [] {
    const char* value = std::getenv("XSA_CUDA_CHECK");
    return value && *value && std::strcmp(value, "0") != 0;
  }();
  return on;
}

std::string attention_shape(const ops::AttentionArgs<float>& a) {
  const int Hkv = a.Hkv > 0 ? a.Hkv : a.H;
  return "B " + std::to_string(a.B) + " T " + std::to_string(a.T) + " C " + std::to_string(a.C) +
         " H " + std::to_string(a.H) + " Hkv " + std::to_string(Hkv) + " D " +
         std::to_string(a.H > 0 ? a.C / a.H : 0) + (a.exclusive ? ", xsa" : ", sa") +
         (a.sink ? ", sinks" : "") + (a.alpha ? ", learned exclusion (xsa-gated)" : "");
}

void launch_failed(const char* kernel, const std::string& shape, cudaError_t status) {
  std::string line = std::string("CUDA error in ") + kernel + " (" + shape +
                     "): " + cudaGetErrorString(status) + " (" + cudaGetErrorName(status) + ")";
  if (!checked_launches())
    line += "; the fault may be an earlier kernel's: XSA_CUDA_CHECK=1 names the one that faulted";
  throw Error(line);
}

size_t opt_in_shared_memory(const void* kernel, size_t max_bytes) {
  int device = 0;
  cudaGetDevice(&device);
  static std::mutex mutex;
  static std::map<std::pair<const void*, int>, size_t> limits;  // (kernel, device) → its limit
  std::lock_guard lock(mutex);
  const auto [at, fresh] = limits.try_emplace({kernel, device}, 0);
  if (fresh) {
    int limit = 0;
    cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
    at->second = std::min(max_bytes, (size_t)limit);
    // (a failure here shows as the launch's own, which the caller checks)
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)at->second);
  }
  return at->second;
}

void shared_memory_refused(const char* kernel, const std::string& shape, size_t bytes,
                           size_t limit) {
  int device = 0;
  cudaGetDevice(&device);
  cudaDeviceProp props{};
  cudaGetDeviceProperties(&props, device);
  throw Error("attention at " + shape + " needs " + std::to_string(bytes / 1024) +
              " KiB of shared memory per block in " + kernel + ", but " + props.name +
              " (cuda:" + std::to_string(device) + ") allows " + std::to_string(limit / 1024) +
              " KiB: use a smaller head size (--n-embd / --n-head), or --precision bf16 for head "
              "sizes up to 128");
}

}  // namespace xsa::cuda

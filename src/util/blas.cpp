#include "xsa/util/blas.h"

#include <cblas.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <set>

#include "xsa/util/fmt.h"

extern "C" char* openblas_get_corename(void);
extern "C" char* openblas_get_config(void);

namespace xsa {

std::string blas_core() {
  return openblas_get_corename();
}

std::string blas_summary() {
  Dl_info info{};
  const std::string path =
      dladdr(reinterpret_cast<void*>(&cblas_sgemm), &info) && info.dli_fname ? info.dli_fname : "";
  if (path.find("openblas") == std::string::npos)
    return path.empty() ? "an unknown BLAS" : path.substr(path.rfind('/') + 1);
  std::string version = openblas_get_config();  // "OpenBLAS 0.3.21 DYNAMIC_ARCH ..."
  version = version.substr(0, version.find(' ', version.find(' ') + 1));
  return fmt::format("{}, {} kernels ({})", version, blas_core(), blas_origin());
}

std::string best_blas_core_for_cpu() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#endif
  return "";
}

namespace {
// Kernel sets with AVX2/FMA or better: nothing to correct when OpenBLAS chose one of these.
bool is_modern_core(const std::string& core) {
  static const std::set<std::string, std::less<>> modern = {
      "haswell",    "zen",        "skylakex",   "cooperlake", "sapphirerapids",
      "neoversen1", "neoversen2", "neoversev1", "armv8",      "a64fx"};
  std::string lower;
  for (char c : core) lower += (char)std::tolower((unsigned char)c);
  return modern.count(lower) != 0;
}
}  // namespace

namespace {
// 2: AVX-512 kernel sets, 1: AVX2/FMA ones, 0: older or unknown.
int kernel_class(const std::string& core) {
  std::string lower;
  for (char c : core) lower += (char)std::tolower((unsigned char)c);
  if (lower == "skylakex" || lower == "cooperlake" || lower == "sapphirerapids") return 2;
  return is_modern_core(lower) ? 1 : 0;
}
}  // namespace

std::string blas_kernels_note(const std::string& in_use, const std::string& pinned,
                              const std::string& best) {
  if (pinned.empty() || best.empty() || kernel_class(in_use) >= kernel_class(best)) return "";
  return fmt::format(
      "note: OpenBLAS runs its {} kernels because OPENBLAS_CORETYPE={} is set, but this CPU "
      "supports {} ({}): the products here are slower than on this CPU unpinned (unset the "
      "variable to measure that; xsa leaves it as set)",
      in_use, pinned, best, kernel_class(best) == 2 ? "AVX-512" : "AVX2");
}

std::string blas_core_correction(const std::string& detected, const std::string& best) {
  return best.empty() || is_modern_core(detected) ? "" : best;
}

void ensure_fast_blas(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") || std::getenv("XSA_KEEP_BLAS_CORE")) return;
  const std::string detected = blas_core();
  const std::string best = blas_core_correction(detected, best_blas_core_for_cpu());
  if (best.empty()) return;
  setenv("OPENBLAS_CORETYPE", best.c_str(), 1);
  setenv("XSA_BLAS_CORRECTED_FROM", detected.c_str(), 1);
  execv("/proc/self/exe", argv);  // returns only on failure: carry on with the slow kernels
  unsetenv("OPENBLAS_CORETYPE");
}

std::string blas_origin() {
  if (const char* from = std::getenv("XSA_BLAS_CORRECTED_FROM"))
    return std::string("set by xsa from the CPU's features; OpenBLAS detected ") + from;
  if (std::getenv("OPENBLAS_CORETYPE")) return "set by OPENBLAS_CORETYPE";
  return "OpenBLAS's own detection";
}

}  // namespace xsa

// Shared helpers of the test suite: seeded random data and error measures with stated meaning.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "util/rng.h"

namespace xsa::test {

inline std::vector<double> random_vector(size_t n, uint64_t seed, double scale = 1.0) {
  Rng rng(seed);
  std::vector<double> v(n);
  for (double& x : v) x = scale * rng.normal();
  return v;
}

template <typename To, typename From>
std::vector<To> cast_vector(const std::vector<From>& v) {
  return std::vector<To>(v.begin(), v.end());
}

// Norm-relative error: max |a − b| / max |b|. Elementwise relative error is meaningless for
// entries near zero; this asks every entry to be right to a fraction of the tensor's scale.
template <typename A, typename B>
double max_rel_error(const A* a, const B* b, size_t n) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < n; i++) {
    diff = std::max(diff, std::fabs((double)a[i] - (double)b[i]));
    scale = std::max(scale, std::fabs((double)b[i]));
  }
  return scale > 0 ? diff / scale : diff;
}
template <typename A, typename B>
double max_rel_error(const std::vector<A>& a, const std::vector<B>& b) {
  return max_rel_error(a.data(), b.data(), std::min(a.size(), b.size()));
}

// A fresh, empty folder per test and process under the system's temporary directory.
inline std::filesystem::path temp_dir(const std::string& name) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("xsa_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

}  // namespace xsa::test

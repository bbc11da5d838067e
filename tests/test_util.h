// Shared helpers of the test suite: seeded random data and error measures with stated meaning.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "xsa/model/gpt.h"
#include "xsa/util/files.h"
#include "xsa/util/rng.h"

namespace xsa::test {

// n normal draws times scale, each rounded to the nearest float: numbers a float holds exactly,
// so that a float32 kernel and its float64 reference start from the same inputs and a comparison
// judges the kernel's arithmetic alone (tests/bounds.h).
inline std::vector<double> random_vector(size_t n, uint64_t seed, double scale = 1.0) {
  Rng rng(seed);
  std::vector<double> v(n);
  for (double& x : v) x = (float)(scale * rng.normal());
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
    const double d = std::fabs((double)a[i] - (double)b[i]);
    if (std::isnan(d)) return INFINITY;  // std::max would pass over it: a NaN is no match
    diff = std::max(diff, d);
    scale = std::max(scale, std::fabs((double)b[i]));
  }
  return scale > 0 ? diff / scale : diff;
}
template <typename A, typename B>
double max_rel_error(const std::vector<A>& a, const std::vector<B>& b) {
  return max_rel_error(a.data(), b.data(), std::min(a.size(), b.size()));
}

// A small model configuration for the inference tests: V real tokens (padded to 64), L layers,
// two heads of width 8, the given context and attention (as --attn).
inline ModelConfig small_test_config(int V, int L, int seq_len, const std::string& attn) {
  ModelConfig cfg;
  cfg.vocab_size = V, cfg.padded_vocab = pad_vocab(V);
  cfg.n_layer = L, cfg.n_head = 2, cfg.n_embd = 16, cfg.seq_len = seq_len;
  set_attention(cfg, attn);
  return cfg;
}

// A model of `from`'s configuration for sequences of T tokens (inference), with its weights:
// the full forward of one whole sequence, the reference the cached paths are held to.
template <typename To, typename From>
std::unique_ptr<Gpt<To>> copy_model(const Gpt<From>& from, int T) {
  auto to = std::make_unique<Gpt<To>>(from.config(), 1, T, GptMode::inference);
  const auto& src = from.params().params;
  std::copy(src.data(), src.data() + src.size(), to->params().params.data());
  return to;
}

// A fresh, empty folder per test and process under the system's temporary directory.
inline std::filesystem::path temp_dir(const std::string& name) {
  namespace fs = std::filesystem;
  fs::path dir =
      fs::temp_directory_path() / ("xsa_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// n characters of a repeated English sentence: training text a tiny model learns quickly.
inline std::string text_of(size_t n) {
  std::string s;
  const char* line =
      "It was the best of times, it was the worst of times, it was the age of wisdom.\n";
  while (s.size() < n) s += line;
  s.resize(n);
  return s;
}

// A shell command run in `dir` with no input, as a user runs it: its exit status (−1 when a
// signal ended it) and what it printed.
struct CommandResult {
  int status;
  std::string out, err;
};
inline CommandResult run_command(const std::string& command, const std::filesystem::path& dir) {
  const std::filesystem::path out = dir / "stdout.txt", err = dir / "stderr.txt";
  const std::string cmd = "cd " + dir.string() + " && " + command + " >" + out.string() + " 2>" +
                          err.string() + " </dev/null";
  const int raw = std::system(cmd.c_str());
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, read_file(out), read_file(err)};
}

// The XSA kernels (ops::xsa_forward, ops::xsa_backward, which take the attention's arguments) on
// a test's plain arrays of B·T rows: z from y and qkv; dy from dz (copied first: the kernel turns
// ∂L/∂z into ∂L/∂y in place), the own-value gradient added into dqkv, ∂L/∂α into dalpha.
template <typename Real>
struct XsaCall {
  int B, T, C, H, Hkv = 0;
  const Real* alpha = nullptr;

  ops::AttentionArgs<Real> args(const Real* y, const Real* qkv) const {
    ops::AttentionArgs<Real> a;
    a.B = B, a.T = T, a.C = C, a.H = H, a.Hkv = Hkv, a.exclusive = true;
    a.y = const_cast<Real*>(y), a.qkv = qkv, a.alpha = alpha;
    return a;
  }
  void forward(Real* z, const Real* y, const Real* qkv) const {
    ops::AttentionArgs<Real> a = args(y, qkv);
    a.z = z;
    ops::xsa_forward(a);
  }
  void backward(Real* dy, Real* dqkv, const Real* dz, const Real* y, const Real* qkv,
                Real* dalpha = nullptr) const {
    std::copy(dz, dz + (size_t)B * T * C, dy);
    ops::AttentionArgs<Real> a = args(y, qkv);
    a.d_out = dy, a.dqkv = dqkv, a.dalpha = dalpha;
    ops::xsa_backward(a);
  }
};

}  // namespace xsa::test

// One table of op cases run on every backend present, against the float64 reference (src/ops/
// reference.h), as ggml's test-backend-ops does: each (op family, shape) × backend is one test,
// its inputs uploaded into the backend's own memory and its outputs read back through the Backend
// seam, every entry within the bound its roundings allow (tests/bounds.h): fp32's for the fp32
// backends, and for the bf16 backends the bound bf16's 8 significant bits give their products and
// attention tiles (on top of fp32's). Activations that only products read are run in each storage
// the backend takes (ops/tensor.h: fp32, and bf16 where supports() says so): a bf16 output within
// its fp32 bound plus its own rounding to bf16. A backend that is not here (no AVX512_BF16, no GPU)
// or does not take a storage is reported as SKIPPED with the reason (the refusal itself is tested
// below); so is a combination no bound is derived for yet.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "bounds.h"
#include "test_util.h"
#include "xsa/backend/backend.h"
#include "xsa/backend/device.h"
#include "xsa/backend/forwarding_backend.h"
#include "xsa/backend/generated/entry_list.h"
#include "xsa/ops/bf16.h"
#include "xsa/ops/reference.h"
#include "xsa/util/fmt.h"

namespace xsa {
namespace {

using test::kFloatRoundoff;
using test::Vec;
using test::within;

constexpr double kBf16Roundoff = 0x1p-8;  // bf16's unit roundoff (8 significant bits)
// TF32 keeps 10 explicit significand bits; its conversion may truncate, so a relative error of up
// to 2⁻¹⁰ per operand.
constexpr double kTf32Roundoff = 0x1p-10;

// Every kernel launch on a GPU synchronised and checked, so a fault names its kernel
// (backend/cuda/launch.h); set before the first backend is opened.
[[maybe_unused]] const bool kCheckedLaunches = setenv("XSA_CUDA_CHECK", "1", 0) == 0;

// What a backend's matrix products round their operands to.
enum class Products : uint8_t { fp32, tf32, bf16 };

// The backends of the table, by name; null with `why` when this machine has none such. The GPU
// has two more forms that only some families exercise (kFormsOf): its deterministic attention
// backward (the dQ kernels that recompute P instead of adding atomically) and TF32 products.
Backend<float>* backend_named(const std::string& name, std::string* why) {
  const bool bf16 = name.find("bf16") != std::string::npos;
  if (bf16 && name.rfind("cuda", 0) != 0 && !bf16_products_available(why)) return nullptr;
  if (name.rfind("cuda", 0) == 0) {
    if (!cuda_available(why)) return nullptr;
    const bool tf32 = name.find("tf32") != std::string::npos,
               deterministic = name.find("deterministic") != std::string::npos;
    return &select_backend({"cuda", bf16 ? Precision::bf16 : Precision::fp32, tf32, deterministic});
  }
  Backend<float>& cpu = bf16 ? cpu_backend(Precision::bf16) : cpu_backend<float>();
  return name.rfind("isolated", 0) == 0 ? &isolated_backend(cpu) : &cpu;
}
Products products_of(const std::string& name) {
  return name.find("bf16") != std::string::npos   ? Products::bf16
         : name.find("tf32") != std::string::npos ? Products::tf32
                                                  : Products::fp32;
}
const std::vector<std::string> kBackends = {"cpu",           "cpu-bf16", "isolated",
                                            "isolated-bf16", "cuda",     "cuda-bf16"};
// The GPU's other forms, each with the one family it changes.
const std::vector<std::pair<std::string, Op>> kFormsOf = {
    {"cuda-deterministic", Op::attention},
    {"cuda-bf16-deterministic", Op::attention},
    {"cuda-tf32", Op::matmul}};

// Host values in and out of a backend's memory.
struct Device {
  Backend<float>& be;
  DeviceBuffer<float> put(const Vec& host) {
    DeviceBuffer<float> buf(be, host.size(), MemoryUse::activations);
    const std::vector<float> f = test::cast_vector<float>(host);
    be.from_host(buf.data(), f.data(), f.size());
    return buf;
  }
  DeviceBuffer<float> zeros(size_t n) { return DeviceBuffer<float>(be, n, MemoryUse::activations); }
  // host's values as bf16 in the first half of an fp32-sized buffer (values bf16-exact).
  DeviceBuffer<float> put_bf16(const Vec& host) {
    std::vector<float> packed(host.size(), 0.0f);
    auto* bits = reinterpret_cast<ops::bf16*>(packed.data());
    for (size_t i = 0; i < host.size(); i++) bits[i] = ops::round_to_bf16((float)host[i]);
    DeviceBuffer<float> buf(be, host.size(), MemoryUse::activations);
    be.from_host(buf.data(), packed.data(), packed.size());
    return buf;
  }
  DeviceBuffer<float> put(const Vec& host, Storage storage) {
    return storage == Storage::bf16 ? put_bf16(host) : put(host);
  }
  // The n values a buffer holds in `storage`.
  std::vector<float> get(const DeviceBuffer<float>& buf, Storage storage, size_t n) {
    const std::vector<float> raw = get(buf);
    if (storage == Storage::fp32) return {raw.begin(), raw.begin() + n};
    std::vector<float> values(n);
    const auto* bits = reinterpret_cast<const ops::bf16*>(raw.data());
    for (size_t i = 0; i < n; i++) {
      const uint32_t word = uint32_t(bits[i]) << 16;
      std::memcpy(&values[i], &word, 4);
    }
    return values;
  }
  std::vector<float> get(const DeviceBuffer<float>& buf) {
    std::vector<float> host(buf.size());
    be.synchronize();
    be.to_host(host.data(), buf.data(), host.size());
    return host;
  }
};

// Each input as the float the backend receives (bounds are taken on what it computes from).
Vec as_float(Vec v) {
  for (double& x : v) x = (float)x;
  return v;
}
// ... or as the bf16 a bf16 backend's tiles read (the project's rounding, ops/bf16.h), for the
// attention's bf16 bound.
Vec as_bf16(Vec v) {
  for (double& x : v) {
    const uint32_t bits = uint32_t(ops::round_to_bf16((float)x)) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    x = f;
  }
  return v;
}

// |a|·|b| products summed as the product sums them: what bf16's rounding of both operands moves.
Vec product_magnitudes(const Vec& x, const Vec& w, int N, int I, int O) {
  Vec mag(N * O);
  ref::matmul_forward(mag.data(), test::abs_of(x).data(), test::abs_of(w).data(), N, I, O);
  return mag;
}
// Operands rounded to `unit` relative each (bf16: 2^-8): the product moves by
// (2·unit + unit²)·Σ|ab|.
void add_rounded_operands(Vec& bound, const Vec& magnitudes, double unit) {
  for (size_t i = 0; i < bound.size(); i++) bound[i] += (2 * unit + unit * unit) * magnitudes[i];
}

// A bound for an output stored in `storage`: bf16 rounds the computed value once more, by at
// most 2^-8 of it (round to nearest), the computed value within `bound` of the exact one.
Vec stored_bound(Vec bound, const Vec& exact, Storage storage) {
  if (storage == Storage::bf16)
    for (size_t i = 0; i < bound.size(); i++)
      bound[i] += kBf16Roundoff * (std::fabs(exact[i]) + bound[i]);
  return bound;
}

// ---- the op families ----

struct MatmulShape {
  int N, I, O;
};
// Inputs x and dout in `storage` (bf16: product inputs, given bf16-exact).
void check_matmul(Backend<float>& be, Products products, MatmulShape s, Storage storage) {
  Device dev{be};
  const auto stored = [&](Vec v) {
    return storage == Storage::bf16 ? as_bf16(std::move(v)) : as_float(std::move(v));
  };
  const Vec x = stored(test::random_vector((size_t)s.N * s.I, 1)),
            w = as_float(test::random_vector((size_t)s.O * s.I, 2, 0.1)),
            dout = stored(test::random_vector((size_t)s.N * s.O, 3)),
            dw0 = as_float(test::random_vector((size_t)s.O * s.I, 4, 0.01));
  Vec y_ref(s.N * s.O), dx_ref(s.N * s.I), dw_ref = dw0;
  ref::matmul_forward(y_ref.data(), x.data(), w.data(), s.N, s.I, s.O);
  ref::matmul_backward(dx_ref.data(), dw_ref.data(), dout.data(), x.data(), w.data(), s.N, s.I,
                       s.O);
  auto X = dev.put(x, storage), W = dev.put(w), dOut = dev.put(dout, storage), dW = dev.put(dw0);
  auto Y = dev.zeros(y_ref.size()), dX = dev.zeros(dx_ref.size());
  be.weights_changed();  // new weights at addresses a cached bf16 copy may have had
  const Tensor<const float> x_in{X.data(), storage}, dout_in{dOut.data(), storage};
  be.matmul_forward(Y.data(), x_in, W.data(), {s.N, s.I, s.O}, false);
  be.matmul_backward(dX.data(), dW.data(), dout_in, x_in, W.data(), {s.N, s.I, s.O}, true);
  Vec y_bound = test::matmul_forward_bound(x, w, s.N, s.I, s.O, nullptr, kFloatRoundoff), dx_bound,
      dw_bound;
  test::matmul_backward_bound(dx_bound, dw_bound, dout, x, w, dw0, s.N, s.I, s.O, kFloatRoundoff);
  if (products != Products::fp32) {  // the three products on rounded operands
    const double unit = products == Products::bf16 ? kBf16Roundoff : kTf32Roundoff;
    add_rounded_operands(y_bound, product_magnitudes(x, w, s.N, s.I, s.O), unit);
    Vec dx_mag(s.N * s.I), dw_mag(s.O * s.I, 0.0);
    ref::matmul_backward(dx_mag.data(), dw_mag.data(), test::abs_of(dout).data(),
                         test::abs_of(x).data(), test::abs_of(w).data(), s.N, s.I, s.O);
    add_rounded_operands(dx_bound, dx_mag, unit), add_rounded_operands(dw_bound, dw_mag, unit);
  }
  EXPECT_TRUE(within(dev.get(Y), y_ref, y_bound, "y"));
  EXPECT_TRUE(within(dev.get(dX), dx_ref, dx_bound, "dx"));
  // With a residual, in place (out = residual + x · wᵀ): the residual one more term of each sum.
  const Vec res = as_float(test::random_vector((size_t)s.N * s.O, 5));
  Vec yr_ref = y_ref,
      yr_bound = test::matmul_forward_bound(x, w, s.N, s.I, s.O, &res, kFloatRoundoff);
  for (size_t i = 0; i < yr_ref.size(); i++) yr_ref[i] += res[i];
  if (products != Products::fp32)
    add_rounded_operands(yr_bound, product_magnitudes(x, w, s.N, s.I, s.O),
                         products == Products::bf16 ? kBf16Roundoff : kTf32Roundoff);
  auto Yr = dev.put(res);
  be.matmul_forward_residual(Yr.data(), Yr.data(), x_in, W.data(), {s.N, s.I, s.O});
  EXPECT_TRUE(within(dev.get(Yr), yr_ref, yr_bound, "y with a residual"));
  EXPECT_TRUE(within(dev.get(dW), dw_ref, dw_bound, "dw"));
  // Without dinp and not accumulating (a step's first micro-batch): dW overwritten, NaN before.
  auto dW_first = dev.put(Vec(dw0.size(), std::nan("")));
  be.matmul_backward(nullptr, dW_first.data(), dout_in, x_in, W.data(), {s.N, s.I, s.O}, false);
  Vec dw_first_ref(dw0.size(), 0.0), unused(dx_ref.size());
  ref::matmul_backward(unused.data(), dw_first_ref.data(), dout.data(), x.data(), w.data(), s.N,
                       s.I, s.O);
  Vec dw_first_bound = dw_bound;  // covers dw0's part too: a looser bound, still one
  EXPECT_TRUE(within(dev.get(dW_first), dw_first_ref, dw_first_bound, "dw, first micro-batch"));
}

// The output in `storage` (a product input); the backward reads the input, not the output.
void check_layernorm(Backend<float>& be, int N, int C, Storage storage) {
  Device dev{be};
  const Vec x = as_float(test::random_vector((size_t)N * C, 5)),
            w = as_float(test::random_vector(C, 6)), b = as_float(test::random_vector(C, 7)),
            dout = as_float(test::random_vector((size_t)N * C, 8)), zero_nc(N * C, 0.0),
            zero_c(C, 0.0);
  Vec y_ref(N * C), mean_ref(N), rstd_ref(N), dx_ref(N * C, 0.0), dw_ref(C, 0.0), db_ref(C, 0.0);
  ref::layernorm_forward(y_ref.data(), mean_ref.data(), rstd_ref.data(), x.data(), w.data(),
                         b.data(), N, C);
  ref::layernorm_backward(dx_ref.data(), dw_ref.data(), db_ref.data(), dout.data(),
                          {x.data(), w.data(), nullptr, mean_ref.data(), rstd_ref.data(), N, C});
  auto X = dev.put(x), Wt = dev.put(w), Bs = dev.put(b), dOut = dev.put(dout);
  auto Y = dev.zeros(N * C), M = dev.zeros(N), R = dev.zeros(N), dX = dev.zeros(N * C),
       dW = dev.zeros(C), dB = dev.zeros(C);
  const LayerNormArgs<float> args{X.data(), Wt.data(), Bs.data(), M.data(), R.data(), N, C};
  be.layernorm_forward({Y.data(), storage}, args);
  be.layernorm_backward(dX.data(), dW.data(), dB.data(), dOut.data(), args);
  const test::LayerNormBounds bd =
      test::layernorm_bounds(x, w, b, dout, zero_nc, zero_c, zero_c, N, C, kFloatRoundoff);
  EXPECT_TRUE(
      within(dev.get(Y, storage, y_ref.size()), y_ref, stored_bound(bd.y, y_ref, storage), "y"));
  EXPECT_TRUE(within(dev.get(M), mean_ref, bd.mean, "mean"));
  EXPECT_TRUE(within(dev.get(R), rstd_ref, bd.rstd, "rstd"));
  EXPECT_TRUE(within(dev.get(dX), dx_ref, bd.dx, "dx"));
  EXPECT_TRUE(within(dev.get(dW), dw_ref, bd.dw, "dw"));
  EXPECT_TRUE(within(dev.get(dB), db_ref, bd.db, "db"));
}

// The output and the input gradient in `storage` (product inputs).
void check_gelu(Backend<float>& be, size_t n, Storage storage) {
  Device dev{be};
  const Vec x = as_float(test::random_vector(n, 9, 3.0)),
            dout = as_float(test::random_vector(n, 10));
  Vec y_ref(n), dx_ref(n);
  ref::gelu_forward(y_ref.data(), x.data(), n);
  ref::gelu_backward(dx_ref.data(), x.data(), dout.data(), n);
  auto X = dev.put(x), dOut = dev.put(dout), Y = dev.zeros(n), dX = dev.zeros(n);
  be.gelu_forward({Y.data(), storage}, X.data(), n);
  be.gelu_backward({dX.data(), storage}, X.data(), dOut.data(), n);
  Vec y_bound, dx_bound;
  test::gelu_bounds(y_bound, dx_bound, x, dout, kFloatRoundoff);
  EXPECT_TRUE(within(dev.get(Y, storage, n), y_ref, stored_bound(y_bound, y_ref, storage), "y"));
  EXPECT_TRUE(
      within(dev.get(dX, storage, n), dx_ref, stored_bound(dx_bound, dx_ref, storage), "dx"));
}

// RoPE on q and k of qkv rows (grouped-query heads too), forward and backward, from the backend's
// own table of cos and sin.
// The backward's output in `storage`: fp32 in place, bf16 (a product input) into another buffer.
void check_rope(Backend<float>& be, int B, int T, int C, int H, int Hkv, Storage storage) {
  Device dev{be};
  const int D = C / H, Hk = Hkv ? Hkv : H, W = C + 2 * Hk * D;
  const Vec qkv = as_float(test::random_vector((size_t)B * T * W, 14)),
            grad = as_float(test::random_vector((size_t)B * T * W, 15));
  Vec fwd_ref = qkv, bwd_ref = grad;
  ref::rope_rotate(fwd_ref.data(), B, T, C, H, 10000.0, +1, Hkv);
  ref::rope_rotate(bwd_ref.data(), B, T, C, H, 10000.0, -1, Hkv);
  auto Cos = dev.zeros((size_t)T * D / 2), Sin = dev.zeros((size_t)T * D / 2);
  auto X = dev.put(qkv), G = dev.put(grad);
  be.rope_table(Cos.data(), Sin.data(), T, D, 10000.0);
  const RopeArgs<float> args{Cos.data(), Sin.data(), B, T, C, H, Hkv};
  be.rope_forward(X.data(), args);
  auto Apart = dev.zeros(grad.size());
  DeviceBuffer<float>& Out = storage == Storage::fp32 ? G : Apart;
  be.rope_backward({Out.data(), storage}, G.data(), args);
  EXPECT_TRUE(within(dev.get(X), fwd_ref,
                     test::rope_bound(qkv, B, T, C, H, Hkv, 10000.0, kFloatRoundoff), "fwd"));
  const Vec bwd_bound = test::rope_bound(grad, B, T, C, H, Hkv, 10000.0, kFloatRoundoff);
  EXPECT_TRUE(within(dev.get(Out, storage, grad.size()), bwd_ref,
                     stored_bound(bwd_bound, bwd_ref, storage), "bwd"));
}

// The fused softmax cross-entropy: losses, and the gradient written over the logits (padded
// columns, ignored rows).
void check_crossentropy(Backend<float>& be, int N, int V, int Vp) {
  Device dev{be};
  const Vec logits = as_float(test::random_vector((size_t)N * Vp, 16, 3.0));
  std::vector<int32_t> targets(N);
  for (int n = 0; n < N; n++) targets[n] = n % 4 == 3 ? -1 : (n * 13) % V;  // some ignored
  const double dloss = 0.37;
  Vec g_ref = logits, loss_ref(N);
  ref::crossentropy_forward_backward(g_ref.data(), loss_ref.data(), targets.data(), N, V, Vp,
                                     dloss);
  auto Logits = dev.put(logits), Losses = dev.zeros(N);
  be.crossentropy_forward_backward(Logits.data(), Losses.data(), targets.data(), N, V, Vp,
                                   (float)dloss);
  Vec loss_bound, grad_bound;
  test::crossentropy_bounds(loss_bound, grad_bound, logits, targets, N, V, Vp, dloss,
                            kFloatRoundoff);
  EXPECT_TRUE(within(dev.get(Losses), loss_ref, loss_bound, "losses"));
  EXPECT_TRUE(within(dev.get(Logits), g_ref, grad_bound, "gradient"));
}

// The token embedding: rows gathered (exact), and their gradient summed into the table's rows
// (a row's k occurrences and what it held: k + 1 terms).
void check_encoder(Backend<float>& be, int N, int V, int C) {
  Device dev{be};
  const Vec wte = as_float(test::random_vector((size_t)V * C, 17)),
            dout = as_float(test::random_vector((size_t)N * C, 18));
  std::vector<int32_t> tokens(N);
  for (int n = 0; n < N; n++) tokens[n] = (n * 7) % V;  // rows seen several times
  Vec out_ref((size_t)N * C), dwte_ref = wte, terms(V, 1.0), magnitude = test::abs_of(wte);
  ref::encoder_forward(out_ref.data(), tokens.data(), wte.data(), N, C);
  ref::encoder_backward(dwte_ref.data(), dout.data(), tokens.data(), N, C);
  Vec abs_dout = test::abs_of(dout);
  ref::encoder_backward(magnitude.data(), abs_dout.data(), tokens.data(), N, C);
  for (int n = 0; n < N; n++) terms[tokens[n]] += 1;
  Vec bound((size_t)V * C);
  for (int v = 0; v < V; v++)
    for (int c = 0; c < C; c++)
      bound[(size_t)v * C + c] =
          test::sum_error(terms[v], kFloatRoundoff) * magnitude[(size_t)v * C + c];
  auto Wte = dev.put(wte), dOut = dev.put(dout), Out = dev.zeros((size_t)N * C),
       dWte = dev.put(wte);
  be.encoder_forward(Out.data(), tokens.data(), Wte.data(), N, C);
  be.encoder_backward(dWte.data(), dOut.data(), tokens.data(), N, C);
  EXPECT_TRUE(within(dev.get(Out), out_ref, Vec(out_ref.size(), 0.0), "rows"));
  EXPECT_TRUE(within(dev.get(dWte), dwte_ref, bound, "dwte"));
  // The table's rows added at an index (learned positions): one rounding each.
  const Vec out0 = as_float(test::random_vector((size_t)N * C, 19));
  Vec add_ref = out0, add_bound((size_t)N * C);
  for (int n = 0; n < N; n++)
    for (int c = 0; c < C; c++) {
      const size_t i = (size_t)n * C + c;
      add_ref[i] += wte[(size_t)tokens[n] * C + c];
      add_bound[i] = kFloatRoundoff * std::fabs(add_ref[i]);
    }
  auto Added = dev.put(out0);
  be.embedding_add(Added.data(), tokens.data(), Wte.data(), N, C);
  EXPECT_TRUE(within(dev.get(Added), add_ref, add_bound, "rows added"));
}

// The tied classifier, the product, the cross-entropy and its backward in one entry (a backend
// may fuse them). Its inputs are multiples of 1/4 and 1/2 small enough that every logit is exact
// in any of the products' precisions (fp32, TF32, bf16 operands with fp32 sums), so the losses and
// the logits' gradient g hold the cross-entropy's bounds; the gradient products then carry g's
// error (bf16 products: g rounded to bf16 too) and their own sums' roundings.
void check_classifier(Backend<float>& be, Products products, int N, int C, int V, int Vp) {
  Device dev{be};
  Vec x = test::random_vector((size_t)N * C, 25), wte = test::random_vector((size_t)Vp * C, 26),
      dwte0 = as_float(test::random_vector((size_t)Vp * C, 27, 0.01));
  for (double& v : x) v = std::round(2 * v) / 2;                   // {−1, −½, 0, ½, 1}
  for (double& v : wte) v = std::round(2 * v) / 4;                 // {−½, −¼, 0, ¼, ½}
  for (size_t i = (size_t)V * C; i < wte.size(); i++) wte[i] = 0;  // padded rows
  std::vector<int32_t> targets(N);
  for (int n = 0; n < N; n++) targets[n] = n % 5 == 4 ? -1 : (n * 11) % V;
  const double dloss = 1.0 / 8;
  Vec g_ref((size_t)N * Vp), loss_ref(N);
  ref::matmul_forward(g_ref.data(), x.data(), wte.data(), N, C, Vp);
  const Vec logits = g_ref;  // exact
  ref::crossentropy_forward_backward(g_ref.data(), loss_ref.data(), targets.data(), N, V, Vp,
                                     dloss);
  Vec dx_ref((size_t)N * C), dwte_ref = dwte0;
  ref::matmul_backward(dx_ref.data(), dwte_ref.data(), g_ref.data(), x.data(), wte.data(), N, C,
                       Vp);
  Vec loss_bound, g_bound;
  test::crossentropy_bounds(loss_bound, g_bound, logits, targets, N, V, Vp, dloss, kFloatRoundoff);
  Vec g_mag = test::abs_of(g_ref);
  for (size_t i = 0; i < g_mag.size(); i++) {
    if (products == Products::bf16) g_bound[i] += kBf16Roundoff * (g_mag[i] + g_bound[i]);
    g_mag[i] += g_bound[i];
  }
  // dx = g · wte: g's error through |wte|, and the sums of Vp terms; dwte = dwte0 + gᵀ · x.
  Vec dx_bound((size_t)N * C), dwte_bound((size_t)Vp * C, 0.0), dx_mag((size_t)N * C),
      dwte_mag((size_t)Vp * C, 0.0);
  const Vec abs_x = test::abs_of(x), abs_w = test::abs_of(wte);
  ref::matmul_backward(dx_bound.data(), dwte_bound.data(), g_bound.data(), abs_x.data(),
                       abs_w.data(), N, C, Vp);
  ref::matmul_backward(dx_mag.data(), dwte_mag.data(), g_mag.data(), abs_x.data(), abs_w.data(), N,
                       C, Vp);
  for (size_t i = 0; i < dx_bound.size(); i++)
    dx_bound[i] += test::sum_error(Vp, kFloatRoundoff) * dx_mag[i];
  for (size_t i = 0; i < dwte_bound.size(); i++)
    dwte_bound[i] += test::sum_error(N + 1, kFloatRoundoff) * (dwte_mag[i] + std::fabs(dwte0[i]));
  auto X = dev.put(x), Wte = dev.put(wte), dWte = dev.put(dwte0), Logits = dev.zeros(g_ref.size()),
       Losses = dev.zeros(N), dX = dev.zeros(dx_ref.size());
  be.weights_changed();
  ClassifierArgs<float> args;
  args.logits = Logits.data(), args.losses = Losses.data(), args.targets = targets.data();
  args.inp = X.data(), args.wte = Wte.data(), args.dinp = dX.data(), args.dwte = dWte.data();
  args.rows = N, args.C = C, args.V = V, args.Vp = Vp, args.dloss = (float)dloss;
  args.accumulate = true;
  be.classifier_forward_backward(args);
  EXPECT_TRUE(within(dev.get(Losses), loss_ref, loss_bound, "losses"));
  EXPECT_TRUE(within(dev.get(dX), dx_ref, dx_bound, "dinp"));
  EXPECT_TRUE(within(dev.get(dWte), dwte_ref, dwte_bound, "dwte"));
  // Without the backward (dloss 0: evaluation), the losses alone.
  auto Losses_eval = dev.zeros(N);
  args.losses = Losses_eval.data(), args.dloss = 0;
  be.classifier_forward_backward(args);
  Vec eval_bound, unused_g;
  test::crossentropy_bounds(eval_bound, unused_g, logits, targets, N, V, Vp, 1.0, kFloatRoundoff);
  EXPECT_TRUE(within(dev.get(Losses_eval), loss_ref, eval_bound, "losses without a backward"));
}

// Biases: added to every row (one rounding each), and summed over the rows into what the gradient
// held (N + 1 terms).
void check_bias(Backend<float>& be, int N, int D) {
  Device dev{be};
  const Vec out0 = as_float(test::random_vector((size_t)N * D, 21)),
            bias = as_float(test::random_vector(D, 22)),
            dout = as_float(test::random_vector((size_t)N * D, 23)),
            db0 = as_float(test::random_vector(D, 24));
  Vec out_ref = out0, out_bound(out0.size()), db_ref = db0, db_mag = test::abs_of(db0);
  for (int n = 0; n < N; n++)
    for (int d = 0; d < D; d++) {
      const size_t i = (size_t)n * D + d;
      out_ref[i] += bias[d], out_bound[i] = kFloatRoundoff * std::fabs(out_ref[i]);
      db_ref[d] += dout[i], db_mag[d] += std::fabs(dout[i]);
    }
  Vec db_bound(D);
  for (int d = 0; d < D; d++) db_bound[d] = test::sum_error(N + 1, kFloatRoundoff) * db_mag[d];
  auto Out = dev.put(out0), Bias = dev.put(bias), dOut = dev.put(dout), dB = dev.put(db0);
  be.bias_forward(Out.data(), Bias.data(), N, D);
  be.bias_backward(dB.data(), dOut.data(), N, D);
  EXPECT_TRUE(within(dev.get(Out), out_ref, out_bound, "out"));
  EXPECT_TRUE(within(dev.get(dB), db_ref, db_bound, "dbias"));
}

// XSA's step alone (the backend's xsa_forward, which a device's attention backward calls to write
// z again), gated and grouped-query, on y and qkv given exactly.
void check_xsa(Backend<float>& be, int B, int T, int C, int H, int Hkv) {
  Device dev{be};
  const int D = C / H, W = C + 2 * Hkv * D, N = B * T;
  const Vec y = as_float(test::random_vector((size_t)N * C, 25)),
            qkv = as_float(test::random_vector((size_t)N * W, 26)),
            alpha = as_float(test::random_vector(H, 27, 0.5));
  Vec z_ref((size_t)N * C);
  ref::xsa_forward(z_ref.data(), y.data(), qkv.data(), ref::Heads{B, T, C, H, Hkv}, alpha.data());
  const test::XsaBounds bound =
      test::xsa_bounds(qkv, y, Vec((size_t)N * C, 0.0), Vec((size_t)N * W, 0.0), B, T, C, H, Hkv,
                       alpha, kFloatRoundoff);
  auto Y = dev.put(y), QKV = dev.put(qkv), Alpha = dev.put(alpha), Z = dev.zeros((size_t)N * C);
  ops::AttentionArgs<float> args;
  args.B = B, args.T = T, args.C = C, args.H = H, args.Hkv = Hkv, args.exclusive = true;
  args.qkv = QKV.data(), args.y = Y.data(), args.z = Z.data(), args.alpha = Alpha.data();
  be.xsa_forward(args);
  EXPECT_TRUE(within(dev.get(Z), z_ref, bound.z, "z"));
}

// Gates and sinks: α = tanh(w), w's gradient (1 − α²)·Σ_rows ∂L/∂α (N terms, then a product), and
// the sink logits' gradient summed over the sequences (B + 1 terms with what it held).
void check_xsa_alpha_and_sinks(Backend<float>& be, int N, int B, int H) {
  Device dev{be};
  const Vec w = as_float(test::random_vector(H, 28)),
            dalpha = as_float(test::random_vector((size_t)N * H, 29)),
            dw0 = as_float(test::random_vector(H, 30)),
            dlogit = as_float(test::random_vector((size_t)B * H, 31)),
            dsink0 = as_float(test::random_vector(H, 32));
  Vec alpha_ref(H), alpha_bound(H), dw_ref = dw0, dw_bound(H), dsink_ref = dsink0, dsink_bound(H);
  for (int h = 0; h < H; h++) {
    alpha_ref[h] = std::tanh(w[h]);
    // tanhf, on the CPU (glibc) and the GPU alike, within 2 ulp: 4u relative.
    alpha_bound[h] = 4 * kFloatRoundoff * std::fabs(alpha_ref[h]);
    double sum = 0, mag = 0;
    for (int n = 0; n < N; n++)
      sum += dalpha[(size_t)n * H + h], mag += std::fabs(dalpha[n * H + h]);
    // α as the backend computed it (within alpha_bound), then (1 − α²)·sum added to dw.
    const double a = (float)alpha_ref[h], factor = 1 - a * a;
    dw_ref[h] += (1 - alpha_ref[h] * alpha_ref[h]) * sum;
    dw_bound[h] = (2 * std::fabs(a) + alpha_bound[h]) * alpha_bound[h] * mag +
                  factor * test::sum_error(N, kFloatRoundoff) * mag +
                  4 * kFloatRoundoff * (factor * mag + std::fabs(dw0[h]));
    double s = dsink0[h], smag = std::fabs(dsink0[h]);
    for (int b = 0; b < B; b++)
      s += dlogit[(size_t)b * H + h], smag += std::fabs(dlogit[b * H + h]);
    dsink_ref[h] = s, dsink_bound[h] = test::sum_error(B + 1, kFloatRoundoff) * smag;
  }
  auto W = dev.put(w), Alpha = dev.zeros(H), dAlpha = dev.put(dalpha), dW = dev.put(dw0),
       dLogit = dev.put(dlogit), dSink = dev.put(dsink0);
  be.xsa_alpha(Alpha.data(), W.data(), H);
  be.xsa_alpha_backward(dW.data(), dAlpha.data(), Alpha.data(), N, H);
  be.sink_backward(dSink.data(), dLogit.data(), B, H);
  EXPECT_TRUE(within(dev.get(Alpha), alpha_ref, alpha_bound, "alpha"));
  EXPECT_TRUE(within(dev.get(dW), dw_ref, dw_bound, "dw"));
  EXPECT_TRUE(within(dev.get(dSink), dsink_ref, dsink_bound, "dsink"));
}

// XSA's rivals outside the attention (docs/SPEC.md §8): gated-attn's gate forward and backward,
// the value residual's mixing forward and backward, against float64 from the same
// float inputs. σ in float (expf within 2 ulp, then 1/(1 + e)) is within 4u relative; products
// and sums add u each; (1 − σ) near σ = 1 is bounded absolutely by σ's own error.
void check_rivals(Backend<float>& be, int N, int width, int ld) {
  Device dev{be};
  const size_t n = (size_t)N * width;
  const Vec u = as_float(test::random_vector(n, 41)), pre = as_float(test::random_vector(n, 42, 3)),
            g = as_float(test::random_vector(n, 43));
  const double U = kFloatRoundoff;
  Vec out_ref(n), out_bound(n), du_ref(n), du_bound(n), dpre_ref(n), dpre_bound(n);
  for (size_t i = 0; i < n; i++) {
    const double sg = 1 / (1 + std::exp(-pre[i]));
    out_ref[i] = u[i] * sg, out_bound[i] = 6 * U * std::fabs(out_ref[i]);
    du_ref[i] = g[i] * sg, du_bound[i] = 6 * U * std::fabs(du_ref[i]);
    dpre_ref[i] = g[i] * u[i] * sg * (1 - sg);
    dpre_bound[i] = 12 * U * std::fabs(g[i] * u[i]) * sg;
  }
  auto dU = dev.put(u), dPre = dev.put(pre), dG = dev.put(g), Out = dev.zeros(n),
       dUout = dev.zeros(n);
  be.output_gate_forward(Out.data(), dU.data(), dPre.data(), n);
  be.output_gate_backward(dUout.data(), dG.data(), dG.data(), dU.data(), dPre.data(),
                          n);  // in place
  EXPECT_TRUE(within(dev.get(Out), out_ref, out_bound, "gate out"));
  EXPECT_TRUE(within(dev.get(dUout), du_ref, du_bound, "gate d_u"));
  EXPECT_TRUE(within(dev.get(dG), dpre_ref, dpre_bound, "gate d_pre"));

  // The value residual on columns [at, at + width) of rows ld apart.
  const int at = ld - width;
  const Vec qkv = as_float(test::random_vector((size_t)N * ld, 44)),
            first = as_float(test::random_vector(n, 45)),
            dqkv = as_float(test::random_vector((size_t)N * ld, 46)),
            dfirst0 = as_float(test::random_vector(n, 47));
  const double lambda = 0.3f, dlambda0 = 0.25;
  Vec mixed_ref = qkv, mixed_bound((size_t)N * ld, 0.0), dv_ref = dqkv, dv_bound(dqkv.size(), 0.0);
  Vec dfirst_ref(n), dfirst_bound(n);
  double dlambda_ref = dlambda0, dlambda_mag = std::fabs(dlambda0);
  for (int r = 0; r < N; r++)
    for (int c = 0; c < width; c++) {
      const size_t q = (size_t)r * ld + at + c, f = (size_t)r * width + c;
      mixed_ref[q] = lambda * qkv[q] + (1 - lambda) * first[f];
      mixed_bound[q] = 3 * U * (std::fabs(lambda * qkv[q]) + std::fabs((1 - lambda) * first[f]));
      dlambda_ref += dqkv[q] * (qkv[q] - first[f]);
      dlambda_mag += std::fabs(dqkv[q] * (qkv[q] - first[f]));
      dv_ref[q] = lambda * dqkv[q], dv_bound[q] = U * std::fabs(dv_ref[q]);
      dfirst_ref[f] = dfirst0[f] + (1 - lambda) * dqkv[q];
      dfirst_bound[f] = 3 * U * (std::fabs(dfirst0[f]) + std::fabs((1 - lambda) * dqkv[q]));
    }
  auto Qkv = dev.put(qkv), First = dev.put(first), Raw = dev.zeros(n),
       Lambda = dev.put(Vec{lambda}), dQkv = dev.put(dqkv), dFirst = dev.put(dfirst0),
       dLambda = dev.put(Vec{dlambda0});
  ops::ValueMixArgs<float> a;
  a.qkv = Qkv.data(), a.v_raw = Raw.data(), a.v_first = First.data(), a.lambda = Lambda.data();
  a.N = N, a.ld = ld, a.at = at, a.width = width;
  be.value_mix_forward(a);
  EXPECT_TRUE(within(dev.get(Qkv), mixed_ref, mixed_bound, "mixed values"));
  Vec raw_ref(n);
  for (int r = 0; r < N; r++)
    for (int c = 0; c < width; c++) raw_ref[(size_t)r * width + c] = qkv[(size_t)r * ld + at + c];
  EXPECT_TRUE(within(dev.get(Raw), raw_ref, Vec(n, 0.0), "kept values"));
  a.dqkv = dQkv.data(), a.d_first = dFirst.data(), a.accumulate_first = true;
  a.dlambda = dLambda.data();
  be.value_mix_backward(a);
  EXPECT_TRUE(within(dev.get(dQkv), dv_ref, dv_bound, "dv"));
  EXPECT_TRUE(within(dev.get(dFirst), dfirst_ref, dfirst_bound, "d_first"));
  EXPECT_TRUE(within(dev.get(dLambda), Vec{dlambda_ref}, Vec{4 * U * dlambda_mag}, "dlambda"));
}

// add_rows: columns [at, at + width) of rows ld apart += src's rows (width apart), one rounding
// each.
void check_add_rows(Backend<float>& be, int N, int width, int ld) {
  Device dev{be};
  const int at = ld - width;
  const Vec dst = as_float(test::random_vector((size_t)N * ld, 44)),
            src = as_float(test::random_vector((size_t)N * width, 45));
  Vec sum_ref = dst, sum_bound((size_t)N * ld, 0.0);
  for (int r = 0; r < N; r++)
    for (int c = 0; c < width; c++) {
      const size_t q = (size_t)r * ld + at + c, f = (size_t)r * width + c;
      sum_ref[q] += src[f], sum_bound[q] = kFloatRoundoff * std::fabs(sum_ref[q]);
    }
  auto Dst = dev.put(dst), Src = dev.put(src);
  be.add_rows(Dst.data() + at, ld, Src.data(), width, N, width);
  EXPECT_TRUE(within(dev.get(Dst), sum_ref, sum_bound, "add_rows"));
}

// ReLU² (docs/SPEC.md §11) forward and backward against float64 from the same float inputs: x·x
// and (2x)·dout each one rounding (2x is exact): within u of the result.
void check_relu2(Backend<float>& be, size_t n) {
  Device dev{be};
  const Vec x = as_float(test::random_vector(n, 81)), g = as_float(test::random_vector(n, 82));
  Vec out_ref(n), out_bound(n), din_ref(n), din_bound(n);
  ref::relu2_forward(out_ref.data(), x.data(), n);
  ref::relu2_backward(din_ref.data(), x.data(), g.data(), n);
  for (size_t i = 0; i < n; i++)
    out_bound[i] = kFloatRoundoff * std::fabs(out_ref[i]),
    din_bound[i] = kFloatRoundoff * std::fabs(din_ref[i]);
  auto X = dev.put(x), G = dev.put(g), Out = dev.zeros(n), dIn = dev.zeros(n);
  be.relu2_forward(Out.data(), X.data(), n);
  be.relu2_backward(dIn.data(), X.data(), G.data(), n);
  EXPECT_TRUE(within(dev.get(Out), out_ref, out_bound, "relu2"));
  EXPECT_TRUE(within(dev.get(dIn), din_ref, din_bound, "relu2 backward"));
}

// Soft-capping (docs/SPEC.md §11): the capped logits, and the soft-capped cross-entropy's losses
// and gradient (one ignored row), against float64 from the same inputs (ref::crossentropy_softcap:
// the cap, the plain cross-entropy, then the chain rule through tanh). The float kernels round the
// cap (tanh within 2 ulp, the product and quotient u each: 4u of the capped value), the exps
// (2u), the row's sum (sum_error(V)) and the gradient's products (4u): the loss within 8u of its
// capped logits' scale plus the sum's error, every gradient entry within 16u + sum_error(V) of the
// row's largest entry.
void check_softcap(Backend<float>& be, int N, int V, int Vp, float cap) {
  Device dev{be};
  const double U = kFloatRoundoff;
  const Vec logits = as_float(test::random_vector((size_t)N * Vp, 83, 3));
  std::vector<int32_t> targets(N);
  for (int n = 0; n < N; n++) targets[n] = (n * 7) % V;
  targets[1] = -1;
  Vec capped_ref = logits, losses_ref(N), grad_ref = logits, capped_bound((size_t)N * Vp, 0.0),
      loss_bound(N), grad_bound((size_t)N * Vp, 0.0);
  for (int n = 0; n < N; n++)
    for (int j = 0; j < V; j++) {
      const size_t at = (size_t)n * Vp + j;
      capped_ref[at] = cap * std::tanh(logits[at] / cap);
      capped_bound[at] = 4 * U * std::fabs(capped_ref[at]);
    }
  ref::crossentropy_softcap(grad_ref.data(), losses_ref.data(), targets.data(), N, V, Vp, 1.0,
                            (double)cap);
  for (int n = 0; n < N; n++) {
    double largest = 0;
    for (int j = 0; j < Vp; j++)
      largest = std::max(largest, std::fabs(grad_ref[(size_t)n * Vp + j]));
    for (int j = 0; j < Vp; j++)
      grad_bound[(size_t)n * Vp + j] = (16 * U + test::sum_error(V, U)) * std::max(largest, 1e-30);
    loss_bound[n] = (8 * U + test::sum_error(V, U)) * (cap + std::fabs(losses_ref[n]));
  }
  auto Capped = dev.put(logits), Logits = dev.put(logits), Losses = dev.zeros(N);
  be.softcap_forward(Capped.data(), N, V, Vp, cap);
  EXPECT_TRUE(within(dev.get(Capped), capped_ref, capped_bound, "capped logits"));
  be.crossentropy_softcap(Logits.data(), Losses.data(), targets.data(), N, V, Vp, 1.0f, cap);
  EXPECT_TRUE(within(dev.get(Losses), losses_ref, loss_bound, "losses"));
  EXPECT_TRUE(within(dev.get(Logits), grad_ref, grad_bound, "gradient"));
}

// Muon's steps on one matrix [rows, cols] (docs/SPEC.md §11) against ref::muon_update, float64
// written from the spec with explicit transposes: the momentum (two products and a sum per
// element: within 3u), the Newton–Schulz polynomial (one rounding per product and sum: 3u of the
// terms' magnitudes), the iteration's result O and the updated weights. O goes through five steps
// of three products over k = min(rows, cols) terms, each within sum_error(k) + 2u of its
// magnitudes (up to √k of its values), which the quintic, whose derivative stays below 4 on its
// band, carries into the next: O within 5 · 4 · 3 · (sum_error(k) + 2u) · √k of its largest entry.
// bf16 products (2⁻⁸ per operand) would allow 5 · 4 · 3 · 2 · 2⁻⁸ ≈ 0.5 of it in the worst case;
// there the bound is 0.1 of O's largest entry, which a wrong transpose or a step left out exceeds
// many times. The weights: w·keep − step·o, within O's bound times step and 2u of |w|.
void check_muon(Backend<float>& be, Products p, int rows, int cols) {
  Device dev{be};
  const size_t n = (size_t)rows * cols;
  const int k = std::min(rows, cols);
  const double U = kFloatRoundoff;
  const Vec g = as_float(test::random_vector(n, 91)),
            m0 = as_float(test::random_vector(n, 92, 0.1)),
            w0 = as_float(test::random_vector(n, 93, 0.1));
  Vec w_ref = w0, m_ref = m0;
  ref::MuonStep step;
  step.lr = 0.02, step.weight_decay = 0.1, step.momentum = 0.95, step.grad_scale = 0.5;
  const std::vector<double> o_ref =
      ref::muon_update(w_ref.data(), g.data(), m_ref.data(), rows, cols, step);
  Vec m_bound(n);
  for (size_t i = 0; i < n; i++)
    m_bound[i] = 3 * U * (0.95 * std::fabs(m0[i]) + 0.05 * std::fabs(g[i]) * 0.5);
  double o_largest = 0;
  for (double o : o_ref) o_largest = std::max(o_largest, std::fabs(o));
  const double o_tol = p == Products::bf16 ? 0.1 * o_largest
                                           : 5 * 4 * 3 * (test::sum_error(k, U) + 2 * U) *
                                                 std::sqrt((double)k) * o_largest;
  const double scale = std::sqrt(std::max(1.0, (double)rows / cols));
  Vec w_bound(n);
  for (size_t i = 0; i < n; i++) w_bound[i] = 0.02 * scale * o_tol + 2 * U * std::fabs(w0[i]);

  auto G = dev.put(g), M = dev.put(m0), W = dev.put(w0), X = dev.zeros(n), Next = dev.zeros(n),
       Gram = dev.zeros((size_t)k * k), Gram2 = dev.zeros((size_t)k * k),
       Poly = dev.zeros((size_t)k * k);
  ops::MuonSettings s;
  s.momentum = 0.95, s.grad_scale = 0.5;
  be.muon_momentum(M.data(), X.data(), G.data(), n, s);
  EXPECT_TRUE(within(dev.get(M), m_ref, m_bound, "momentum"));
  be.newton_schulz({X.data(), Next.data(), Gram.data(), Gram2.data(), Poly.data(), rows, cols});
  EXPECT_TRUE(within(dev.get(X), o_ref, Vec(n, o_tol), "Newton-Schulz's O"));
  s.keep = 1 - 0.02 * 0.1, s.step = 0.02 * scale;
  be.muon_apply(W.data(), X.data(), n, s);
  EXPECT_TRUE(within(dev.get(W), w_ref, w_bound, "updated weights"));
  // The polynomial alone: b A + c A² + a I from two given matrices.
  const Vec a = as_float(test::random_vector((size_t)k * k, 94)),
            a2 = as_float(test::random_vector((size_t)k * k, 95));
  const ops::NewtonSchulzCoefficients c;
  Vec poly_ref((size_t)k * k), poly_bound((size_t)k * k);
  for (int i = 0; i < k; i++)
    for (int j = 0; j < k; j++) {
      const size_t at = (size_t)i * k + j;
      poly_ref[at] = c.b * a[at] + c.c * a2[at] + (i == j ? c.a : 0.0);
      poly_bound[at] =
          3 * U * (std::fabs(c.b * a[at]) + std::fabs(c.c * a2[at]) + (i == j ? c.a : 0));
    }
  auto A = dev.put(a), A2 = dev.put(a2);
  be.newton_schulz_poly(Poly.data(), A.data(), A2.data(), k, c);
  EXPECT_TRUE(within(dev.get(Poly), poly_ref, poly_bound, "polynomial"));
}

// Value embeddings' ops as the block runs them (docs/SPEC.md §10): the tokens' rows of E gathered
// and added to the v columns [at, at + width) of rows ld apart (one rounding each); backward, those
// columns' gradients copied out and added into E's rows by token, in row order (the sum's bound).
void check_value_embed(Backend<float>& be, int N, int V, int width, int ld) {
  Device dev{be};
  const int at = ld - width;
  const Vec qkv = as_float(test::random_vector((size_t)N * ld, 71)),
            table = as_float(test::random_vector((size_t)V * width, 72)),
            dqkv = as_float(test::random_vector((size_t)N * ld, 73));
  std::vector<int32_t> tokens(N);
  for (int n = 0; n < N; n++) tokens[n] = (n * 11) % V;  // rows seen several times
  Vec qkv_ref = qkv, qkv_bound((size_t)N * ld, 0.0), dtable_ref = table,
      magnitude = test::abs_of(table), terms(V, 1.0);
  for (int r = 0; r < N; r++) {
    terms[tokens[r]] += 1;
    for (int c = 0; c < width; c++) {
      const size_t q = (size_t)r * ld + at + c, e = (size_t)tokens[r] * width + c;
      qkv_ref[q] += table[e], qkv_bound[q] = kFloatRoundoff * std::fabs(qkv_ref[q]);
      dtable_ref[e] += dqkv[q], magnitude[e] += std::fabs(dqkv[q]);
    }
  }
  Vec dtable_bound((size_t)V * width);
  for (int v = 0; v < V; v++)
    for (int c = 0; c < width; c++)
      dtable_bound[(size_t)v * width + c] =
          test::sum_error(terms[v], kFloatRoundoff) * magnitude[(size_t)v * width + c];
  auto Qkv = dev.put(qkv), Table = dev.put(table), dQkv = dev.put(dqkv), dTable = dev.put(table),
       Rows = dev.zeros((size_t)N * width);
  be.gather_rows(Rows.data(), Table.data(), tokens.data(), N, width);
  be.add_rows(Qkv.data() + at, ld, Rows.data(), width, N, width);
  EXPECT_TRUE(within(dev.get(Qkv), qkv_ref, qkv_bound, "values with their embeddings"));
  be.copy_rows(Rows.data(), width, dQkv.data() + at, ld, N, width);
  be.encoder_backward(dTable.data(), Rows.data(), tokens.data(), N, width);
  EXPECT_TRUE(within(dev.get(dTable), dtable_ref, dtable_bound, "dE"));
}

// QK-norm forward and backward on rows [N, ld] of H query and Hkv key heads of D, against float64
// from the same float inputs (ref::qk_norm_*). Forward: the kernel sums x² in double and rounds
// rstd once (u), then x·r and ·g round once each: within 4u of |out|. Backward: d̂ = dout ⊙ g and
// the product with x̂ in double from the rounded rstd (u relative), one rounding at the end:
// within 6u · r (|d̂_c| + |x̂_c| mean|d̂ ⊙ x̂|) + u|dx|; the scales' sums within 4u of the sum of
// magnitudes (their rstd's u, the double sum's, the rounding and the accumulation).
void check_qk_norm(Backend<float>& be, int N, int H, int Hkv, int D, int ld) {
  Device dev{be};
  const int heads = H + Hkv;
  const double U = kFloatRoundoff;
  const Vec qkv = as_float(test::random_vector((size_t)N * ld, 61, 2)),
            gq = as_float(test::random_vector(D, 62, 1)),
            gk = as_float(test::random_vector(D, 63, 1)),
            dout = as_float(test::random_vector((size_t)N * ld, 64)),
            dgq0 = as_float(test::random_vector(D, 65, 0.1)),
            dgk0 = as_float(test::random_vector(D, 66, 0.1));
  Vec out_ref = qkv, out_bound((size_t)N * ld, 0.0), raw_ref((size_t)N * heads * D);
  Vec dx_ref = dout, dx_bound((size_t)N * ld, 0.0), dgq_ref = dgq0, dgk_ref = dgk0;
  Vec dgq_mag(D), dgk_mag(D);
  for (int j = 0; j < D; j++) dgq_mag[j] = std::fabs(dgq0[j]), dgk_mag[j] = std::fabs(dgk0[j]);
  ref::qk_norm_forward(out_ref.data(), gq.data(), gk.data(), N, ld, H, Hkv, D);
  ref::qk_norm_backward(dx_ref.data(), dgq_ref.data(), dgk_ref.data(), qkv.data(), gq.data(),
                        gk.data(), ref::QkRows{N, ld, H, Hkv, D});
  for (int n = 0; n < N; n++)
    for (int h = 0; h < heads; h++) {
      const size_t at = (size_t)n * ld + (size_t)h * D;
      const double* g = h < H ? gq.data() : gk.data();
      double ms = 0, dot_mag = 0;
      for (int j = 0; j < D; j++) ms += qkv[at + j] * qkv[at + j] / D;
      const double r = 1 / std::sqrt(ms + 1e-6);
      for (int j = 0; j < D; j++) dot_mag += std::fabs(dout[at + j] * g[j] * qkv[at + j] * r);
      for (int j = 0; j < D; j++) {
        const double xhat = qkv[at + j] * r;
        raw_ref[((size_t)n * heads + h) * D + j] = qkv[at + j];
        out_bound[at + j] = 4 * U * std::fabs(out_ref[at + j]);
        dx_bound[at + j] =
            6 * U * r * (std::fabs(dout[at + j] * g[j]) + std::fabs(xhat) * dot_mag / D) +
            U * std::fabs(dx_ref[at + j]);
        (h < H ? dgq_mag : dgk_mag)[j] += std::fabs(dout[at + j] * xhat);
      }
    }
  Vec dgq_bound(D), dgk_bound(D);
  for (int j = 0; j < D; j++) dgq_bound[j] = 4 * U * dgq_mag[j], dgk_bound[j] = 4 * U * dgk_mag[j];
  auto Qkv = dev.put(qkv), Gq = dev.put(gq), Gk = dev.put(gk), Raw = dev.zeros(raw_ref.size()),
       Rstd = dev.zeros((size_t)N * heads), dQkv = dev.put(dout), dGq = dev.put(dgq0),
       dGk = dev.put(dgk0);
  ops::QkNormArgs<float> a;
  a.qkv = Qkv.data(), a.raw = Raw.data(), a.rstd = Rstd.data(), a.q_scale = Gq.data();
  a.k_scale = Gk.data(), a.N = N, a.ld = ld, a.H = H, a.Hkv = Hkv, a.D = D;
  be.qk_norm_forward(a);
  EXPECT_TRUE(within(dev.get(Qkv), out_ref, out_bound, "normalized q and k (v untouched)"));
  EXPECT_TRUE(within(dev.get(Raw), raw_ref, Vec(raw_ref.size(), 0.0), "kept q and k"));
  a.dqkv = dQkv.data(), a.dq_scale = dGq.data(), a.dk_scale = dGk.data();
  be.qk_norm_backward(a);
  EXPECT_TRUE(within(dev.get(dQkv), dx_ref, dx_bound, "dq, dk (dv untouched)"));
  EXPECT_TRUE(within(dev.get(dGq), dgq_ref, dgq_bound, "dq_scale"));
  EXPECT_TRUE(within(dev.get(dGk), dgk_ref, dgk_bound, "dk_scale"));
}

// Two AdamW steps (torch.optim.AdamW's formulas in float64), the bound carried step to step.
void check_adamw(Backend<float>& be, size_t n) {
  Device dev{be};
  const double lr = 1e-3, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1, scale = 0.5;
  Vec p = as_float(test::random_vector(n, 33)), m(n, 0.0), v(n, 0.0);
  auto P = dev.put(p), M = dev.zeros(n), V = dev.zeros(n);
  test::AdamBounds bound{Vec(n, 0.0), Vec(n, 0.0), Vec(n, 0.0)};
  for (int64_t step = 1; step <= 2; step++) {
    const Vec g = as_float(test::random_vector(n, 33 + step));
    auto G = dev.put(g);
    test::adamw_bound_step(bound, p, m, v, g, lr, b1, b2, eps, wd, scale, step, kFloatRoundoff);
    ref::adamw_update(p.data(), g.data(), m.data(), v.data(), n,
                      ops::AdamWSettings{lr, b1, b2, eps, wd, scale, step});
    be.adamw_update(P.data(), G.data(), M.data(), V.data(), n,
                    {.lr = lr,
                     .beta1 = b1,
                     .beta2 = b2,
                     .eps = eps,
                     .weight_decay = wd,
                     .grad_scale = scale,
                     .step = step});
  }
  EXPECT_TRUE(within(dev.get(P), p, bound.p, "param"));
  EXPECT_TRUE(within(dev.get(M), m, bound.m, "m"));
  EXPECT_TRUE(within(dev.get(V), v, bound.v, "v"));
}

// The reductions: Σx and Σx² of floats, summed in double (n roundings of 2^-53 at most), and the
// same bits on a second call (a loss or a gradient norm must not depend on the call).
void check_reductions(Backend<float>& be, size_t n) {
  Device dev{be};
  const Vec x = as_float(test::random_vector(n, 45));
  double sum = 0, sum_sq = 0, mag = 0, mag_sq = 0;
  for (double e : x) sum += e, sum_sq += e * e, mag += std::fabs(e), mag_sq += e * e;
  auto X = dev.put(x);
  const double got = be.sum(X.data(), n), got_sq = be.sum_of_squares(X.data(), n);
  const double u = 0x1p-53;
  EXPECT_NEAR(got, sum, test::sum_error((double)n, u) * mag);
  EXPECT_NEAR(got_sq, sum_sq, (test::sum_error((double)n, u) + u) * mag_sq);
  EXPECT_EQ(be.sum(X.data(), n), got);
  EXPECT_EQ(be.sum_of_squares(X.data(), n), got_sq);
}

// The decoder's attention over a key/value cache: one sequence of S rows, its last R rows asking
// with every key and value in the cache (slot0 = S − R), XSA with a gate and a sink, grouped-query
// heads; against the reference over the whole sequence, within the bound of one pass over the
// keys (the cached kernel's).
void check_cached_attention(Backend<float>& be, int S, int R, int C, int H, int Hkv) {
  Device dev{be};
  const int D = C / H, Ck = Hkv * D, W = C + 2 * Ck;
  const Vec qkv = as_float(test::random_vector((size_t)S * W, 40)),
            sink = as_float(test::random_vector(H, 41)),
            alpha = as_float(test::random_vector(H, 42, 0.5));
  Vec y_ref((size_t)S * C), lse_ref((size_t)H * S), z_ref((size_t)S * C);
  ref::attention_forward(y_ref.data(), lse_ref.data(), qkv.data(), ref::Heads{1, S, C, H, Hkv},
                         sink.data());
  ref::xsa_forward(z_ref.data(), y_ref.data(), qkv.data(), ref::Heads{1, S, C, H, Hkv},
                   alpha.data());
  test::AttentionProblem problem{.B = 1,
                                 .T = S,
                                 .C = C,
                                 .H = H,
                                 .Hkv = Hkv,
                                 .exclusive = true,
                                 .qkv = qkv,
                                 .sink = sink,
                                 .alpha = alpha,
                                 .dout = Vec((size_t)S * C, 0.0),
                                 .dqkv0 = Vec(qkv.size(), 0.0),
                                 .key_tile = S};
  const test::AttentionBounds bound = test::attention_bounds(problem, kFloatRoundoff);
  Vec k((size_t)S * Ck), v((size_t)S * Ck), rows((size_t)R * W);
  for (int t = 0; t < S; t++)
    for (int c = 0; c < Ck; c++)
      k[(size_t)t * Ck + c] = qkv[(size_t)t * W + C + c],
                         v[(size_t)t * Ck + c] = qkv[(size_t)t * W + C + Ck + c];
  std::copy(qkv.begin() + (size_t)(S - R) * W, qkv.end(), rows.begin());
  auto K = dev.put(k), V = dev.put(v), Rows = dev.put(rows), Sink = dev.put(sink),
       Alpha = dev.put(alpha), Y = dev.zeros((size_t)R * C), Z = dev.zeros((size_t)R * C);
  ops::AttentionArgs<float> args;
  args.B = 1, args.T = R, args.C = C, args.H = H, args.Hkv = Hkv, args.exclusive = true;
  args.qkv = Rows.data(), args.y = Y.data(), args.z = Z.data(), args.alpha = Alpha.data();
  args.sink = Sink.data();
  be.attention_forward_cached(args, {.k = K.data(), .v = V.data(), .prefix = 0, .slot0 = S - R});
  const auto last = [&](const Vec& a) { return Vec(a.end() - (size_t)R * C, a.end()); };
  EXPECT_TRUE(within(dev.get(Y), last(y_ref), last(bound.y), "y"));
  EXPECT_TRUE(within(dev.get(Z), last(z_ref), last(bound.z), "z"));
}

struct AttentionShape {
  int B, T, C, H, Hkv;
  bool exclusive, sink;
};
void check_attention(Backend<float>& be, bool bf16, AttentionShape s) {
  if (bf16 && s.exclusive)
    GTEST_SKIP() << "no bound derived for XSA's z behind bf16 tiles (bf16_test holds z, y and the "
                    "gradients to the fp32 path's bits)";
  Device dev{be};
  const int N = s.B * s.T, D = s.C / s.H, Hk = s.Hkv ? s.Hkv : s.H, Wd = s.C + 2 * Hk * D;
  // bf16 tiles: inputs bf16-exact, so that the bound is that of the tiles' own roundings.
  const auto exact = [&](Vec v) { return bf16 ? as_bf16(std::move(v)) : as_float(std::move(v)); };
  const Vec qkv = exact(test::random_vector((size_t)N * Wd, 11)),
            dout = exact(test::random_vector((size_t)N * s.C, 12)),
            sink = as_float(test::random_vector(s.H, 13));
  const double* sink_ref = s.sink ? sink.data() : nullptr;
  Vec y_ref(N * s.C), lse_ref((size_t)s.B * s.H * s.T), dqkv_ref(N * Wd, 0.0), dsink_ref(s.H, 0.0);
  Vec z_ref(N * s.C), dz_as_dy = dout;
  ref::attention_forward(y_ref.data(), lse_ref.data(), qkv.data(),
                         ref::Heads{s.B, s.T, s.C, s.H, s.Hkv}, sink_ref);
  if (s.exclusive) {
    ref::xsa_forward(z_ref.data(), y_ref.data(), qkv.data(), ref::Heads{s.B, s.T, s.C, s.H, s.Hkv},
                     static_cast<const double*>(nullptr));
    ref::xsa_backward(dz_as_dy.data(), dqkv_ref.data(), dout.data(), y_ref.data(), qkv.data(),
                      ref::Heads{s.B, s.T, s.C, s.H, s.Hkv}, static_cast<const double*>(nullptr),
                      static_cast<double*>(nullptr));
  }
  ref::attention_backward(dqkv_ref.data(), dz_as_dy.data(), qkv.data(),
                          ref::Heads{s.B, s.T, s.C, s.H, s.Hkv}, sink_ref, dsink_ref.data());
  auto QKV = dev.put(qkv), dOut = dev.put(dout), Sink = dev.put(sink);
  auto Y = dev.zeros(y_ref.size()), Z = dev.zeros(y_ref.size()), Lse = dev.zeros(lse_ref.size()),
       dQKV = dev.zeros(dqkv_ref.size()), dSink = dev.zeros((size_t)s.B * s.H);
  ops::AttentionArgs<float> args{.B = s.B,
                                 .T = s.T,
                                 .C = s.C,
                                 .H = s.H,
                                 .Hkv = s.Hkv,
                                 .exclusive = s.exclusive,
                                 .qkv = QKV.data(),
                                 .y = Y.data(),
                                 .z = s.exclusive ? Z.data() : nullptr,
                                 .lse = Lse.data(),
                                 .sink = s.sink ? Sink.data() : nullptr,
                                 .dqkv = dQKV.data(),
                                 .d_out = dOut.data(),
                                 .dsink = s.sink ? dSink.data() : nullptr};
  args.write_dqkv = true;
  be.attention_forward(args);
  const std::vector<float> y = dev.get(Y), lse = dev.get(Lse), z = dev.get(Z);
  be.attention_backward(args);
  const std::vector<float> dqkv = dev.get(dQKV), dsink = dev.get(dSink);
  if (!bf16) {
    const test::AttentionBounds bound = test::attention_bounds({.B = s.B,
                                                                .T = s.T,
                                                                .C = s.C,
                                                                .H = s.H,
                                                                .Hkv = s.Hkv,
                                                                .exclusive = s.exclusive,
                                                                .qkv = qkv,
                                                                .sink = s.sink ? sink : Vec{},
                                                                .dout = dout,
                                                                .dqkv0 = Vec(N * Wd, 0.0)},
                                                               kFloatRoundoff);
    EXPECT_TRUE(within(y, y_ref, bound.y, "y"));
    EXPECT_TRUE(within(lse, lse_ref, bound.lse, "lse"));
    if (s.exclusive) {
      EXPECT_TRUE(within(z, z_ref, bound.z, "z"));
    }
    EXPECT_TRUE(within(dqkv, dqkv_ref, bound.dqkv, "dqkv"));
    if (s.sink) {
      Vec dsink_sum, dsink_bound;
      test::dsink_summed(dsink, bound.dsink, s.B, s.H, dsink_sum, dsink_bound);
      EXPECT_TRUE(within(dsink_sum, dsink_ref, dsink_bound, "dsink"));
    }
    return;
  }
  // bf16 tiles (tests/bounds.h, attention_term_magnitudes): u·Σ|terms| + 2^-16 of the largest
  // entry. The backward here reads the forward's own y and lse, whose errors the bound of y and
  // lse covers once more (y·dy in D_i, lse in p).
  Vec y_mag, d_mag;
  test::attention_term_magnitudes(qkv, dout, lse_ref, s.B, s.T, s.C, s.H, s.Hkv, y_mag, d_mag);
  const auto bound_of = [](const Vec& exact, const Vec& mag, double factor) {
    double largest = 0;
    for (double e : exact) largest = std::max(largest, std::fabs(e));
    Vec b(exact.size());
    for (size_t i = 0; i < b.size(); i++)
      b[i] = factor * (kBf16Roundoff * mag[i] + 0x1p-16 * largest);
    return b;
  };
  EXPECT_TRUE(within(y, y_ref, bound_of(y_ref, y_mag, 1), "y"));
  EXPECT_TRUE(within(lse, lse_ref, bound_of(lse_ref, Vec(lse_ref.size(), 0.0), 1), "lse"));
  EXPECT_TRUE(within(dqkv, dqkv_ref, bound_of(dqkv_ref, d_mag, 2), "dqkv"));
}

// ---- the table ----

// One case: an op family on one shape, its product-input activations in one storage.
struct OpCase {
  std::string name;
  Op family;
  Storage storage;
  std::function<void(Backend<float>&, Products, Storage)> check;
};
std::vector<OpCase> op_cases() {
  std::vector<OpCase> cases;
  // The families with product inputs, in each storage.
  for (Storage st : {Storage::fp32, Storage::bf16}) {
    const std::string in = st == Storage::bf16 ? "_bf16_activations" : "";
    for (MatmulShape s : {MatmulShape{37, 64, 96}, MatmulShape{130, 384, 128}})
      cases.push_back(
          {fmt::format("matmul_N{}_I{}_O{}{}", s.N, s.I, s.O, in), Op::matmul, st,
           [s](Backend<float>& be, Products p, Storage st) { check_matmul(be, p, s, st); }});
    for (int C : {64, 768})
      cases.push_back(
          {fmt::format("layernorm_N37_C{}{}", C, in), Op::layernorm, st,
           [C](Backend<float>& be, Products, Storage st) { check_layernorm(be, 37, C, st); }});
    cases.push_back({"gelu_n4099" + in, Op::gelu, st,
                     [](Backend<float>& be, Products, Storage st) { check_gelu(be, 4099, st); }});
    cases.push_back(
        {"rope_B2_T37_D64_H4_Hkv2" + in, Op::rope, st,
         [](Backend<float>& be, Products, Storage st) { check_rope(be, 2, 37, 256, 4, 2, st); }});
    cases.push_back(
        {"rope_B1_T70_D128_H2_Hkv2" + in, Op::rope, st,
         [](Backend<float>& be, Products, Storage st) { check_rope(be, 1, 70, 256, 2, 0, st); }});
  }
  const auto fp32_case = [&](std::string name, Op family, std::function<void(Backend<float>&)> f) {
    cases.push_back({std::move(name), family, Storage::fp32,
                     [f](Backend<float>& be, Products, Storage) { f(be); }});
  };
  fp32_case("bias_N37_D96", Op::bias, [](Backend<float>& be) { check_bias(be, 37, 96); });
  fp32_case("encoder_N70_V50_C64", Op::embedding,
            [](Backend<float>& be) { check_encoder(be, 70, 50, 64); });
  fp32_case("crossentropy_N9_V50_Vp64", Op::crossentropy,
            [](Backend<float>& be) { check_crossentropy(be, 9, 50, 64); });
  fp32_case("crossentropy_N7_V1000_Vp1024", Op::crossentropy,
            [](Backend<float>& be) { check_crossentropy(be, 7, 1000, 1024); });
  for (const std::array<int, 4> s : {std::array{9, 64, 50, 64}, std::array{70, 96, 1000, 1024}})
    cases.push_back({fmt::format("classifier_N{}_C{}_V{}_Vp{}", s[0], s[1], s[2], s[3]),
                     Op::classifier, Storage::fp32, [s](Backend<float>& be, Products p, Storage) {
                       check_classifier(be, p, s[0], s[1], s[2], s[3]);
                     }});
  fp32_case("xsa_alpha_and_sinks_N70_B2_H12", Op::xsa_alpha_and_sinks,
            [](Backend<float>& be) { check_xsa_alpha_and_sinks(be, 70, 2, 12); });
  fp32_case("adamw_n1003", Op::adamw, [](Backend<float>& be) { check_adamw(be, 1003); });
  fp32_case("rivals_N70_W32_ld96", Op::rivals,
            [](Backend<float>& be) { check_rivals(be, 70, 32, 96); });
  fp32_case("add_rows_N70_W32_ld96", Op::embedding,
            [](Backend<float>& be) { check_add_rows(be, 70, 32, 96); });
  fp32_case("value_embed_N70_V50_W32_ld96", Op::embedding,
            [](Backend<float>& be) { check_value_embed(be, 70, 50, 32, 96); });
  fp32_case("relu2_n4099", Op::gelu, [](Backend<float>& be) { check_relu2(be, 4099); });
  fp32_case("softcap_N9_V50_Vp64_cap3", Op::crossentropy,
            [](Backend<float>& be) { check_softcap(be, 9, 50, 64, 3.0f); });
  fp32_case("softcap_N5_V1000_Vp1024_cap15", Op::crossentropy,
            [](Backend<float>& be) { check_softcap(be, 5, 1000, 1024, 15.0f); });
  // Muon: a wide matrix, a tall one (iterated on XᵀX) and a square one past a product's tile.
  for (const std::array<int, 2> shape :
       {std::array{24, 72}, std::array{72, 24}, std::array{130, 130}})
    cases.push_back({fmt::format("muon_{}x{}", shape[0], shape[1]), Op::muon, Storage::fp32,
                     [shape](Backend<float>& be, Products p, Storage) {
                       check_muon(be, p, shape[0], shape[1]);
                     }});
  // Head sizes 32 and 128, grouped keys, rows over several of the gradient's 64-row chunks.
  fp32_case("qk_norm_N70_H4_Hkv2_D32_ld256", Op::qk_norm,
            [](Backend<float>& be) { check_qk_norm(be, 70, 4, 2, 32, 256); });
  fp32_case("qk_norm_N130_H2_Hkv2_D128_ld768", Op::qk_norm,
            [](Backend<float>& be) { check_qk_norm(be, 130, 2, 2, 128, 768); });
  fp32_case("reductions_n100003", Op::reductions,
            [](Backend<float>& be) { check_reductions(be, 100003); });
  fp32_case("xsa_gated_B2_T37_D64_H4_Hkv2", Op::attention,
            [](Backend<float>& be) { check_xsa(be, 2, 37, 256, 4, 2); });
  fp32_case("cached_attention_S70_R5_D64_H4_Hkv2_xsa_gated_sink", Op::attention,
            [](Backend<float>& be) { check_cached_attention(be, 70, 5, 256, 4, 2); });
  fp32_case("cached_attention_S130_R1_D128_H2_Hkv1_xsa_gated_sink", Op::attention,
            [](Backend<float>& be) { check_cached_attention(be, 130, 1, 256, 2, 1); });
  // Head sizes 20 (columns left over after the vectors at either level), 32, 64 and 128, T not a
  // multiple of the 64-row tiles, grouped-query heads, sinks.
  for (AttentionShape s : {AttentionShape{1, 70, 60, 3, 0, false, true},
                           AttentionShape{2, 200, 128, 4, 2, false, false},
                           AttentionShape{2, 77, 128, 2, 0, false, false},
                           AttentionShape{2, 77, 128, 2, 0, true, true},
                           AttentionShape{1, 130, 256, 2, 1, false, true},
                           AttentionShape{1, 130, 256, 2, 1, true, false},
                           AttentionShape{1, 64, 512, 8, 2, true, false}})
    cases.push_back(
        {fmt::format("attention_B{}_T{}_D{}_H{}_Hkv{}{}{}", s.B, s.T, s.C / s.H, s.H,
                     s.Hkv ? s.Hkv : s.H, s.exclusive ? "_xsa" : "_sa", s.sink ? "_sink" : ""),
         Op::attention, Storage::fp32, [s](Backend<float>& be, Products p, Storage) {
           check_attention(be, p == Products::bf16, s);
         }});
  return cases;
}

class BackendOps : public testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(BackendOps, WithinTheBoundOfItsRoundings) {
  const auto& [op, backend_name] = GetParam();
  std::string why;
  Backend<float>* be = backend_named(backend_name, &why);
  if (!be) GTEST_SKIP() << backend_name << " is not here: " << why;
  for (const OpCase& c : op_cases()) {
    if (c.name != op) continue;
    if (!be->supports(c.family, c.storage))
      GTEST_SKIP() << backend_name << " does not take " << ops::to_string(c.storage) << " "
                   << to_string(c.family) << " activations (its supports() says so)";
    return c.check(*be, products_of(backend_name), c.storage);
  }
  FAIL() << "no op " << op;
}

// The refusal through the table: given an activation in a storage it does not take, every backend
// refuses in one line that names the op and the storage (Error, which the CLI prints as it is),
// and computes nothing.
TEST(BackendOps, RefusesAStorageItDoesNotTake) {
  for (const std::string& name : kBackends) {
    std::string why;
    Backend<float>* be = backend_named(name, &why);
    if (!be) continue;
    SCOPED_TRACE(name);
    Device dev{*be};
    auto a = dev.zeros(4096), b = dev.zeros(4096), c = dev.zeros(4096);
    const Tensor<float> bf16_a{a.data(), Storage::bf16};
    const std::vector<std::pair<Op, std::function<void()>>> calls = {
        {Op::matmul,
         [&] {
           be->matmul_forward(b.data(), bf16_a, c.data(), {4, 8, 8}, false);
         }},
        {Op::layernorm,
         [&] {
           be->layernorm_forward(bf16_a, {b.data(), c.data(), c.data(), c.data(), c.data(), 4, 8});
         }},
        {Op::gelu, [&] { be->gelu_forward(bf16_a, b.data(), 32); }},
        {Op::rope,
         [&] {
           be->rope_backward(bf16_a, b.data(), {c.data(), c.data(), 1, 4, 8, 2, 2});
         }},
    };
    int refused = 0;
    for (const auto& [op, call] : calls) {
      if (be->supports(op, Storage::bf16)) continue;
      SCOPED_TRACE(to_string(op));
      try {
        call();
        ADD_FAILURE() << "ran on bf16 activations its supports() refuses";
      } catch (const Error& e) {
        const std::string line = e.what();
        EXPECT_EQ(line.find('\n'), std::string::npos) << line;
        EXPECT_NE(line.find(to_string(op)), std::string::npos) << line;
        EXPECT_NE(line.find("bf16"), std::string::npos) << line;
        refused++;
      }
    }
    // The fp32 backends refuse all four; the bf16 ones take all four.
    EXPECT_EQ(refused, name.find("bf16") != std::string::npos ? 0 : 4);
  }
}

// The coverage of the table: every entry of the kernel table (src/ops/op_list.txt) is called by
// some case, with its family as the case's (so the GPU's other forms run it too). A new entry
// without a case fails here, naming it.
class RecordingBackend final : public ForwardingBackend<float> {
 public:
  using ForwardingBackend::ForwardingBackend;
  std::map<std::string, std::set<Op>> called;  // entry → the families of the cases that called it
  Op case_family = Op::matmul;

 protected:
  void entering(Op family, const char* entry) override {
    EXPECT_EQ(family, case_family) << entry << " called by a case of another family";
    called[entry].insert(case_family);
  }
};

TEST(BackendOps, EveryEntryOfTheKernelTableHasACase) {
  RecordingBackend recorder(cpu_backend<float>());
  for (const OpCase& c : op_cases()) {
    if (c.storage != Storage::fp32) continue;  // the same entries as the bf16 cases
    recorder.case_family = c.family;
    c.check(recorder, Products::fp32, c.storage);
  }
  for (const KernelEntryInfo& entry : kKernelEntries)
    EXPECT_TRUE(recorder.called.count(entry.name))
        << entry.name << ": no case of backend_ops_test calls it";
}

// Every case on every backend, and the GPU's other forms on the cases of their family.
std::vector<std::tuple<std::string, std::string>> table_rows() {
  std::vector<std::tuple<std::string, std::string>> rows;
  for (const OpCase& c : op_cases()) {
    for (const std::string& backend : kBackends) rows.emplace_back(c.name, backend);
    for (const auto& [form, family] : kFormsOf)
      if (c.family == family) rows.emplace_back(c.name, form);
  }
  return rows;
}

INSTANTIATE_TEST_SUITE_P(Table, BackendOps, testing::ValuesIn(table_rows()), [](const auto& info) {
  std::string name = std::get<0>(info.param) + "_on_" + std::get<1>(info.param);
  for (char& ch : name)
    if (ch == '-') ch = '_';
  return name;
});

}  // namespace
}  // namespace xsa

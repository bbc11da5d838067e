// One table of op cases run on every backend present, against the float64 reference (src/ops/
// reference.h), as ggml's test-backend-ops does: each (op family, shape) × backend is one test,
// its inputs uploaded into the backend's own memory and its outputs read back through the Backend
// seam, every entry within the bound its roundings allow (tests/bounds.h): fp32's for the fp32
// backends, and for the bf16 backends the bound bf16's 8 significant bits give their products and
// attention tiles (on top of fp32's). A backend that is not here (no AVX512_BF16, no GPU) is
// reported as SKIPPED with the reason; so is a combination no bound is derived for yet.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "bounds.h"
#include "test_util.h"
#include "xsa/backend/backend.h"
#include "xsa/backend/device.h"
#include "xsa/ops/bf16.h"
#include "xsa/ops/reference.h"
#include "xsa/util/fmt.h"

namespace xsa {
namespace {

using test::kFloatRoundoff;
using test::Vec;
using test::within;

constexpr double kBf16Roundoff = 0x1p-8;  // bf16's unit roundoff (8 significant bits)

// The backends of the table, by name; null with `why` when this machine has none such.
Backend<float>* backend_named(const std::string& name, std::string* why) {
  const bool bf16 = name.find("bf16") != std::string::npos;
  if (bf16 && !bf16_products_available(why)) return nullptr;
  if (name.rfind("cuda", 0) == 0) {
    if (!cuda_available(why)) return nullptr;
    return &select_backend({"cuda", bf16 ? "bf16" : "fp32"});
  }
  Backend<float>& cpu = bf16 ? cpu_bf16_backend() : cpu_backend<float>();
  return name.rfind("isolated", 0) == 0 ? &isolated_backend(cpu) : &cpu;
}
const std::vector<std::string> kBackends = {"cpu",           "cpu-bf16", "isolated",
                                            "isolated-bf16", "cuda",     "cuda-bf16"};

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
// Operands rounded to bf16 (each ≤ 2^-8 relative): the product moves by (2^-7 + 2^-16)·Σ|ab|.
void add_bf16_operands(Vec& bound, const Vec& magnitudes) {
  for (size_t i = 0; i < bound.size(); i++) bound[i] += (0x1p-7 + 0x1p-16) * magnitudes[i];
}

// ---- the op families ----

struct MatmulShape {
  int N, I, O;
};
void check_matmul(Backend<float>& be, bool bf16, MatmulShape s) {
  Device dev{be};
  const Vec x = as_float(test::random_vector((size_t)s.N * s.I, 1)),
            w = as_float(test::random_vector((size_t)s.O * s.I, 2, 0.1)),
            dout = as_float(test::random_vector((size_t)s.N * s.O, 3)),
            dw0 = as_float(test::random_vector((size_t)s.O * s.I, 4, 0.01));
  Vec y_ref(s.N * s.O), dx_ref(s.N * s.I), dw_ref = dw0;
  ref::matmul_forward(y_ref.data(), x.data(), w.data(), s.N, s.I, s.O);
  ref::matmul_backward(dx_ref.data(), dw_ref.data(), dout.data(), x.data(), w.data(), s.N, s.I,
                       s.O);
  auto X = dev.put(x), W = dev.put(w), dOut = dev.put(dout), dW = dev.put(dw0);
  auto Y = dev.zeros(y_ref.size()), dX = dev.zeros(dx_ref.size());
  be.weights_changed();  // new weights at addresses a cached bf16 copy may have had
  be.matmul_forward(Y.data(), X.data(), W.data(), {s.N, s.I, s.O}, false);
  be.matmul_backward(dX.data(), dW.data(), dOut.data(), X.data(), W.data(), {s.N, s.I, s.O}, true);
  Vec y_bound = test::matmul_forward_bound(x, w, s.N, s.I, s.O, nullptr, kFloatRoundoff), dx_bound,
      dw_bound;
  test::matmul_backward_bound(dx_bound, dw_bound, dout, x, w, dw0, s.N, s.I, s.O, kFloatRoundoff);
  if (bf16) {  // the three products on bf16 operands
    add_bf16_operands(y_bound, product_magnitudes(x, w, s.N, s.I, s.O));
    Vec dx_mag(s.N * s.I), dw_mag(s.O * s.I, 0.0);
    ref::matmul_backward(dx_mag.data(), dw_mag.data(), test::abs_of(dout).data(),
                         test::abs_of(x).data(), test::abs_of(w).data(), s.N, s.I, s.O);
    add_bf16_operands(dx_bound, dx_mag), add_bf16_operands(dw_bound, dw_mag);
  }
  EXPECT_TRUE(within(dev.get(Y), y_ref, y_bound, "y"));
  EXPECT_TRUE(within(dev.get(dX), dx_ref, dx_bound, "dx"));
  EXPECT_TRUE(within(dev.get(dW), dw_ref, dw_bound, "dw"));
}

void check_layernorm(Backend<float>& be, int N, int C) {
  Device dev{be};
  const Vec x = as_float(test::random_vector((size_t)N * C, 5)),
            w = as_float(test::random_vector(C, 6)), b = as_float(test::random_vector(C, 7)),
            dout = as_float(test::random_vector((size_t)N * C, 8)), zero_nc(N * C, 0.0),
            zero_c(C, 0.0);
  Vec y_ref(N * C), mean_ref(N), rstd_ref(N), dx_ref(N * C, 0.0), dw_ref(C, 0.0), db_ref(C, 0.0);
  ref::layernorm_forward(y_ref.data(), mean_ref.data(), rstd_ref.data(), x.data(), w.data(),
                         b.data(), N, C);
  ref::layernorm_backward(dx_ref.data(), dw_ref.data(), db_ref.data(), dout.data(), x.data(),
                          w.data(), mean_ref.data(), rstd_ref.data(), N, C);
  auto X = dev.put(x), Wt = dev.put(w), Bs = dev.put(b), dOut = dev.put(dout);
  auto Y = dev.zeros(N * C), M = dev.zeros(N), R = dev.zeros(N), dX = dev.zeros(N * C),
       dW = dev.zeros(C), dB = dev.zeros(C);
  const LayerNormArgs<float> args{X.data(), Wt.data(), Bs.data(), M.data(), R.data(), N, C};
  be.layernorm_forward(Y.data(), args);
  be.layernorm_backward(dX.data(), dW.data(), dB.data(), dOut.data(), args);
  const test::LayerNormBounds bd =
      test::layernorm_bounds(x, w, b, dout, zero_nc, zero_c, zero_c, N, C, kFloatRoundoff);
  EXPECT_TRUE(within(dev.get(Y), y_ref, bd.y, "y"));
  EXPECT_TRUE(within(dev.get(dX), dx_ref, bd.dx, "dx"));
  EXPECT_TRUE(within(dev.get(dW), dw_ref, bd.dw, "dw"));
  EXPECT_TRUE(within(dev.get(dB), db_ref, bd.db, "db"));
}

void check_gelu(Backend<float>& be, size_t n) {
  Device dev{be};
  const Vec x = as_float(test::random_vector(n, 9, 3.0)),
            dout = as_float(test::random_vector(n, 10));
  Vec y_ref(n), dx_ref(n);
  ref::gelu_forward(y_ref.data(), x.data(), n);
  ref::gelu_backward(dx_ref.data(), x.data(), dout.data(), n);
  auto X = dev.put(x), dOut = dev.put(dout), Y = dev.zeros(n), dX = dev.zeros(n);
  be.gelu_forward(Y.data(), X.data(), n);
  be.gelu_backward(dX.data(), X.data(), dOut.data(), n);
  Vec y_bound, dx_bound;
  test::gelu_bounds(y_bound, dx_bound, x, dout, kFloatRoundoff);
  EXPECT_TRUE(within(dev.get(Y), y_ref, y_bound, "y"));
  EXPECT_TRUE(within(dev.get(dX), dx_ref, dx_bound, "dx"));
}

// RoPE on q and k of qkv rows (grouped-query heads too), forward and backward, from the backend's
// own table of cos and sin.
void check_rope(Backend<float>& be, int B, int T, int C, int H, int Hkv) {
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
  be.rope_backward(G.data(), G.data(), args);
  EXPECT_TRUE(within(dev.get(X), fwd_ref,
                     test::rope_bound(qkv, B, T, C, H, Hkv, 10000.0, kFloatRoundoff), "fwd"));
  EXPECT_TRUE(within(dev.get(G), bwd_ref,
                     test::rope_bound(grad, B, T, C, H, Hkv, 10000.0, kFloatRoundoff), "bwd"));
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
  ref::attention_forward(y_ref.data(), lse_ref.data(), qkv.data(), s.B, s.T, s.C, s.H, sink_ref,
                         s.Hkv);
  if (s.exclusive) {
    ref::xsa_forward(z_ref.data(), y_ref.data(), qkv.data(), s.B, s.T, s.C, s.H,
                     static_cast<const double*>(nullptr), s.Hkv);
    ref::xsa_backward(dz_as_dy.data(), dqkv_ref.data(), dout.data(), y_ref.data(), qkv.data(), s.B,
                      s.T, s.C, s.H, static_cast<const double*>(nullptr),
                      static_cast<double*>(nullptr), s.Hkv);
  }
  ref::attention_backward(dqkv_ref.data(), dz_as_dy.data(), qkv.data(), s.B, s.T, s.C, s.H,
                          sink_ref, dsink_ref.data(), s.Hkv);
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

struct OpCase {
  std::string name;
  std::function<void(Backend<float>&, bool bf16)> check;
};
std::vector<OpCase> op_cases() {
  std::vector<OpCase> cases;
  for (MatmulShape s : {MatmulShape{37, 64, 96}, MatmulShape{130, 384, 128}})
    cases.push_back({fmt::format("matmul_N{}_I{}_O{}", s.N, s.I, s.O),
                     [s](Backend<float>& be, bool bf16) { check_matmul(be, bf16, s); }});
  for (int C : {64, 768})
    cases.push_back({fmt::format("layernorm_N37_C{}", C),
                     [C](Backend<float>& be, bool) { check_layernorm(be, 37, C); }});
  cases.push_back({"gelu_n4099", [](Backend<float>& be, bool) { check_gelu(be, 4099); }});
  cases.push_back({"rope_B2_T37_D64_H4_Hkv2",
                   [](Backend<float>& be, bool) { check_rope(be, 2, 37, 256, 4, 2); }});
  cases.push_back({"rope_B1_T70_D128_H2_Hkv2",
                   [](Backend<float>& be, bool) { check_rope(be, 1, 70, 256, 2, 0); }});
  cases.push_back(
      {"encoder_N70_V50_C64", [](Backend<float>& be, bool) { check_encoder(be, 70, 50, 64); }});
  cases.push_back({"crossentropy_N9_V50_Vp64",
                   [](Backend<float>& be, bool) { check_crossentropy(be, 9, 50, 64); }});
  cases.push_back({"crossentropy_N7_V1000_Vp1024",
                   [](Backend<float>& be, bool) { check_crossentropy(be, 7, 1000, 1024); }});
  // Head sizes 64 and 128, T not a multiple of the 64-row tiles, grouped-query heads, sinks.
  for (AttentionShape s : {AttentionShape{2, 77, 128, 2, 0, false, false},
                           AttentionShape{2, 77, 128, 2, 0, true, true},
                           AttentionShape{1, 130, 256, 2, 1, false, true},
                           AttentionShape{1, 130, 256, 2, 1, true, false},
                           AttentionShape{1, 64, 512, 8, 2, true, false}})
    cases.push_back(
        {fmt::format("attention_B{}_T{}_D{}_H{}_Hkv{}{}{}", s.B, s.T, s.C / s.H, s.H,
                     s.Hkv ? s.Hkv : s.H, s.exclusive ? "_xsa" : "_sa", s.sink ? "_sink" : ""),
         [s](Backend<float>& be, bool bf16) { check_attention(be, bf16, s); }});
  return cases;
}

class BackendOps : public testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(BackendOps, WithinTheBoundOfItsRoundings) {
  const auto& [op, backend_name] = GetParam();
  std::string why;
  Backend<float>* be = backend_named(backend_name, &why);
  if (!be) GTEST_SKIP() << backend_name << " is not here: " << why;
  for (const OpCase& c : op_cases())
    if (c.name == op) return c.check(*be, backend_name.find("bf16") != std::string::npos);
  FAIL() << "no op " << op;
}

std::vector<std::string> op_names() {
  std::vector<std::string> names;
  for (const OpCase& c : op_cases()) names.push_back(c.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Table, BackendOps,
                         testing::Combine(testing::ValuesIn(op_names()),
                                          testing::ValuesIn(kBackends)),
                         [](const auto& info) {
                           std::string name =
                               std::get<0>(info.param) + "_on_" + std::get<1>(info.param);
                           for (char& ch : name)
                             if (ch == '-') ch = '_';
                           return name;
                         });

}  // namespace
}  // namespace xsa

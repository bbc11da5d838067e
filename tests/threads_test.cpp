// Thread-count independence, bit for bit, where the project promises it: docs/architecture.md
// ("Determinism": our kernels and reductions sum in a fixed order and give the same bits with 1
// and 2 threads), ops/attention.h (the attention backward's result does not
// depend on the thread count), ops/ops.h (sum_of_squares) and ops/matmul.cpp (the one-row
// product). Each test runs the same kernel on the same buffers (inputs restored before each run)
// with 1 and with 2 threads (set_thread_count sets OpenMP and OpenBLAS), checks that a parallel
// region really gets 2 threads, and compares every output with memcmp. Sizes are chosen so that
// OpenMP splits the work: hundreds of rows, several attention tiles, B·H ≥ 8.
//
// Not promised, and not true: the whole model's loss and training step are not bit-identical
// across thread counts, because OpenBLAS's threaded sgemm rounds differently from its one-thread
// path. The model tests at the end therefore pin the matrix products to one thread and check
// everything else (see OneThreadProducts).
#include "xsa/util/threads.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cstring>
#include <iomanip>
#include <limits>
#include <vector>

#include "test_util.h"
#include "xsa/backend/forwarding_backend.h"
#include "xsa/model/gpt.h"
#include "xsa/ops/ops.h"
#include "xsa/train/step.h"

namespace xsa {
namespace {

using test::cast_vector;
using test::random_vector;
using FVec = std::vector<float>;

// Threads in a parallel region as the kernels open it.
int team_size() {
  int n = 0;
#pragma omp parallel
  {
#pragma omp single
    n = omp_get_num_threads();
  }
  return n;
}

// Every test ends with one thread again (ctest runs the suite with OMP_NUM_THREADS=1).
class Threads : public testing::Test {
 protected:
  void TearDown() override { set_thread_count(1); }

  // Runs fn with n threads, after checking that a parallel region gets n of them.
  template <typename Fn>
  void with_threads(int n, Fn&& fn) {
    ASSERT_EQ(set_thread_count(n), n);
    ASSERT_EQ(team_size(), n);
    fn();
  }
};

// a and b equal bit for bit; names the first differing element. An all-zero output would compare
// equal whatever the kernel did, so `a` must hold something.
template <typename T>
void expect_bitwise_equal(const std::vector<T>& a, const std::vector<T>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  bool any = false;
  for (const T& x : a) any |= x != T(0);
  EXPECT_TRUE(any) << what << " is all zero: the comparison would prove nothing";
  if (std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0) return;
  size_t first = 0, count = 0;
  for (size_t i = a.size(); i-- > 0;)
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) first = i, count++;
  ADD_FAILURE() << what << ": " << count << " of " << a.size()
                << " elements differ between 1 and 2 threads; first at " << first << ": "
                << std::setprecision(std::numeric_limits<T>::max_digits10) << a[first] << " vs "
                << b[first];
}

void expect_bitwise_equal(double a, double b, const char* what) {
  EXPECT_NE(a, 0.0) << what;
  EXPECT_EQ(std::memcmp(&a, &b, sizeof a), 0)
      << what << ": " << std::setprecision(17) << a << " with 1 thread, " << b << " with 2";
}

// ---------------------------------------------------------------- gradient norm
TEST_F(Threads, SumOfSquaresIsBitIdentical) {
  for (size_t n : {size_t(4099), size_t(1000003)}) {
    SCOPED_TRACE(n);
    const auto x = cast_vector<float>(random_vector(n, 1, 0.01));
    const auto xd = random_vector(n, 2, 0.01);
    double one = 0, two = 0, one_d = 0, two_d = 0;
    with_threads(1, [&] {
      one = ops::sum_of_squares(x.data(), n), one_d = ops::sum_of_squares(xd.data(), n);
    });
    with_threads(2, [&] {
      two = ops::sum_of_squares(x.data(), n), two_d = ops::sum_of_squares(xd.data(), n);
    });
    expect_bitwise_equal(one, two, "sum_of_squares<float>");
    expect_bitwise_equal(one_d, two_d, "sum_of_squares<double>");
  }
}

// ---------------------------------------------------------------- layernorm
// 512 rows of C = 256: the row loop and the channel loop of the parameter gradients both split.
TEST_F(Threads, LayerNormBackwardIsBitIdentical) {
  const int N = 512, C = 256;
  const auto x = cast_vector<float>(random_vector(N * C, 1, 2.0)),
             w = cast_vector<float>(random_vector(C, 2)),
             b = cast_vector<float>(random_vector(C, 3)),
             dout = cast_vector<float>(random_vector(N * C, 4)),
             dx0 = cast_vector<float>(random_vector(N * C, 5)),
             dw0 = cast_vector<float>(random_vector(C, 6)),
             db0 = cast_vector<float>(random_vector(C, 7));
  FVec y(N * C), mean(N), rstd(N), dx(N * C), dw(C), db(C);
  struct Out {
    FVec y, mean, rstd, dx, dw, db;
  } out[2];
  for (int t : {1, 2})
    with_threads(t, [&] {
      ops::layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N,
                             C);
      dx = dx0, dw = dw0, db = db0;  // all three accumulate
      ops::layernorm_backward(dx.data(), dw.data(), db.data(), dout.data(),
                              {x.data(), w.data(), nullptr, mean.data(), rstd.data(), N, C});
      out[t - 1] = {y, mean, rstd, dx, dw, db};
    });
  expect_bitwise_equal(out[0].y, out[1].y, "out");
  expect_bitwise_equal(out[0].mean, out[1].mean, "mean");
  expect_bitwise_equal(out[0].rstd, out[1].rstd, "rstd");
  expect_bitwise_equal(out[0].dx, out[1].dx, "dinp");
  expect_bitwise_equal(out[0].dw, out[1].dw, "dweight");
  expect_bitwise_equal(out[0].db, out[1].db, "dbias");
}

// ---------------------------------------------------------------- embedding
// 600 tokens over 50 ids (each id ~12 times, the rows of one id summed into one gradient row),
// C = 256: 16 channel chunks shared by the threads.
TEST_F(Threads, EncoderBackwardIsBitIdentical) {
  const int V = 50, N = 600, C = 256;
  std::vector<int32_t> tokens(N);
  for (int n = 0; n < N; n++) tokens[n] = (n * 37 + n / 7) % V;
  const auto dout = cast_vector<float>(random_vector(N * C, 1)),
             dwte0 = cast_vector<float>(random_vector(V * C, 2));
  FVec dwte, got[2];
  for (int t : {1, 2})
    with_threads(t, [&] {
      dwte = dwte0;
      ops::encoder_backward(dwte.data(), dout.data(), tokens.data(), N, C);
      got[t - 1] = dwte;
    });
  expect_bitwise_equal(got[0], got[1], "dwte");
}

// ---------------------------------------------------------------- attention
struct AttnCase {
  int Hkv;
  bool exclusive, gated, sink;
};

// B = 2, T = 130 (three query tiles), H = 4, D = 64: 24 forward tasks, 8 (or 2·Hkv) backward
// tasks. Every output of the forward and the backward.
TEST_F(Threads, AttentionForwardBackwardIsBitIdentical) {
  const int B = 2, T = 130, H = 4, D = 64, C = H * D;
  for (AttnCase s : {AttnCase{0, false, false, false}, AttnCase{0, true, false, false},
                     AttnCase{0, true, true, true}, AttnCase{2, false, false, true},
                     AttnCase{2, true, true, false}}) {
    SCOPED_TRACE(testing::Message()
                 << "Hkv=" << s.Hkv << (s.exclusive ? (s.gated ? " gated XSA" : " XSA") : " SA")
                 << (s.sink ? " sink" : ""));
    const int Hk = s.Hkv ? s.Hkv : H, W = C + 2 * Hk * D, N = B * T;
    const auto qkv = cast_vector<float>(random_vector(N * W, 1)),
               dout0 = cast_vector<float>(random_vector(N * C, 2)),
               dqkv0 = cast_vector<float>(random_vector(N * W, 3, 0.1)),
               sink = cast_vector<float>(random_vector(H, 4)),
               alpha = cast_vector<float>(random_vector(H, 5, 0.5));
    FVec y(N * C), z(N * C), lse(B * H * T), dqkv(N * W), dout(N * C), dalpha(N * H), dsink(B * H);
    ops::AttentionArgs<float> args{.B = B,
                                   .T = T,
                                   .C = C,
                                   .H = H,
                                   .Hkv = s.Hkv,
                                   .exclusive = s.exclusive,
                                   .qkv = qkv.data(),
                                   .y = y.data(),
                                   .z = s.exclusive ? z.data() : nullptr,
                                   .lse = lse.data(),
                                   .alpha = s.gated ? alpha.data() : nullptr,
                                   .sink = s.sink ? sink.data() : nullptr,
                                   .dqkv = dqkv.data(),
                                   .d_out = dout.data(),
                                   .dalpha = s.gated ? dalpha.data() : nullptr,
                                   .dsink = s.sink ? dsink.data() : nullptr};
    struct Out {
      FVec y, z, lse, dqkv, dout, dalpha, dsink;
    } out[2];
    for (int t : {1, 2})
      with_threads(t, [&] {
        std::fill(y.begin(), y.end(), 0.f), std::fill(z.begin(), z.end(), 0.f);
        std::fill(lse.begin(), lse.end(), 0.f), std::fill(dalpha.begin(), dalpha.end(), 0.f);
        std::fill(dsink.begin(), dsink.end(), 0.f);
        dqkv = dqkv0, dout = dout0;
        ops::attention_forward(args);
        ops::attention_backward(args);
        out[t - 1] = {y, z, lse, dqkv, dout, dalpha, dsink};
      });
    expect_bitwise_equal(out[0].y, out[1].y, "y");
    expect_bitwise_equal(out[0].lse, out[1].lse, "lse");
    expect_bitwise_equal(out[0].dqkv, out[1].dqkv, "dqkv");
    expect_bitwise_equal(out[0].dout, out[1].dout, "d_out (∂L/∂y)");
    if (s.exclusive) expect_bitwise_equal(out[0].z, out[1].z, "z");
    if (s.gated) expect_bitwise_equal(out[0].dalpha, out[1].dalpha, "dalpha");
    if (s.sink) expect_bitwise_equal(out[0].dsink, out[1].dsink, "dsink");
  }
}

// ---------------------------------------------------------------- xsa
// 260 tokens of 4 heads of 64, plain and gated, with and without grouped-query attention (where
// the heads of a group add into one shared v gradient).
TEST_F(Threads, XsaBackwardIsBitIdentical) {
  const int B = 2, T = 130, H = 4, D = 64, C = H * D, N = B * T;
  for (int Hkv : {0, 2})
    for (bool gated : {false, true}) {
      SCOPED_TRACE(testing::Message() << "Hkv=" << Hkv << (gated ? " gated" : ""));
      const int W = C + 2 * (Hkv ? Hkv : H) * D;
      const auto qkv = cast_vector<float>(random_vector(N * W, 1)),
                 y = cast_vector<float>(random_vector(N * C, 2)),
                 dz = cast_vector<float>(random_vector(N * C, 3)),
                 dqkv0 = cast_vector<float>(random_vector(N * W, 4, 0.1)),
                 alpha = cast_vector<float>(random_vector(H, 5, 0.5));
      const float* al = gated ? alpha.data() : nullptr;
      FVec z(N * C), dy(N * C), dqkv(N * W), dalpha(N * H);
      struct Out {
        FVec z, dy, dqkv, dalpha;
      } out[2];
      for (int t : {1, 2})
        with_threads(t, [&] {
          dqkv = dqkv0;
          const test::XsaCall<float> xsa{B, T, C, H, Hkv, al};
          xsa.forward(z.data(), y.data(), qkv.data());
          xsa.backward(dy.data(), dqkv.data(), dz.data(), y.data(), qkv.data(),
                       gated ? dalpha.data() : nullptr);
          out[t - 1] = {z, dy, dqkv, dalpha};
        });
      expect_bitwise_equal(out[0].z, out[1].z, "z");
      expect_bitwise_equal(out[0].dy, out[1].dy, "dy");
      expect_bitwise_equal(out[0].dqkv, out[1].dqkv, "dqkv");
      if (gated) expect_bitwise_equal(out[0].dalpha, out[1].dalpha, "dalpha");
    }
}

// ---------------------------------------------------------------- cross-entropy
// 300 rows of a 2000-token vocabulary (padded to 2048), and 16 rows of GPT-2's 50257 (50304).
TEST_F(Threads, CrossEntropyIsBitIdentical) {
  struct Shape {
    int N, V, Vp;
  };
  for (Shape s : {Shape{300, 2000, 2048}, Shape{16, 50257, 50304}}) {
    SCOPED_TRACE(testing::Message() << "N=" << s.N << " V=" << s.V);
    const auto logits0 = cast_vector<float>(random_vector((size_t)s.N * s.Vp, 1, 2.0));
    std::vector<int32_t> targets(s.N);
    for (int n = 0; n < s.N; n++) targets[n] = n % 5 == 4 ? -1 : (n * 7919) % s.V;
    FVec logits, losses(s.N);
    struct Out {
      FVec losses, grad, losses_only;
    } out[2];
    for (int t : {1, 2})
      with_threads(t, [&] {
        logits = logits0;
        ops::crossentropy_forward_backward(logits.data(), losses.data(), targets.data(), s.N, s.V,
                                           s.Vp, 1.0f / s.N);
        out[t - 1].losses = losses, out[t - 1].grad = logits;
        logits = logits0;
        ops::crossentropy_forward_backward(logits.data(), losses.data(), targets.data(), s.N, s.V,
                                           s.Vp, 0.f);
        out[t - 1].losses_only = losses;
      });
    expect_bitwise_equal(out[0].losses, out[1].losses, "losses");
    expect_bitwise_equal(out[0].grad, out[1].grad, "logit gradient");
    expect_bitwise_equal(out[0].losses_only, out[1].losses_only, "losses without gradient");
  }
}

// ---------------------------------------------------------------- one-row products
// matmul_forward of one row (decoding) runs its own matrix-vector loop, one row of the weight per
// iteration, split between the threads above 65536 weights (ops/matmul.cpp: "the result does not
// depend on the thread count").
TEST_F(Threads, OneRowMatmulIsBitIdentical) {
  const int in = 768, out = 2304;
  const auto x = cast_vector<float>(random_vector(in, 1)),
             w = cast_vector<float>(random_vector((size_t)out * in, 2, 0.02)),
             y0 = cast_vector<float>(random_vector(out, 3));
  FVec y, got[2], acc[2];
  for (int t : {1, 2})
    with_threads(t, [&] {
      y.assign(out, 0.f);
      ops::matmul_forward(y.data(), x.data(), w.data(), 1, in, out);
      got[t - 1] = y;
      y = y0;
      ops::matmul_forward(y.data(), x.data(), w.data(), 1, in, out, /*accumulate=*/true);
      acc[t - 1] = y;
    });
  expect_bitwise_equal(got[0], got[1], "out");
  expect_bitwise_equal(acc[0], acc[1], "out (accumulated)");
}

// ---------------------------------------------------------------- cached attention
// Decoding over a key/value cache: 63 new rows after 67 cached ones, 4 heads on 2 kv heads of 64,
// gated XSA with a sink; one (row, head) per task.
TEST_F(Threads, CachedAttentionIsBitIdentical) {
  const int S = 130, first = 67, n = S - first, H = 4, Hkv = 2, D = 64, C = H * D, Ck = Hkv * D,
            W = C + 2 * Ck;
  const auto qkv = cast_vector<float>(random_vector((size_t)S * W, 1)),
             sink = cast_vector<float>(random_vector(H, 2)),
             alpha = cast_vector<float>(random_vector(H, 3, 0.5));
  FVec k((size_t)S * Ck), v((size_t)S * Ck);
  for (int r = 0; r < S; r++) {
    std::memcpy(&k[(size_t)r * Ck], &qkv[(size_t)r * W + C], sizeof(float) * Ck);
    std::memcpy(&v[(size_t)r * Ck], &qkv[(size_t)r * W + C + Ck], sizeof(float) * Ck);
  }
  FVec y((size_t)n * C), z((size_t)n * C);
  struct Out {
    FVec y, z;
  } out[2];
  for (int t : {1, 2})
    with_threads(t, [&] {
      std::fill(y.begin(), y.end(), 0.f), std::fill(z.begin(), z.end(), 0.f);
      ops::attention_forward_cached<float>(
          {.B = 1,
           .T = n,
           .C = C,
           .H = H,
           .Hkv = Hkv,
           .exclusive = true,
           .qkv = qkv.data() + (size_t)first * W,
           .y = y.data(),
           .z = z.data(),
           .alpha = alpha.data(),
           .sink = sink.data()},
          {.k = k.data(), .v = v.data(), .prefix = first, .slot0 = first});
      out[t - 1] = {y, z};
    });
  expect_bitwise_equal(out[0].y, out[1].y, "y");
  expect_bitwise_equal(out[0].z, out[1].z, "z");
}

// ---------------------------------------------------------------- the whole model
// The loss of Gpt<float>::forward and a whole TrainStep are NOT bit-identical between 1 and 2
// threads: OpenBLAS's threaded sgemm (0.3.21 here) rounds some elements of a product differently
// from its one-thread path (by a few ulp, in ~8% of the elements of a 256×128×256 product), and
// that reaches the loss and every gradient. So these tests run the model on the CPU backend with
// its matrix products (matmul_forward, matmul_backward) pinned to one thread, every other op at the
// thread count under test: they check that everything but OpenBLAS — the kernels composed, the
// loss summed in order, the gate and sink reductions, the gradient norm, AdamW — is
// thread-count independent.
class OneThreadProducts final : public ForwardingBackend<float> {
 public:
  OneThreadProducts() : ForwardingBackend(cpu_backend<float>()) {}
  void matmul_forward(float* out, Tensor<const float> inp, const float* weight, MatmulShape shape,
                      bool accumulate) override {
    const int threads = omp_get_max_threads();
    set_thread_count(1);
    inner().matmul_forward(out, inp, weight, shape, accumulate);
    set_thread_count(threads);
  }
  void matmul_forward_residual(float* out, const float* residual, Tensor<const float> inp,
                               const float* weight, MatmulShape shape) override {
    matmul_residual_by_copy(*this, out, residual, inp, weight, shape);
  }
  void matmul_backward(float* dinp, float* dweight, Tensor<const float> dout,
                       Tensor<const float> inp, const float* weight, MatmulShape shape,
                       bool accumulate) override {
    const int threads = omp_get_max_threads();
    set_thread_count(1);
    inner().matmul_backward(dinp, dweight, dout, inp, weight, shape, accumulate);
    set_thread_count(threads);
  }
  // The ops one by one, so that its products run pinned too.
  void classifier_forward_backward(const ClassifierArgs<float>& args) override {
    classifier_by_ops(*this, args);
  }
};

// A tiny model with every attention kind: SA, XSA with a sink, gated XSA (α = tanh 1), 4 query
// heads on 2 kv heads of 32; B = 2 sequences of 128 tokens (two attention tiles), a byte
// vocabulary; some targets ignored.
struct TinyModel {
  ModelConfig cfg;
  int B = 2, T = 128;
  std::vector<int32_t> inputs, targets;
  TinyModel() {
    cfg.n_layer = 3, cfg.n_head = 4, cfg.n_kv_head = 2, cfg.n_embd = 128, cfg.seq_len = 128;
    set_attention(cfg, "sa,xsa+sink,xsa-gated-one");
    inputs.resize(B * T), targets.resize(B * T);
    for (int n = 0; n < B * T; n++) {
      inputs[n] = (n * 131 + n / 3) % cfg.vocab_size;
      targets[n] = n % 17 == 5 ? -1 : (n * 29 + 7) % cfg.vocab_size;
    }
  }
};

TEST_F(Threads, ModelForwardIsBitIdenticalApartFromBlas) {
  TinyModel m;
  OneThreadProducts backend;
  Gpt<float> model(m.cfg, m.B, m.T, GptMode::inference, backend);
  model.params().init(m.cfg, 42);
  const int N = m.B * m.T;
  double loss[2];
  FVec losses[2];
  for (int t : {1, 2})
    with_threads(t, [&] {
      loss[t - 1] = model.forward(m.inputs.data(), m.targets.data());
      const float* l = model.activations().losses;
      losses[t - 1].assign(l, l + N);
    });
  expect_bitwise_equal(losses[0], losses[1], "per-position losses");
  expect_bitwise_equal(loss[0], loss[1], "mean loss");
}

// Three optimizer steps (forward, backward, gradient norm, clipping, AdamW) from the same weights.
TEST_F(Threads, TrainStepIsBitIdenticalApartFromBlas) {
  TinyModel m;
  OneThreadProducts backend;
  Gpt<float> model(m.cfg, m.B, m.T, GptMode::training, backend);
  model.params().init(m.cfg, 42);
  ParamArena<float>& arena = model.params();
  const FVec params0(arena.params.data(), arena.params.data() + arena.params.size());
  constexpr int kSteps = 3;
  StepResult r[2][kSteps];
  FVec grads[2], params[2];
  for (int t : {1, 2})
    with_threads(t, [&] {
      std::copy(params0.begin(), params0.end(), arena.params.data());
      arena.adam_m.zero(), arena.adam_v.zero();
      TrainStep step(model);
      for (int s = 0; s < kSteps; s++)
        r[t - 1][s] = step.run(m.inputs.data(), m.targets.data(), 1e-3, s + 1);
      grads[t - 1].assign(arena.grads.data(), arena.grads.data() + arena.grads.size());
      params[t - 1].assign(arena.params.data(), arena.params.data() + arena.params.size());
    });
  for (int s = 0; s < kSteps; s++) {
    SCOPED_TRACE(testing::Message() << "step " << s + 1);
    EXPECT_TRUE(r[0][s].finite);
    expect_bitwise_equal(r[0][s].loss, r[1][s].loss, "loss");
    expect_bitwise_equal(r[0][s].grad_norm, r[1][s].grad_norm, "grad_norm");
  }
  for (const TensorInfo& t : arena.layout) {
    SCOPED_TRACE(t.name);
    auto slice = [&](const FVec& v) {
      return FVec(v.begin() + t.offset, v.begin() + t.offset + t.numel);
    };
    expect_bitwise_equal(slice(grads[0]), slice(grads[1]), "gradient of the last step");
    expect_bitwise_equal(slice(params[0]), slice(params[1]), "parameter after the steps");
  }
}
}  // namespace
}  // namespace xsa

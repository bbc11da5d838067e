// The fused XSA attention kernel on its own buffers: forward and backward through one parameter
// struct (here XSA with grouped-query attention at a production head size), and its gradient
// checked against central finite differences of L = Σ probe · z, in double precision.
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "xsa/ops/attention.h"

int main() {
  const int B = 2, T = 80, H = 4, Hkv = 2, D = 64, C = H * D, W = C + 2 * Hkv * D;
  std::mt19937 gen(7);
  std::normal_distribution<double> normal;
  std::vector<double> qkv((size_t)B * T * W), probe((size_t)B * T * C);
  for (double& x : qkv) x = normal(gen);
  for (double& x : probe) x = normal(gen);

  std::vector<double> y(B * T * C), z(B * T * C), lse(B * H * T), dqkv(B * T * W, 0.0);
  std::vector<double> d_out = probe;  // ∂L/∂z; the backward turns it into ∂L/∂y in place
  xsa::ops::AttentionArgs<double> args{.B = B,
                                       .T = T,
                                       .C = C,
                                       .H = H,
                                       .Hkv = Hkv,
                                       .exclusive = true,  // z = y − (y·u)u, u = v/‖v‖
                                       .qkv = qkv.data(),
                                       .y = y.data(),
                                       .z = z.data(),
                                       .lse = lse.data(),
                                       .dqkv = dqkv.data(),
                                       .d_out = d_out.data()};
  xsa::ops::attention_forward(args);
  xsa::ops::attention_backward(args);

  auto loss = [&](const std::vector<double>& x) {
    std::vector<double> y2(y.size()), z2(z.size()), lse2(lse.size());
    xsa::ops::AttentionArgs<double> a = args;
    a.qkv = x.data(), a.y = y2.data(), a.z = z2.data(), a.lse = lse2.data();
    xsa::ops::attention_forward(a);
    double sum = 0;
    for (size_t i = 0; i < z2.size(); i++) sum += probe[i] * z2[i];
    return sum;
  };
  // A sample of coordinates across q, k and v, against (L(x + h) − L(x − h)) / 2h.
  double worst = 0;
  std::uniform_int_distribution<size_t> pick(0, qkv.size() - 1);
  for (int i = 0; i < 40; i++) {
    const size_t at = pick(gen);
    const double h = 1e-5, keep = qkv[at];
    std::vector<double> x = qkv;
    x[at] = keep + h;
    const double up = loss(x);
    x[at] = keep - h;
    const double numeric = (up - loss(x)) / (2 * h);
    worst = std::max(worst, std::abs(numeric - dqkv[at]) / std::max(1.0, std::abs(numeric)));
  }
  std::printf("XSA attention, B %d T %d H %d (kv heads %d) D %d: largest gradient error %.2e\n", B,
              T, H, Hkv, D, worst);
  return worst < 1e-6 ? 0 : 1;
}

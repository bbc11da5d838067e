// Plain, obviously-correct twins of the kernels in ops/ops.h, templated on the scalar type. They
// run in double as the oracle the fast kernels are tested against, and are written from the math
// independently of the fast code: full T×T probability matrices, explicit Jacobians, textbook
// formulas, no threads, no tricks. Same argument order as the fast kernels; the tests check these
// references themselves against finite differences.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "xsa/ops/ops.h"

namespace xsa::ref {

// The attention's shape: B sequences of T tokens, width C in H query heads (Hkv key/value heads;
// 0: one per query head).
struct Heads {
  int B = 0, T = 0, C = 0, H = 0, Hkv = 0;
};

template <typename Real>
void matmul_forward(Real* out, const Real* inp, const Real* weight, int N, int in_dim,
                    int out_dim) {
  for (int n = 0; n < N; n++)
    for (int o = 0; o < out_dim; o++) {
      Real s = 0;
      for (int i = 0; i < in_dim; i++) s += inp[n * in_dim + i] * weight[o * in_dim + i];
      out[n * out_dim + o] = s;
    }
}

template <typename Real>
void matmul_backward(Real* dinp, Real* dweight, const Real* dout, const Real* inp,
                     const Real* weight, int N, int in_dim, int out_dim) {
  for (int n = 0; n < N; n++)
    for (int i = 0; i < in_dim; i++) {
      Real s = 0;
      for (int o = 0; o < out_dim; o++) s += dout[n * out_dim + o] * weight[o * in_dim + i];
      dinp[n * in_dim + i] = s;
    }
  for (int o = 0; o < out_dim; o++)
    for (int i = 0; i < in_dim; i++) {
      Real s = 0;
      for (int n = 0; n < N; n++) s += dout[n * out_dim + o] * inp[n * in_dim + i];
      dweight[o * in_dim + i] += s;
    }
}

template <typename Real>
void encoder_forward(Real* out, const int32_t* tokens, const Real* wte, int N, int C) {
  for (int n = 0; n < N; n++)
    for (int c = 0; c < C; c++) out[n * C + c] = wte[tokens[n] * C + c];
}

template <typename Real>
void encoder_backward(Real* dwte, const Real* dout, const int32_t* tokens, int N, int C) {
  for (int n = 0; n < N; n++)
    for (int c = 0; c < C; c++) dwte[tokens[n] * C + c] += dout[n * C + c];
}

template <typename Real>
void layernorm_forward(Real* out, Real* mean, Real* rstd, const Real* inp, const Real* weight,
                       const Real* bias, int N, int C) {
  for (int n = 0; n < N; n++) {
    const Real* x = inp + n * C;
    Real mu = 0, var = 0;
    for (int c = 0; c < C; c++) mu += x[c] / C;
    for (int c = 0; c < C; c++) var += (x[c] - mu) * (x[c] - mu) / C;
    Real r = 1 / std::sqrt(var + Real(1e-5));
    for (int c = 0; c < C; c++) out[n * C + c] = (x[c] - mu) * r * weight[c] + bias[c];
    mean[n] = mu;
    rstd[n] = r;
  }
}

// Backward through the explicit Jacobian ∂xhat_c/∂x_k = rstd (δ_ck − 1/C − xhat_c xhat_k / C).
template <typename Real>
void layernorm_backward(Real* dinp, Real* dweight, Real* dbias, const Real* dout,
                        const ops::LayerNormArgs<Real>& a) {
  const Real *inp = a.inp, *weight = a.weight, *mean = a.mean, *rstd = a.rstd;
  const int N = a.N, C = a.C;
  std::vector<Real> xhat(C);
  for (int n = 0; n < N; n++) {
    for (int c = 0; c < C; c++) xhat[c] = (inp[n * C + c] - mean[n]) * rstd[n];
    for (int k = 0; k < C; k++) {
      Real s = 0;
      for (int c = 0; c < C; c++) {
        Real jac = rstd[n] * ((c == k ? 1 : 0) - Real(1) / C - xhat[c] * xhat[k] / C);
        s += dout[n * C + c] * weight[c] * jac;
      }
      dinp[n * C + k] += s;
    }
    for (int c = 0; c < C; c++) {
      dweight[c] += dout[n * C + c] * xhat[c];
      dbias[c] += dout[n * C + c];
    }
  }
}

// QK-norm on the q and k heads of qkv rows [N, ld] (ops/args.h, QkNormArgs): each head of D
// becomes x / √(mean(x²) + 1e-6) ⊙ g, the H query heads with q_scale, the Hkv key heads with
// k_scale. Backward through the explicit Jacobian ∂x̂_c/∂x_k = r (δ_ck − x̂_c x̂_k / D), from
// dout in dqkv's q and k columns (replaced by ∂L/∂x), the forward's input in qkv; the scales'
// gradients accumulate.
// QK-norm's rows: N rows of ld values, H query heads then Hkv key heads of D each at their start.
struct QkRows {
  int N = 0, ld = 0, H = 0, Hkv = 0, D = 0;
};

template <typename Real>
void qk_norm_forward(Real* qkv, const Real* q_scale, const Real* k_scale, int N, int ld, int H,
                     int Hkv, int D) {
  for (int n = 0; n < N; n++)
    for (int h = 0; h < H + Hkv; h++) {
      Real* x = qkv + (size_t)n * ld + (size_t)h * D;
      const Real* g = h < H ? q_scale : k_scale;
      Real ms = 0;
      for (int c = 0; c < D; c++) ms += x[c] * x[c] / D;
      const Real r = 1 / std::sqrt(ms + Real(1e-6));
      for (int c = 0; c < D; c++) x[c] = x[c] * r * g[c];
    }
}
template <typename Real>
void qk_norm_backward(Real* dqkv, Real* dq_scale, Real* dk_scale, const Real* qkv,
                      const Real* q_scale, const Real* k_scale, const QkRows& rows) {
  const int N = rows.N, ld = rows.ld, H = rows.H, Hkv = rows.Hkv, D = rows.D;
  std::vector<Real> xhat(D), dx(D);
  for (int n = 0; n < N; n++)
    for (int h = 0; h < H + Hkv; h++) {
      const Real* x = qkv + (size_t)n * ld + (size_t)h * D;
      Real* d = dqkv + (size_t)n * ld + (size_t)h * D;
      const Real* g = h < H ? q_scale : k_scale;
      Real* dg = h < H ? dq_scale : dk_scale;
      Real ms = 0;
      for (int c = 0; c < D; c++) ms += x[c] * x[c] / D;
      const Real r = 1 / std::sqrt(ms + Real(1e-6));
      for (int c = 0; c < D; c++) xhat[c] = x[c] * r;
      for (int k = 0; k < D; k++) {
        Real s = 0;
        for (int c = 0; c < D; c++)
          s += d[c] * g[c] * r * ((c == k ? 1 : 0) - xhat[c] * xhat[k] / D);
        dx[k] = s;
      }
      for (int c = 0; c < D; c++) dg[c] += d[c] * xhat[c], d[c] = dx[c];
    }
}

// Offset of (row n, part 0/1/2 = q/k/v, query head h) in qkv rows [q: C | k: Hkv·D | v: Hkv·D];
// under grouped-query attention (Hkv < H) query head h reads key/value head h / (H / Hkv).
inline int qkv_offset(int n, int part, int h, int C, int H, int Hkv) {
  const int Hk = Hkv > 0 ? Hkv : H, D = C / H, ld = C + 2 * Hk * D;
  return n * ld + (part == 0 ? h * D : C + (part - 1) * Hk * D + (h / (H / Hk)) * D);
}

// RoPE on q and k of qkv [B, T, 3C]; sign +1 rotates by +angle, −1 applies the transpose.
template <typename Real>
void rope_rotate(Real* qkv, int B, int T, int C, int H, double theta, int sign, int Hkv = 0) {
  int D = C / H, Hk = Hkv > 0 ? Hkv : H;
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++)
      for (int part = 0; part < 2; part++)
        for (int h = 0; h < (part ? Hk : H); h++) {  // k heads are indexed as kv heads here
          Real* x = qkv + qkv_offset(b * T + t, part, part ? h * (H / Hk) : h, C, H, Hkv);
          for (int j = 0; j < D / 2; j++) {
            double angle = sign * t / std::pow(theta, 2.0 * j / D);
            Real c = Real(std::cos(angle)), s = Real(std::sin(angle));
            Real a = x[j], bb = x[j + D / 2];
            x[j] = c * a - s * bb;
            x[j + D / 2] = s * a + c * bb;
          }
        }
}

// Full-matrix causal attention: P = softmax(mask(Q Kᵀ / sqrt(D))), Y = P V, per (b, h).
// Also returns the row log-sum-exp for comparison with the fast kernel.
// sink [H] (optional): a logit b_h in every row's softmax whose value vector is zero.
template <typename Real>
void attention_forward(Real* y, Real* lse, const Real* qkv, const Heads& s,
                       const Real* sink = nullptr) {
  const int B = s.B, T = s.T, C = s.C, H = s.H, Hkv = s.Hkv;
  int D = C / H;
  auto at = [&](int b, int t, int part, int h, int d) {
    return qkv[qkv_offset(b * T + t, part, h, C, H, Hkv) + d];
  };
  std::vector<Real> scores(T);
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++)
      for (int i = 0; i < T; i++) {
        Real mx = sink ? sink[h] : -INFINITY;
        for (int j = 0; j <= i; j++) {
          Real s = 0;
          for (int d = 0; d < D; d++) s += at(b, i, 0, h, d) * at(b, j, 1, h, d);
          scores[j] = s / std::sqrt(Real(D));
          mx = std::max(mx, scores[j]);
        }
        Real z = sink ? std::exp(sink[h] - mx) : Real(0);
        for (int j = 0; j <= i; j++) z += std::exp(scores[j] - mx);
        for (int d = 0; d < D; d++) {
          Real acc = 0;
          for (int j = 0; j <= i; j++) acc += std::exp(scores[j] - mx) / z * at(b, j, 2, h, d);
          y[(b * T + i) * C + h * D + d] = acc;
        }
        lse[(b * H + h) * T + i] = mx + std::log(z);
      }
}

// Backward through the stored probability matrix: dP = dY Vᵀ, dS = P ⊙ (dP − rowsum(dP ⊙ P)),
// dQ = dS K / sqrt(D), dK = dSᵀ Q / sqrt(D), dV = Pᵀ dY. dqkv accumulates.
// With sink, dsink [H] accumulates ∂L/∂b_h = Σ_i p_sink,i (0 − rowsum_i).
template <typename Real>
void attention_backward(Real* dqkv, const Real* dy, const Real* qkv, const Heads& s,
                        const Real* sink = nullptr, Real* dsink = nullptr) {
  const int B = s.B, T = s.T, C = s.C, H = s.H, Hkv = s.Hkv;
  int D = C / H;
  auto idx = [&](int b, int t, int part, int h, int d) {
    return qkv_offset(b * T + t, part, h, C, H, Hkv) + d;
  };
  std::vector<Real> P(T * T), dP(T * T), p_sink(T);
  Real scale = 1 / std::sqrt(Real(D));
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++) {
      for (int i = 0; i < T; i++) {
        Real mx = sink ? sink[h] : -INFINITY;
        for (int j = 0; j < T; j++) {
          Real s = 0;
          for (int d = 0; d < D; d++) s += qkv[idx(b, i, 0, h, d)] * qkv[idx(b, j, 1, h, d)];
          P[i * T + j] = j <= i ? s * scale : -INFINITY;
          mx = std::max(mx, P[i * T + j]);
        }
        Real z = sink ? std::exp(sink[h] - mx) : Real(0);
        for (int j = 0; j < T; j++) z += (P[i * T + j] = std::exp(P[i * T + j] - mx));
        for (int j = 0; j < T; j++) P[i * T + j] /= z;
        p_sink[i] = sink ? std::exp(sink[h] - mx) / z : Real(0);
      }
      for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++) {
          Real s = 0;
          for (int d = 0; d < D; d++)
            s += dy[(b * T + i) * C + h * D + d] * qkv[idx(b, j, 2, h, d)];
          dP[i * T + j] = s;
        }
      for (int i = 0; i < T; i++) {
        Real row = 0;
        for (int j = 0; j < T; j++) row += dP[i * T + j] * P[i * T + j];
        for (int j = 0; j < T; j++) dP[i * T + j] = P[i * T + j] * (dP[i * T + j] - row);  // dS
        if (sink) dsink[h] += p_sink[i] * (Real(0) - row);  // the sink's value is zero: dp_sink = 0
      }
      for (int i = 0; i < T; i++)
        for (int d = 0; d < D; d++) {
          Real dq = 0, dk = 0, dv = 0;
          for (int j = 0; j < T; j++) {
            dq += dP[i * T + j] * qkv[idx(b, j, 1, h, d)] * scale;
            dk += dP[j * T + i] * qkv[idx(b, j, 0, h, d)] * scale;
            dv += P[j * T + i] * dy[(b * T + j) * C + h * D + d];
          }
          dqkv[idx(b, i, 0, h, d)] += dq;
          dqkv[idx(b, i, 1, h, d)] += dk;
          dqkv[idx(b, i, 2, h, d)] += dv;
        }
    }
}

// XSA written without the unit vector: z = y − α (y·v) v / (v·v), with v·v floored at (1e-6)²;
// α = 1, or per head from alpha (gated XSA).
template <typename Real>
void xsa_forward(Real* z, const Real* y, const Real* qkv, const Heads& s,
                 const Real* alpha = nullptr) {
  const int B = s.B, T = s.T, C = s.C, H = s.H, Hkv = s.Hkv;
  int D = C / H;
  for (int n = 0; n < B * T; n++)
    for (int h = 0; h < H; h++) {
      const Real* v = qkv + qkv_offset(n, 2, h, C, H, Hkv);
      const Real* yy = y + n * C + h * D;
      const Real al = alpha ? alpha[h] : Real(1);
      Real vv = 0, yv = 0;
      for (int d = 0; d < D; d++) vv += v[d] * v[d], yv += yy[d] * v[d];
      vv = std::max(vv, Real(1e-12));
      for (int d = 0; d < D; d++) z[n * C + h * D + d] = yy[d] - al * yv * v[d] / vv;
    }
}

// Differentiating z_a = y_a − α (y·v) v_a / (v·v) directly:
//   ∂L/∂y = g − α (g·v) v / (v·v)
//   ∂L/∂v = −α [(g·v) y + (y·v) g − 2 (y·v)(g·v) v / (v·v)] / (v·v)   (last term absent when
//   floored) ∂L/∂α = −(y·v)(g·v) / (v·v)            (written per token and head into dalpha [B·T,
//   H])
// dy overwrites, the v part of dqkv accumulates.
template <typename Real>
void xsa_backward(Real* dy, Real* dqkv, const Real* dz, const Real* y, const Real* qkv,
                  const Heads& s, const Real* alpha = nullptr, Real* dalpha = nullptr) {
  const int B = s.B, T = s.T, C = s.C, H = s.H, Hkv = s.Hkv;
  int D = C / H;
  for (int n = 0; n < B * T; n++)
    for (int h = 0; h < H; h++) {
      const Real* v = qkv + qkv_offset(n, 2, h, C, H, Hkv);
      const Real* yy = y + n * C + h * D;
      const Real* g = dz + n * C + h * D;
      const Real al = alpha ? alpha[h] : Real(1);
      Real vv = 0, yv = 0, gv = 0;
      for (int d = 0; d < D; d++) vv += v[d] * v[d], yv += yy[d] * v[d], gv += g[d] * v[d];
      bool floored = !(vv > Real(1e-12));
      if (floored) vv = Real(1e-12);
      if (dalpha) dalpha[n * H + h] = -yv * gv / vv;
      for (int d = 0; d < D; d++) {
        dy[n * C + h * D + d] = g[d] - al * gv * v[d] / vv;
        Real dv = gv * yy[d] + yv * g[d] - (floored ? 0 : 2 * yv * gv * v[d] / vv);
        dqkv[qkv_offset(n, 2, h, C, H, Hkv) + d] += -al * dv / vv;
      }
    }
}

template <typename Real>
void gelu_forward(Real* out, const Real* inp, size_t n) {
  const Real pi = Real(3.14159265358979323846);
  for (size_t i = 0; i < n; i++) {
    Real x = inp[i];
    out[i] = x / 2 * (1 + std::tanh(std::sqrt(2 / pi) * (x + Real(0.044715) * x * x * x)));
  }
}

template <typename Real>
void gelu_backward(Real* dinp, const Real* inp, const Real* dout, size_t n) {
  const Real pi = Real(3.14159265358979323846);
  for (size_t i = 0; i < n; i++) {
    Real x = inp[i];
    Real u = std::sqrt(2 / pi) * (x + Real(0.044715) * x * x * x);
    Real du = std::sqrt(2 / pi) * (1 + 3 * Real(0.044715) * x * x);
    Real ch = std::cosh(u);
    dinp[i] = dout[i] * ((1 + std::tanh(u)) / 2 + x / 2 * du / (ch * ch));
  }
}

// Cross-entropy over the first V columns; loss and gradient in separate passes.
template <typename Real>
void crossentropy_forward_backward(Real* logits, Real* losses, const int32_t* targets, int N, int V,
                                   int Vp, Real dloss) {
  for (int n = 0; n < N; n++) {
    Real* row = logits + n * Vp;
    if (targets[n] < 0) {
      losses[n] = 0;
      if (dloss != 0)
        for (int j = 0; j < Vp; j++) row[j] = 0;
      continue;
    }
    Real mx = row[0];
    for (int j = 0; j < V; j++) mx = std::max(mx, row[j]);
    Real z = 0;
    for (int j = 0; j < V; j++) z += std::exp(row[j] - mx);
    losses[n] = -(row[targets[n]] - mx - std::log(z));
    if (dloss == 0) continue;
    for (int j = 0; j < Vp; j++)
      row[j] = j < V ? (std::exp(row[j] - mx) / z - (j == targets[n])) * dloss : 0;
  }
}

// ReLU²: relu(x)², and its derivative 2 relu(x).
template <typename Real>
void relu2_forward(Real* out, const Real* inp, size_t n) {
  for (size_t i = 0; i < n; i++) out[i] = inp[i] > 0 ? inp[i] * inp[i] : Real(0);
}
template <typename Real>
void relu2_backward(Real* dinp, const Real* inp, const Real* dout, size_t n) {
  for (size_t i = 0; i < n; i++) dinp[i] = inp[i] > 0 ? 2 * inp[i] * dout[i] : Real(0);
}

// Soft-capped cross-entropy from the definition: c = cap·tanh(x/cap), the cross-entropy of c, and
// the chain rule through tanh (∂c/∂x = 1 − tanh²(x/cap)), written from the raw logits.
template <typename Real>
void crossentropy_softcap(Real* logits, Real* losses, const int32_t* targets, int N, int V, int Vp,
                          Real dloss, Real cap) {
  std::vector<Real> raw(logits, logits + (size_t)N * Vp);
  for (int n = 0; n < N; n++)
    for (int j = 0; j < V; j++) logits[n * Vp + j] = cap * std::tanh(raw[n * Vp + j] / cap);
  crossentropy_forward_backward(logits, losses, targets, N, V, Vp, dloss);
  if (dloss == 0) return;
  for (int n = 0; n < N; n++)
    for (int j = 0; j < V; j++) {
      const Real t = std::tanh(raw[n * Vp + j] / cap);
      logits[n * Vp + j] *= 1 - t * t;
    }
}

// Muon (docs/SPEC.md §11) on one matrix W [rows, cols], written as the spec reads: momentum,
// Nesterov, X = U / (‖U‖_F + 1e-7) transposed when it has more rows than columns, five steps of
// A = X Xᵀ; X ← a X + (b A + c A²) X with explicit matrices, transposed back, then
// W ← W (1 − ηλ) − η max(1, rows/cols)^½ O. grad_scale: the clipping's factor. Returns O.
struct MuonStep {
  double lr = 0.02, weight_decay = 0, momentum = 0.95, grad_scale = 1;
};
template <typename Real>
std::vector<Real> muon_update(Real* w, const Real* grad, Real* m, int rows, int cols,
                              const MuonStep& step) {
  const double lr = step.lr, weight_decay = step.weight_decay, momentum = step.momentum,
               grad_scale = step.grad_scale;
  const size_t n = (size_t)rows * cols;
  std::vector<double> u(n);
  for (size_t i = 0; i < n; i++) {
    const double g = grad[i] * grad_scale;
    const double mi = momentum * m[i] + (1 - momentum) * g;
    m[i] = Real(mi);
    u[i] = (1 - momentum) * g + momentum * mi;
  }
  const bool transposed = rows > cols;
  const int r = transposed ? cols : rows, c = transposed ? rows : cols;
  std::vector<double> x(n);
  double norm = 0;
  for (double v : u) norm += v * v;
  norm = std::sqrt(norm);
  for (int i = 0; i < rows; i++)
    for (int j = 0; j < cols; j++) {
      const double v = u[(size_t)i * cols + j] / (norm + 1e-7);
      if (transposed)
        x[(size_t)j * c + i] = v;
      else
        x[(size_t)i * c + j] = v;
    }
  const ops::NewtonSchulzCoefficients k;
  for (int iteration = 0; iteration < ops::kNewtonSchulzSteps; iteration++) {
    std::vector<double> A((size_t)r * r, 0.0), A2((size_t)r * r, 0.0), B((size_t)r * r);
    for (int i = 0; i < r; i++)
      for (int j = 0; j < r; j++)
        for (int l = 0; l < c; l++)
          A[(size_t)i * r + j] += x[(size_t)i * c + l] * x[(size_t)j * c + l];
    for (int i = 0; i < r; i++)
      for (int j = 0; j < r; j++)
        for (int l = 0; l < r; l++)
          A2[(size_t)i * r + j] += A[(size_t)i * r + l] * A[(size_t)l * r + j];
    for (size_t i = 0; i < B.size(); i++) B[i] = k.b * A[i] + k.c * A2[i];
    std::vector<double> next(n);
    for (int i = 0; i < r; i++)
      for (int j = 0; j < c; j++) {
        double s = k.a * x[(size_t)i * c + j];
        for (int l = 0; l < r; l++) s += B[(size_t)i * r + l] * x[(size_t)l * c + j];
        next[(size_t)i * c + j] = s;
      }
    x = next;
  }
  std::vector<Real> o(n);
  for (int i = 0; i < rows; i++)
    for (int j = 0; j < cols; j++)
      o[(size_t)i * cols + j] = Real(transposed ? x[(size_t)j * c + i] : x[(size_t)i * c + j]);
  const double scale = std::sqrt(std::max(1.0, (double)rows / cols));
  for (size_t i = 0; i < n; i++)
    w[i] = Real(w[i] * (1 - lr * weight_decay) - lr * scale * double(o[i]));
  return o;
}

// torch.optim.AdamW, step by step as its documentation writes it.
template <typename Real>
void adamw_update(Real* param, const Real* grad, Real* m, Real* v, size_t n,
                  const ops::AdamWSettings& s) {
  const double lr = s.lr, beta1 = s.beta1, beta2 = s.beta2, eps = s.eps,
               weight_decay = s.weight_decay, grad_scale = s.grad_scale;
  const int64_t step = s.step;
  for (size_t i = 0; i < n; i++) {
    double g = grad[i] * grad_scale;
    double p = param[i] * (1 - lr * weight_decay);
    double mi = beta1 * m[i] + (1 - beta1) * g;
    double vi = beta2 * v[i] + (1 - beta2) * g * g;
    double m_hat = mi / (1 - std::pow(beta1, step));
    double v_hat = vi / (1 - std::pow(beta2, step));
    param[i] = Real(p - lr * m_hat / (std::sqrt(v_hat) + eps));
    m[i] = Real(mi);
    v[i] = Real(vi);
  }
}

}  // namespace xsa::ref

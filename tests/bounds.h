// The rounding-error bounds that the suite's floating-point comparisons are held to: derived from
// the arithmetic, not tuned until a machine passes.
//
// u is the unit roundoff of the arithmetic judged: 2^-24 for float32. A kernel run in float64 is
// compared with a reference that also rounds in float64, each on its own: u = 2 · 2^-53 there.
//
// Sums. A sum of n terms t_i (a dot product, an entry of a matrix product, a reduction) computed in
// any order (any blocking, any number of vector lanes, with or without FMA: whatever a correct
// BLAS, oneDNN or another vector width does) has
//   |error| ≤ γ_n · Σ|t_i|,  γ_n = n·u / (1 − n·u)            (Higham, Accuracy and Stability of
//                                                              Numerical Algorithms, 2002, §3.1)
// and, when its roundings behave as independent mean-zero random errors,
//   |error| ≤ λ·√n·u · Σ|t_i| to first order, except with probability ≤ 2n·exp(−λ²/2)
//                                                             (Higham & Mary, SIAM J. Sci. Comput.
//                                                              41(5), 2019, Theorem 3.1).
// sum_error(n, u) is the smaller of the two, with λ = 8: below 10^-10 for any n of this suite. The
// first needs no model at all; the second is what keeps bounds for long sums realistic (√n, not n).
//
// Kernels compose sums with elementwise steps. Each bound below adds, to first order (the
// second-order terms are O(u²)), every rounding the kernel makes times the sensitivity of the
// output to it; the argument is written beside each. A bound is per entry: |got − want| ≤ bound,
// checked entry by entry by `within`.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "xsa/model/model_config.h"
#include "xsa/ops/reference.h"

namespace xsa::test {

using Vec = std::vector<double>;

constexpr double kFloatRoundoff = 0x1p-24;  // u of float32
constexpr double kDoubleRoundoff =
    0x1p-52;  // 2 · 2^-53: a float64 kernel against a float64 reference
// The u for a kernel computed in Real.
template <typename Real>
constexpr double roundoff() {
  return sizeof(Real) == 4 ? kFloatRoundoff : kDoubleRoundoff;
}

// The bound on a sum of n terms relative to Σ|terms| (see the top of the file).
inline double sum_error(double n, double u) {
  constexpr double kLambda = 8;
  const double gamma = n * u < 0.5 ? n * u / (1 - n * u) : INFINITY;
  return std::min(gamma, kLambda * std::sqrt(std::max(n, 1.0)) * u);
}

// fast_exp (ops/vmath.h) and its 16-lane twin are within 2 ulp, so within 4u relative, over the
// whole float range they are used on (checked over 10^7 arguments by Vmath.FastExpWithinFourU);
// float64 uses std::exp (1 ulp).
inline double exp_error(double u) {
  return 4 * u;
}

// Every entry of got within bound of want: |got − want| ≤ bound. A NaN or an infinity where want
// is finite fails. Reports how many entries exceed their bound and the worst of them. With
// XSA_SHOW_BOUNDS=1 in the environment it prints how much of its bound each check uses.
template <typename G>
::testing::AssertionResult within(const G& got, const Vec& want, const Vec& bound,
                                  const char* what = "") {
  if (got.size() != want.size() || bound.size() != want.size())
    return ::testing::AssertionFailure() << what << ": " << got.size() << " entries against "
                                         << want.size() << " and " << bound.size() << " bounds";
  size_t over = 0, worst = 0;
  double worst_ratio = 0;
  for (size_t i = 0; i < want.size(); i++) {
    const double diff = std::fabs((double)got[i] - want[i]);
    // The bounds are first order: what the terms in u² add (a millionth of them) is allowed.
    const double allowed = bound[i] * (1 + 1e-6);
    double ratio = diff == 0 ? 0 : diff / bound[i];
    if (!(diff <= allowed)) {  // (a NaN fails here)
      over++;
      if (!std::isfinite(ratio)) ratio = INFINITY;
    }
    if (!(ratio <= worst_ratio)) worst_ratio = ratio, worst = i;
  }
  if (std::getenv("XSA_SHOW_BOUNDS")) std::printf("bound use %8.3g  %s\n", worst_ratio, what);
  if (over == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << what << ": " << over << " of " << want.size() << " entries past their bound; worst ["
         << worst << "]: got " << (double)got[worst] << ", want " << want[worst] << ", |diff| "
         << std::fabs((double)got[worst] - want[worst]) << " > bound " << bound[worst] << " ("
         << worst_ratio << "×)";
}

inline Vec abs_of(const Vec& x) {
  Vec a(x.size());
  for (size_t i = 0; i < x.size(); i++) a[i] = std::fabs(x[i]);
  return a;
}

// ---------------------------------------------------------------- products
// out [N, O] = x [N, I] · wᵀ (+ out0): each entry a sum of I products, I + 1 terms with out0 (a
// BLAS may add out0 before, between or after its partial sums).
inline Vec matmul_forward_bound(const Vec& x, const Vec& w, int N, int I, int O, const Vec* out0,
                                double u) {
  Vec mag(N * O);
  ref::matmul_forward(mag.data(), abs_of(x).data(), abs_of(w).data(), N, I, O);
  const double e = sum_error(I + (out0 ? 1 : 0), u);
  for (size_t i = 0; i < mag.size(); i++)
    mag[i] = e * (mag[i] + (out0 ? std::fabs((*out0)[i]) : 0));
  return mag;
}
// dx [N, I] = dout · w: sums of O products; dw [O, I] = dw0 + doutᵀ · x: N + 1 terms.
inline void matmul_backward_bound(Vec& dx_bound, Vec& dw_bound, const Vec& dout, const Vec& x,
                                  const Vec& w, const Vec& dw0, int N, int I, int O, double u) {
  dx_bound.assign(N * I, 0.0);
  dw_bound.assign(O * I, 0.0);
  ref::matmul_backward(dx_bound.data(), dw_bound.data(), abs_of(dout).data(), abs_of(x).data(),
                       abs_of(w).data(), N, I, O);
  const double ex = sum_error(O, u), ew = sum_error(N + 1, u);
  for (double& b : dx_bound) b *= ex;
  for (size_t i = 0; i < dw_bound.size(); i++) dw_bound[i] = ew * (dw_bound[i] + std::fabs(dw0[i]));
}

// ---------------------------------------------------------------- layernorm
// The statistics are sums in float64 of float inputs: their own error (C·2^-53 relative) is below
// a thousandth of u here and left out. Forward: x̂ = (x − mean)·rstd rounded to float (u|x̂|),
// times w (u|x̂w|), plus b (u(|x̂w| + |b|)): 3u|x̂w| + u|b| per output, FMA or not; mean and rstd
// are stored rounded (u each).
// Backward: it reads the stored mean and rstd (off by u|mean|, u|rstd|), so its x̂ is off by
// |δx̂| ≤ rstd·u|mean| + 2u|x̂| (the second u: x − mean formed in float by the blocked path); dx's
// term, formed in double, is rounded (u) and added to dx0 (u(|dx0| + |term|)), and moves with
// rstd (u|term|) and x̂ (rstd·(|δx̂|·|mean(dx̂·x̂)| + |x̂|·mean(|dx̂||δx̂|))); dw and db (double sums
// over the rows) are rounded and added to dw0, db0 (2u(|dw0| + |Σ|)), and dw moves with x̂
// (Σ_n |dout·δx̂|).
struct LayerNormBounds {
  Vec y, mean, rstd, dx, dw, db;
};
inline LayerNormBounds layernorm_bounds(const Vec& x, const Vec& w, const Vec& b, const Vec& dout,
                                        const Vec& dx0, const Vec& dw0, const Vec& db0, int N,
                                        int C, double u) {
  LayerNormBounds out{Vec(N * C), Vec(N), Vec(N), Vec(N * C), Vec(C, 0.0), Vec(C, 0.0)};
  Vec dw_sum(C, 0.0), db_sum(C, 0.0), dw_move(C, 0.0);
  for (int n = 0; n < N; n++) {
    const double* xr = &x[n * C];
    double m = 0, var = 0;
    for (int c = 0; c < C; c++) m += xr[c];
    m /= C;
    for (int c = 0; c < C; c++) var += (xr[c] - m) * (xr[c] - m);
    const double s = 1 / std::sqrt(var / C + 1e-5);
    // (stored rounded; the float64 sums' own error, (C + 4)·2^-53 relative, below u/1000)
    out.mean[n] =
        u * std::fabs(m) + (C + 4) * 0x1p-53 * std::fabs(m) + C * 0x1p-53 * std::fabs(xr[0]);
    out.rstd[n] = u * s + (C + 4) * 0x1p-53 * s;
    double mean_g = 0, mean_gx = 0, mean_g_dxh = 0;
    Vec xh(C), dxh(C), g(C);
    for (int c = 0; c < C; c++) {
      xh[c] = (xr[c] - m) * s;
      dxh[c] = s * u * std::fabs(m) + 2 * u * std::fabs(xh[c]);
      g[c] = dout[n * C + c] * w[c];
      mean_g += g[c] / C, mean_gx += g[c] * xh[c] / C, mean_g_dxh += std::fabs(g[c]) * dxh[c] / C;
      out.y[n * C + c] = 3 * u * std::fabs(xh[c] * w[c]) + u * std::fabs(b[c]);
    }
    for (int c = 0; c < C; c++) {
      const double term = s * (g[c] - mean_g - xh[c] * mean_gx);
      out.dx[n * C + c] = 2 * u * std::fabs(term) +
                          u * (std::fabs(dx0[n * C + c]) + std::fabs(term)) +
                          s * (dxh[c] * std::fabs(mean_gx) + std::fabs(xh[c]) * mean_g_dxh);
      dw_sum[c] += dout[n * C + c] * xh[c];
      db_sum[c] += dout[n * C + c];
      dw_move[c] += std::fabs(dout[n * C + c]) * dxh[c];
    }
  }
  for (int c = 0; c < C; c++) {
    out.dw[c] = 2 * u * (std::fabs(dw0[c]) + std::fabs(dw_sum[c])) + dw_move[c];
    out.db[c] = 2 * u * (std::fabs(db0[c]) + std::fabs(db_sum[c]));
  }
  return out;
}

// ---------------------------------------------------------------- rope
// out = lo·cos − hi·sin (and hi·cos + lo·sin): cos and sin are stored rounded (u each), the two
// products and their sum round (2u, FMA or not): 3u (|lo·cos| + |hi·sin|). rotated: the reference's
// result; the bound needs the inputs: qkv before the rotation.
inline Vec rope_bound(const Vec& qkv, int B, int T, int C, int H, int Hkv, double theta, double u) {
  const int Hk = Hkv > 0 ? Hkv : H, D = C / H, W = C + 2 * Hk * D;
  Vec bound(qkv.size(), 0.0);  // v is copied: no error
  for (int n = 0; n < B * T; n++) {
    const int t = n % T;
    for (int part = 0; part < 2; part++)
      for (int h = 0; h < (part ? Hk : H); h++) {
        const int at = n * W + part * C + h * D;
        for (int j = 0; j < D / 2; j++) {
          const double angle = t / std::pow(theta, 2.0 * j / D);
          const double c = std::fabs(std::cos(angle)), s = std::fabs(std::sin(angle));
          const double lo = std::fabs(qkv[at + j]), hi = std::fabs(qkv[at + j + D / 2]);
          bound[at + j] = 3 * u * (lo * c + hi * s);
          bound[at + j + D / 2] = 3 * u * (hi * c + lo * s);
        }
      }
  }
  return bound;
}

// ---------------------------------------------------------------- gelu
// z = k(x + a·x³) with k and a stored as floats (u each) and five roundings: |δz| ≤ 7u·k(|x| +
// a|x|³). t = tanh z as 1 − 2/(E + 1) with
// E = exp(2z) (off by exp_error relative): |δt| ≤ (1 − t²)(|δz| + exp_error/2) + 2u(1 − t) + u|t|
// (E + 1 and the division each u of 2/(E + 1) = 1 − t, the subtraction u|t|).
// Forward 0.5·x·(1 + t): 0.5|x|(|δt| + u|1 + t|) + u|out|.
// Backward (0.5(1 + t) + 0.5·x·(1 − t²)·k(1 + 3a·x²))·g: the first term moves by 0.5|δt|, the
// second by 0.5|x|k(1 + 3a·x²)(2|t||δt| + u t² + u(1 − t²)), each product and sum rounds, and k
// and 3a are floats (8u of the second term, 2u of the whole): all times |g|.
inline void gelu_bounds(Vec& out_bound, Vec& dx_bound, const Vec& x, const Vec& dout, double u) {
  const double k = 0.7978845608028654, a = 0.044715, ee = exp_error(u);
  out_bound.resize(x.size());
  dx_bound.resize(x.size());
  for (size_t i = 0; i < x.size(); i++) {
    const double xi = x[i], ax = std::fabs(xi), z = k * (xi + a * xi * xi * xi), t = std::tanh(z);
    const double dz = 7 * u * k * (ax + a * ax * ax * ax);
    const double dt = (1 - t * t) * (dz + ee / 2) + 2 * u * (1 - t) + u * std::fabs(t);
    const double out = 0.5 * xi * (1 + t);
    out_bound[i] = 0.5 * ax * (dt + u * std::fabs(1 + t)) + u * std::fabs(out);
    const double first = 0.5 * (1 + t), slope = 0.5 * ax * k * (1 + 3 * a * xi * xi);
    const double second = slope * (1 - t * t);
    const double d_second = slope * (2 * std::fabs(t) * dt + u * t * t + u * (1 - t * t));
    dx_bound[i] = std::fabs(dout[i]) *
                  (0.5 * dt + u * first + d_second + 8 * u * second + 2 * u * (first + second));
  }
}

// ---------------------------------------------------------------- cross-entropy
// Per row: m = max (exact); e_j = exp(x_j − m), off by θ_j ≤ u|x_j − m| + exp_error relative; their
// sum l (V terms) by sum_error(V)·l + max θ·l. loss = log l − (x_t − m): |δl|/l, log's rounding
// (2u|log l|), the subtraction (u|x_t − m|) and the last one (u|loss|). The gradient e_j·(dloss/l)
// (and − dloss at the target): |g_j|(θ_j + |δl|/l + 3u: the quotient, the product and dloss
// itself a float), and u|g_t| more at the target.
inline void crossentropy_bounds(Vec& loss_bound, Vec& grad_bound, const Vec& logits,
                                const std::vector<int32_t>& targets, int N, int V, int Vp,
                                double dloss, double u) {
  loss_bound.assign(N, 0.0);
  grad_bound.assign(N * Vp, 0.0);
  const double ee = exp_error(u);
  for (int n = 0; n < N; n++) {
    const int t = targets[n];
    if (t < 0) continue;  // exactly 0
    const double* x = &logits[n * Vp];
    double m = x[0], l = 0, theta_max = 0;
    for (int j = 0; j < V; j++) m = std::max(m, x[j]);
    for (int j = 0; j < V; j++) {
      l += std::exp(x[j] - m);
      theta_max = std::max(theta_max, u * std::fabs(x[j] - m) + ee);
    }
    const double dl = sum_error(V, u) + theta_max;  // relative
    const double loss = std::log(l) - (x[t] - m);
    loss_bound[n] =
        dl + 2 * u * std::fabs(std::log(l)) + u * std::fabs(x[t] - m) + u * std::fabs(loss);
    for (int j = 0; j < V; j++) {
      const double g = std::exp(x[j] - m) / l * dloss;
      const double theta = u * std::fabs(x[j] - m) + ee;
      grad_bound[n * Vp + j] = std::fabs(g) * (theta + dl + 3 * u);  // (dloss a float: u)
      if (j == t) grad_bound[n * Vp + j] += u * std::fabs(g - dloss);
    }
  }
}

// ---------------------------------------------------------------- adamw
// A running bound, step by step, beside the float64 reference's own values. The kernel's
// constants are floats: β1 and β2 off by u relative, 1 − β1 and 1 − β2 (formed from them) by
// u·β/(1 − β): 9u and 19u for 0.9 and 0.95. Each step's m, v, √v, the denominator, the update and
// the weight round as written beside them; what came in carries its bound forward.
struct AdamBounds {
  Vec p, m, v;
};
inline void adamw_bound_step(AdamBounds& e, const Vec& p, const Vec& m, const Vec& v,
                             const Vec& grad, double lr, double b1, double b2, double eps,
                             double wd, double grad_scale, long step, double u) {
  // p, m, v: the reference's values before this step.
  const double bias1 = 1 - std::pow(b1, (double)step), bias2 = 1 - std::pow(b2, (double)step);
  const double ibs = 1 / std::sqrt(bias2), step_size = lr / bias1, decay = 1 - lr * wd;
  const double r1 = u * b1 / (1 - b1), r2 = u * b2 / (1 - b2);
  for (size_t i = 0; i < p.size(); i++) {
    const double g = grad[i] * grad_scale, eg = u * std::fabs(g);
    const double m1 = b1 * m[i] + (1 - b1) * g, v1 = b2 * v[i] + (1 - b2) * g * g;
    const double em = b1 * (e.m[i] + u * std::fabs(m[i])) + (1 - b1) * (r1 * std::fabs(g) + eg) +
                      2 * u * (b1 * std::fabs(m[i]) + (1 - b1) * std::fabs(g));
    const double ev = b2 * (e.v[i] + u * v[i]) +
                      (1 - b2) * (r2 * g * g + 2 * std::fabs(g) * eg + u * g * g) +
                      2 * u * (b2 * v[i] + (1 - b2) * g * g);
    const double root = std::sqrt(v1);
    // √v moves by δv/(2√v) (or by √δv where v is as small as its own error)
    const double eroot = (v1 > ev ? ev / (2 * root) : std::sqrt(ev)) + u * root;
    const double denom = root * ibs + eps;
    const double edenom = ibs * eroot + 3 * u * root * ibs + u * denom + u * eps;
    const double update = step_size * m1 / denom;
    const double eupdate =
        step_size * (em + std::fabs(m1) * edenom / denom) / denom + 3 * u * std::fabs(update);
    const double p1 = p[i] * decay - update;
    e.p[i] = e.p[i] * decay + u * std::fabs(p[i] * decay) + eupdate +
             2 * u * (std::fabs(p[i] * decay) + std::fabs(update));
    (void)p1;
    e.m[i] = em;
    e.v[i] = ev;
  }
}

// ---------------------------------------------------------------- xsa (one token and head)
// z = y − α s v with s = (y·v)/(v·v) (v·v floored at 10^-12): the dot products round as sums of D
// terms (sum_error(D)·Σ|y v|, sum_error(D)·v·v), α·(y·v)/(v·v) two more (2u|s|), and
// y_d − s·v_d two (2u(|y_d| + |α s v_d|)). An error δy already in y moves z by the projection:
// δy_d − α u_d (u·δy), u = v/‖v‖.
inline void xsa_forward_row_bound(double* z_bound, const double* y, const double* v,
                                  const double* dy_in, int D, double alpha, double u) {
  double vv = 0, yv = 0, ayv = 0;
  for (int d = 0; d < D; d++) vv += v[d] * v[d], yv += y[d] * v[d], ayv += std::fabs(y[d] * v[d]);
  const double e = sum_error(D, u), n2 = std::max(vv, 1e-12);
  const double s = yv / n2,
               ds = std::fabs(alpha) *
                    (e * ayv / n2 + e * std::fabs(yv) / n2 * (vv > 1e-12) + 2 * u * std::fabs(s));
  double proj = 0;  // u·δy in absolute values
  for (int d = 0; d < D; d++) proj += std::fabs(v[d]) * (dy_in ? dy_in[d] : 0.0);
  proj /= std::sqrt(n2);
  for (int d = 0; d < D; d++)
    z_bound[d] = (dy_in ? dy_in[d] : 0.0) +
                 std::fabs(alpha) * std::fabs(v[d]) / std::sqrt(n2) * proj + ds * std::fabs(v[d]) +
                 2 * u * (std::fabs(y[d]) + std::fabs(alpha * s * v[d]));
}

// The backward (ops/xsa_row.h): with n = ‖v‖ (floored at 10^-6), s = y·v/n, gu = g·v/n:
// dy = g − α·gu·u;  a = −α(s g + gu y);  dv += (a − au·u)/n with au = −2α s gu;  ∂L/∂α = −s·gu.
// Roundings: the three dot products (sum_error(D) of Σ|·|), n = √(v·v) (sum_error(D)/2 + u), 1/n
// (u), s and gu (u each), u_d = v_d/n (u), then each expression's products and sums (counted
// beside them). An error δg in g (none here: g is an input) and δy in y move the results through
// their derivatives: dy does not depend on y; a moves by α(|g|·|u·δy| + |gu||δy|), and dv by the
// projection of δa over n.
struct XsaRowBound {
  double dalpha;
};
inline XsaRowBound xsa_backward_row_bound(double* dy_bound, double* dv_bound, const double* g,
                                          const double* y, const double* v, const double* dy_in,
                                          int D, double alpha, double u) {
  double vv = 0, yv = 0, gv = 0, ayv = 0, agv = 0;
  for (int d = 0; d < D; d++) {
    vv += v[d] * v[d], yv += y[d] * v[d], gv += g[d] * v[d];
    ayv += std::fabs(y[d] * v[d]), agv += std::fabs(g[d] * v[d]);
  }
  const double e = sum_error(D, u), al = std::fabs(alpha);
  const bool degenerate = !(std::sqrt(vv) > 1e-6);
  const double n = degenerate ? 1e-6 : std::sqrt(vv);
  const double rel_n = degenerate ? 0 : e / 2 + u;  // n's relative error
  const double rel_inv = rel_n + u;                 // 1/n's
  const double s = yv / n, gu = gv / n;
  const double ds = e * ayv / n + std::fabs(s) * (rel_inv + u);
  const double dgu = e * agv / n + std::fabs(gu) * (rel_inv + u);
  // y's own error, projected on u: |u|·|δy|
  double u_dy = 0;
  for (int d = 0; d < D; d++) u_dy += std::fabs(v[d]) / n * (dy_in ? dy_in[d] : 0.0);
  const double ds_total = ds + u_dy;  // s = y·u moves with y
  const double au = -2 * alpha * s * gu;
  const double dau =
      2 * al * (ds_total * std::fabs(gu) + std::fabs(s) * dgu) + 2 * u * std::fabs(au);
  double proj_da = 0;
  Vec a(D), da(D);
  for (int d = 0; d < D; d++) {
    const double ud = v[d] / n, dud = std::fabs(ud) * (rel_inv + u);
    dy_bound[d] = al * (dgu * std::fabs(ud) + std::fabs(gu) * dud) +
                  2 * u * (std::fabs(g[d]) + al * std::fabs(gu * ud));
    a[d] = -alpha * (s * g[d] + gu * y[d]);
    da[d] = al * (ds_total * std::fabs(g[d]) + dgu * std::fabs(y[d]) +
                  std::fabs(gu) * (dy_in ? dy_in[d] : 0.0) +
                  3 * u * (std::fabs(s * g[d]) + std::fabs(gu * y[d])));
    proj_da += std::fabs(ud) * da[d];
  }
  for (int d = 0; d < D; d++) {
    const double ud = v[d] / n, dud = std::fabs(ud) * (rel_inv + u);
    const double term = (a[d] - (degenerate ? 0 : au * ud)) / n;
    if (degenerate) {
      dv_bound[d] = (da[d] / n) + 2 * u * std::fabs(term);
    } else {
      dv_bound[d] =
          (da[d] + std::fabs(ud) * proj_da + dau * std::fabs(ud) + std::fabs(au) * dud) / n +
          std::fabs(term) * (rel_inv + 3 * u);
    }
  }
  return {ds_total * std::fabs(gu) + std::fabs(s) * dgu + u * std::fabs(s * gu)};
}

// The batch kernels (ops::xsa_forward, ops::xsa_backward) on y and qkv given exactly, the
// own-value gradients added onto dqkv0 (with the group's heads: group + 1 terms).
struct XsaBounds {
  Vec z, dy, dqkv, dalpha;
};
inline XsaBounds xsa_bounds(const Vec& qkv, const Vec& y, const Vec& dz, const Vec& dqkv0, int B,
                            int T, int C, int H, int Hkv, const Vec& alpha, double u) {
  const int Hk = Hkv > 0 ? Hkv : H, group = H / Hk, D = C / H, W = C + 2 * Hk * D, N = B * T;
  XsaBounds out{Vec(N * C), Vec(N * C), Vec(N * W, 0.0), Vec(N * H)};
  Vec dv_b(D), mag(N * W, 0.0), own(D);
  for (int n = 0; n < N; n++)
    for (int h = 0; h < H; h++) {
      const double* v = &qkv[n * W + C + Hk * D + (h / group) * D];
      const double al = alpha.empty() ? 1.0 : alpha[h];
      xsa_forward_row_bound(&out.z[n * C + h * D], &y[n * C + h * D], v, nullptr, D, al, u);
      out.dalpha[n * H + h] =
          xsa_backward_row_bound(&out.dy[n * C + h * D], dv_b.data(), &dz[n * C + h * D],
                                 &y[n * C + h * D], v, nullptr, D, al, u)
              .dalpha;
      double vv = 0, yv = 0, gv = 0;
      for (int d = 0; d < D; d++)
        vv += v[d] * v[d], yv += y[n * C + h * D + d] * v[d], gv += dz[n * C + h * D + d] * v[d];
      const bool floored = !(vv > 1e-12);
      vv = std::max(vv, 1e-12);
      for (int d = 0; d < D; d++) {
        const int at = n * W + C + Hk * D + (h / group) * D + d;
        out.dqkv[at] += dv_b[d];
        mag[at] += std::fabs(al *
                             (gv * y[n * C + h * D + d] + yv * dz[n * C + h * D + d] -
                              (floored ? 0 : 2 * yv * gv * v[d] / vv)) /
                             vv);
      }
    }
  for (int i = 0; i < N * W; i++)
    out.dqkv[i] += sum_error(group + 1, u) * (std::fabs(dqkv0[i]) + mag[i]);
  return out;
}

// ---------------------------------------------------------------- attention
// A problem for the tiled (or cached) attention kernel and its reference, with the bounds of every
// output. Shapes as ops::AttentionArgs; sink and alpha may be empty; dqkv0: what the backward
// accumulates onto (zeros when it writes).
struct AttentionProblem {
  int B, T, C, H, Hkv = 0;
  bool exclusive = false;
  Vec qkv = {}, sink = {}, alpha = {}, dout = {}, dqkv0 = {};
  int key_tile = 64;  // the forward's key tiles (online softmax); the cached kernel: T (one pass)
};
struct AttentionBounds {
  Vec y, lse, z, dqkv, dalpha, dsink;  // dsink per (b, h)
};

// Forward, per (b, h) and row i, keys j ≤ i:
//   S_ij = (q_i·k_j)·scale off by a_ij = sum_error(D + 1)·scale·Σ|q_i k_j| + 2u|S_ij| (the scale's
//   own rounding and its product; D + 1: a BLAS may scale each term first).
//   p_ij = exp(S_ij − m_i): with the shift's rounding (u|S_ij − m_i|), exp's (exp_error), and per
//   later key tile that raised the row's maximum a correction factor exp(m_old − m_new) times the
//   accumulated sums (exp_error + 2u each, its argument u·range of S): each p_ij is off by
//   θ_ij ≤ a_ij + u|S_ij − m_i| + exp_error + (tiles − 1)(exp_error + 2u) + u·range_i. (An error
//   common to all j cancels in y and lse: the shift m_i needs no term.)
//   l = Σ p (with the sink's), T + 1 positive terms: sum_error(T + 1)·l; acc = Σ p v: sum_error(T)
//   of Σ p|v|; y = acc · (1/l): 2u|y|.
//   ⇒ |δy_id| ≤ Θ_i Σ_j P_ij|v_jd − y_id| + sum_error(T)Σ_j P_ij|v_jd| + (sum_error(T + 1) +
//   2u)|y_id| (Θ_i = max_j θ_ij; the sink, a value of zero, counts in the first sum as P_is|y_id|).
//   lse_i = m_i + log l: Θ_i + sum_error(T + 1) + u(2|lse_i| + |m_i|) + 2u (log's rounding).
// Backward, from the forward's y and lse (off by the bounds above) and d_out:
//   XSA first turns ∂L/∂z into ∂L/∂y and adds the own-value gradient (xsa_backward_row_bound);
//   D_i = dy_i·y_i: sum_error(D)Σ|dy y| + Σ|dy||δy| + Σ|δdy||y|;
//   p_ij recomputed from S and lse: θb_ij = a_ij + δlse_i + u|S_ij − lse_i| + exp_error;
//   dP_ij = dy_i·v_j: sum_error(D)Σ|dy v| + Σ|δdy||v|;
//   dS_ij = P_ij(dP_ij − D_i)·scale: scale·(P θb |dP − D| + P(δdP + δD)) + 4u|dS|;
//   dV_j = dv0 + Σ_i P_ij dy_i (over the group's heads too): sum_error of Σ P|dy| and |dv0|, plus
//   Σ_i P(θb|dy| + |δdy|); dQ_i = dq0 + Σ_j dS_ij k_j and dK_j = dk0 + Σ_i dS_ij q_i alike;
//   ∂L/∂b_h = −Σ_i p_sink,i D_i: Σ_i p_s(θs|D_i| + δD_i) + sum_error(T)Σ p_s|D_i|.
// ∂L/∂b_h per sequence [B, H] summed over the sequences, as the reference sums it, with the sum
// of their bounds (and the float64 sum's own rounding).
template <typename Real>
inline void dsink_summed(const std::vector<Real>& rows, const Vec& row_bounds, int B, int H,
                         Vec& sum, Vec& bound) {
  sum.assign(H, 0.0), bound.assign(H, 0.0);
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++) {
      sum[h] += rows[b * H + h];
      bound[h] += row_bounds[b * H + h];
    }
  for (int h = 0; h < H; h++) bound[h] += B * kDoubleRoundoff * std::fabs(sum[h]);
}

inline AttentionBounds attention_bounds(const AttentionProblem& pr, double u) {
  const int B = pr.B, T = pr.T, C = pr.C, H = pr.H, Hk = pr.Hkv > 0 ? pr.Hkv : H;
  const int group = H / Hk, D = C / H, W = C + 2 * Hk * D, N = B * T;
  const double scale = 1 / std::sqrt((double)D), ee = exp_error(u), eD = sum_error(D, u),
               eS = sum_error(D + 1, u);
  const double eT = sum_error(T, u), eT1 = sum_error(T + 1, u);
  const int tiles = (T + pr.key_tile - 1) / pr.key_tile;
  const bool sink = !pr.sink.empty();
  auto q = [&](int n, int h, int d) { return pr.qkv[n * W + h * D + d]; };
  auto k = [&](int n, int g, int d) { return pr.qkv[n * W + C + g * D + d]; };
  auto v = [&](int n, int g, int d) { return pr.qkv[n * W + C + Hk * D + g * D + d]; };
  AttentionBounds out{Vec(N * C, 0.0), Vec(B * H * T, 0.0), Vec(N * C, 0.0),
                      Vec(N * W, 0.0), Vec(N * H, 0.0),     Vec(B * H, 0.0)};
  Vec y(N * C, 0.0), lse(B * H * T, 0.0);  // exact
  // P, a (S's error) and θ per (b, h), kept for the backward.
  std::vector<Vec> P(B * H), A(B * H), Sm(B * H), Ps(B * H);
  Vec dy_err(N * C, 0.0);  // δy entering the backward (the forward's bound)
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++) {
      const int g = h / group, bh = b * H + h;
      Vec& p = P[bh] = Vec(T * T, 0.0);
      Vec& a = A[bh] = Vec(T * T, 0.0);
      Vec& s_raw = Sm[bh] = Vec(T * T, 0.0);
      Vec& ps = Ps[bh] = Vec(T, 0.0);
      for (int i = 0; i < T; i++) {
        const int ni = b * T + i;
        double m = sink ? pr.sink[h] : -INFINITY, lo = INFINITY;
        for (int j = 0; j <= i; j++) {
          double s = 0, as = 0;
          for (int d = 0; d < D; d++) {
            s += q(ni, h, d) * k(b * T + j, g, d);
            as += std::fabs(q(ni, h, d) * k(b * T + j, g, d));
          }
          s_raw[i * T + j] = s * scale;
          a[i * T + j] = eS * scale * as + 2 * u * std::fabs(s * scale);
          m = std::max(m, s * scale), lo = std::min(lo, s * scale);
        }
        double l = sink ? std::exp(pr.sink[h] - m) : 0;
        for (int j = 0; j <= i; j++) l += std::exp(s_raw[i * T + j] - m);
        double theta = 0;
        const double range = m - std::min(lo, sink ? pr.sink[h] : lo);
        for (int j = 0; j <= i; j++) {
          p[i * T + j] = std::exp(s_raw[i * T + j] - m) / l;
          theta = std::max(theta, a[i * T + j] + u * std::fabs(s_raw[i * T + j] - m));
        }
        theta += ee + (tiles - 1) * (ee + 2 * u) + u * range;
        ps[i] = sink ? std::exp(pr.sink[h] - m) / l : 0;
        const double l_se = m + std::log(l);
        lse[bh * T + i] = l_se;
        out.lse[bh * T + i] = theta + eT1 + u * (2 * std::fabs(l_se) + std::fabs(m)) + 2 * u;
        for (int d = 0; d < D; d++) {
          double yd = 0;
          for (int j = 0; j <= i; j++) yd += p[i * T + j] * v(b * T + j, g, d);
          y[ni * C + h * D + d] = yd;
        }
        for (int d = 0; d < D; d++) {
          const double yd = y[ni * C + h * D + d];
          double spread = ps[i] * std::fabs(yd), mag = 0;
          for (int j = 0; j <= i; j++) {
            spread += p[i * T + j] * std::fabs(v(b * T + j, g, d) - yd);
            mag += p[i * T + j] * std::fabs(v(b * T + j, g, d));
          }
          out.y[ni * C + h * D + d] = theta * spread + eT * mag + (eT1 + 2 * u) * std::fabs(yd);
        }
      }
    }
  dy_err = out.y;
  // XSA's z from y, and the backward's ∂L/∂y from ∂L/∂z (plus the own-value gradients).
  Vec dy = pr.dout, ddy(N * C, 0.0), dv_own_err(N * W, 0.0), dv_own_mag(N * W, 0.0);
  for (int n = 0; n < N; n++)
    for (int h = 0; h < H; h++) {
      if (!pr.exclusive) break;
      const int g = h / group;
      const double al = pr.alpha.empty() ? 1.0 : pr.alpha[h];
      Vec vv(D), dv_b(D), dy_row(D);
      for (int d = 0; d < D; d++) vv[d] = v(n, g, d);
      xsa_forward_row_bound(&out.z[n * C + h * D], &y[n * C + h * D], vv.data(),
                            &dy_err[n * C + h * D], D, al, u);
      const XsaRowBound r =
          xsa_backward_row_bound(&ddy[n * C + h * D], dv_b.data(), &pr.dout[n * C + h * D],
                                 &y[n * C + h * D], vv.data(), &dy_err[n * C + h * D], D, al, u);
      out.dalpha[n * H + h] = r.dalpha;
      for (int d = 0; d < D; d++) dv_own_err[n * W + C + Hk * D + g * D + d] += dv_b[d];
      // the exact ∂L/∂y of this row (the reference's), for the products below
      double gv = 0, nv = 0;
      for (int d = 0; d < D; d++) gv += pr.dout[n * C + h * D + d] * vv[d], nv += vv[d] * vv[d];
      nv = std::max(nv, 1e-12);
      double yv = 0;
      for (int d = 0; d < D; d++) yv += y[n * C + h * D + d] * vv[d];
      for (int d = 0; d < D; d++) {
        const double gd = pr.dout[n * C + h * D + d];
        dy[n * C + h * D + d] = gd - al * gv * vv[d] / nv;
        // the own-value gradient this head adds to v (ops/reference.h's xsa_backward)
        const double own =
            -al *
            (gv * y[n * C + h * D + d] + yv * gd - (nv > 1e-12 ? 2 * yv * gv * vv[d] / nv : 0)) /
            nv;
        dv_own_mag[n * W + C + Hk * D + g * D + d] += std::fabs(own);
      }
    }
  // The attention backward.
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++) {
      const int g = h / group, bh = b * H + h;
      const Vec &p = P[bh], &a = A[bh], &s_raw = Sm[bh];
      Vec Dv(T), dD(T), dS(T * T, 0.0), ddS(T * T, 0.0), thb(T * T, 0.0);
      for (int i = 0; i < T; i++) {
        const int ni = b * T + i;
        double s = 0, as = 0, e_in = 0;
        for (int d = 0; d < D; d++) {
          const int at = ni * C + h * D + d;
          s += dy[at] * y[at];
          as += std::fabs(dy[at] * y[at]);
          e_in += std::fabs(dy[at]) * dy_err[at] + ddy[at] * std::fabs(y[at]);
        }
        Dv[i] = s, dD[i] = eD * as + e_in;
      }
      double dsink = 0, dsink_err = 0, dsink_mag = 0;
      for (int i = 0; i < T; i++) {
        const int ni = b * T + i;
        const double dlse = out.lse[bh * T + i];
        if (sink) {
          const double ths = dlse + u * std::fabs(pr.sink[h] - lse[bh * T + i]) + 2 * u;
          dsink -= Ps[bh][i] * Dv[i];
          dsink_err += Ps[bh][i] * (ths * std::fabs(Dv[i]) + dD[i]);
          dsink_mag += Ps[bh][i] * std::fabs(Dv[i]);
        }
        for (int j = 0; j <= i; j++) {
          const int nj = b * T + j;
          thb[i * T + j] =
              a[i * T + j] + dlse + u * std::fabs(s_raw[i * T + j] - lse[bh * T + i]) + ee;
          double dp = 0, adp = 0, edp = 0;
          for (int d = 0; d < D; d++) {
            dp += dy[ni * C + h * D + d] * v(nj, g, d);
            adp += std::fabs(dy[ni * C + h * D + d] * v(nj, g, d));
            edp += ddy[ni * C + h * D + d] * std::fabs(v(nj, g, d));
          }
          const double pij = p[i * T + j];
          dS[i * T + j] = pij * (dp - Dv[i]) * scale;
          ddS[i * T + j] = scale * (pij * thb[i * T + j] * std::fabs(dp - Dv[i]) +
                                    pij * (eD * adp + edp + dD[i])) +
                           4 * u * std::fabs(dS[i * T + j]);
        }
      }
      out.dsink[bh] = dsink_err + eT * dsink_mag + u * std::fabs(dsink);
      // dQ_i (this head's), dK_j and dV_j (the kv head's, shared by the group: summed below).
      for (int i = 0; i < T; i++) {
        const int ni = b * T + i;
        for (int d = 0; d < D; d++) {
          double mag = 0, err = 0;
          for (int j = 0; j <= i; j++) {
            mag += std::fabs(dS[i * T + j] * k(b * T + j, g, d));
            err += ddS[i * T + j] * std::fabs(k(b * T + j, g, d));
          }
          const int at = ni * W + h * D + d;
          out.dqkv[at] = sum_error(T + 1, u) * (mag + std::fabs(pr.dqkv0[at])) + err;
        }
      }
      for (int j = 0; j < T; j++) {
        const int nj = b * T + j;
        for (int d = 0; d < D; d++) {
          double kmag = 0, kerr = 0, vmag = 0, verr = 0;
          for (int i = j; i < T; i++) {
            const int ni = b * T + i, at = ni * C + h * D + d;
            kmag += std::fabs(dS[i * T + j] * q(ni, h, d));
            kerr += ddS[i * T + j] * std::fabs(q(ni, h, d));
            vmag += p[i * T + j] * std::fabs(dy[at]);
            verr += p[i * T + j] * (thb[i * T + j] * std::fabs(dy[at]) + ddy[at]);
          }
          // (the starting value, the group's own-value gradients and the group's heads' products
          // add into one sum: group·(T + 1) + 1 terms)
          const double eg = sum_error(group * (T + 1) + 1, u);
          out.dqkv[nj * W + C + g * D + d] += eg * kmag + kerr;
          out.dqkv[nj * W + C + Hk * D + g * D + d] += eg * vmag + verr;
        }
      }
    }
  // The starting values of dk and dv, and the own-value gradients XSA adds to dv first, join the
  // sums above: their magnitudes count with the same sum_error, the own values' errors as well.
  for (int n = 0; n < N; n++)
    for (int c = C; c < W; c++)
      out.dqkv[n * W + c] += sum_error(group * (T + 1) + 1, u) *
                                 (std::fabs(pr.dqkv0[n * W + c]) + dv_own_mag[n * W + c]) +
                             dv_own_err[n * W + c];
  return out;
}

// With bf16 tile products (the bf16 backend's attention: p and ds rounded to bf16, u = 2^-8, the
// products accumulated in fp32), each entry of y and of dq/dk/dv is within u·Σ|terms| plus 2^-16
// of the largest entry, on bf16-exact inputs (the exact y and lse given to the backward). The
// Σ|terms| of each output, from the float64 lse: y_id = Σ_j p_ij v_jd, dv_jd = Σ_i p_ij dy_id,
// dq_id = Σ_j ds_ij k_jd/√D, dk_jd = Σ_i ds_ij q_id/√D.
inline void attention_term_magnitudes(const Vec& qkv, const Vec& dy, const Vec& lse, int B, int T,
                                      int C, int H, int Hkv, Vec& y_mag, Vec& d_mag) {
  const int D = C / H, Hk = Hkv ? Hkv : H, W = C + 2 * Hk * D;
  y_mag.assign((size_t)B * T * C, 0.0), d_mag.assign((size_t)B * T * W, 0.0);
  const double scale = 1 / std::sqrt((double)D);
  auto at = [&](int b, int t, int part, int h) {
    return ref::qkv_offset(b * T + t, part, h, C, H, Hkv);
  };
  Vec P(T), dS(T);
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++)
      for (int i = 0; i < T; i++) {
        const double* dyi = &dy[((size_t)b * T + i) * C + h * D];
        double Di = 0;
        for (int j = 0; j <= i; j++) {
          double sc = 0, dp = 0;
          for (int d = 0; d < D; d++) {
            sc += qkv[at(b, i, 0, h) + d] * qkv[at(b, j, 1, h) + d];
            dp += dyi[d] * qkv[at(b, j, 2, h) + d];
          }
          P[j] = std::exp(sc * scale - lse[((size_t)b * H + h) * T + i]);
          dS[j] = dp, Di += P[j] * dp;
        }
        for (int j = 0; j <= i; j++) {
          dS[j] = P[j] * (dS[j] - Di);
          for (int d = 0; d < D; d++) {
            y_mag[((size_t)b * T + i) * C + h * D + d] += P[j] * std::fabs(qkv[at(b, j, 2, h) + d]);
            d_mag[at(b, j, 2, h) + d] += P[j] * std::fabs(dyi[d]);
            d_mag[at(b, i, 0, h) + d] += std::fabs(dS[j] * qkv[at(b, j, 1, h) + d]) * scale;
            d_mag[at(b, j, 1, h) + d] += std::fabs(dS[j] * qkv[at(b, i, 0, h) + d]) * scale;
          }
        }
      }
}

// ---------------------------------------------------------------- whole models
// A model's loss, logits and gradients come out of a chain of kernels, each a sum of K terms (its
// reductions) plus a few elementwise roundings. Each kernel's error is relative to the magnitudes
// it sums, and enters what follows with a weight of order one: LayerNorm brings activations back
// to unit scale, the residual stream adds branches of smaller scale, the loss's softmax passes
// logit errors on with weights p that sum to one. Taken as independent (the model of Higham & Mary
// behind sum_error, applied across kernels as within one), they add in quadrature: a relative
// error of λ·u·√(Σ K + elementwise steps) over the chain, λ = 8.
struct ModelChain {
  double forward = 0;   // Σ K of the forward (to the loss and logits)
  double backward = 0;  // Σ K of the backward (to any parameter's gradient)
};
inline ModelChain model_chain(const ModelConfig& cfg, int B, int T) {
  const double C = cfg.n_embd, D = cfg.head_dim(), V = cfg.padded_vocab, N = (double)B * T;
  const double elementwise = 12;  // per block: LayerNorms, RoPE, exps, GELU, residual adds, ...
  ModelChain chain;
  // per block: q,k,v (C), scores (D), softmax (T + 1), p·v (T), the output projection (C), fc (C),
  // the MLP's projection (4C); then the head (C) and the cross-entropy (V)
  chain.forward = cfg.n_layer * (C + D + (T + 1) + T + C + C + 4 * C + elementwise) + C + V + 4;
  // per block, backward: each product's input gradient (3C, C, 4C, C) and weight gradient (N rows),
  // attention's dP and D_i (D each) and dq, dk, dv (T each); the head's input gradient (V) and its
  // weight gradient (N), the embedding's rows
  chain.backward =
      cfg.n_layer * (3 * C + C + 4 * C + C + 4 * N + 2 * D + 3 * T + elementwise) + V + N + N;
  return chain;
}
inline double chain_error(double reductions, double u) {
  return 8 * u * std::sqrt(reductions);
}

// AdamW's response to gradient errors, to first order, per weight: one step from the state m, v
// (the moments before it), with the gradient g off by at most e (per entry). m and v move by
// (1 − β1)e and (1 − β2)(2|g|e + e²); the update r = m̂/(√v̂ + ε) by
//   δm̂/(√v̂ + ε) + |m̂|·δv̂/(2√v̂(√v̂ + ε)²),
// and never by more than 2·R_t, R_t the largest |r| any gradients can give at step t
// (|m̂| ≤ √(Σ_s c1_s²/c2_s)·√v̂ by Cauchy-Schwarz, c1_s and c2_s the weights the bias-corrected
// moments give step s's gradient): a weight whose gradient is near zero has a direction its
// rounding decides, and is bounded by that alone. The weight moves by lr times δr.
inline double adam_update_sensitivity(double g, double m, double v, double e, double b1, double b2,
                                      double eps, long step) {
  const double bias1 = 1 - std::pow(b1, (double)step), bias2 = 1 - std::pow(b2, (double)step);
  const double m1 = b1 * m + (1 - b1) * g, v1 = b2 * v + (1 - b2) * g * g;
  const double dm = (1 - b1) * e / bias1, dv = (1 - b2) * (2 * std::fabs(g) * e + e * e) / bias2;
  const double mh = m1 / bias1, root = std::sqrt(v1 / bias2);
  double reach = 0;  // R_t²
  for (long s = 1; s <= step; s++) {
    const double c1 = (1 - b1) * std::pow(b1, (double)(step - s)) / bias1;
    const double c2 = (1 - b2) * std::pow(b2, (double)(step - s)) / bias2;
    reach += c1 * c1 / c2;
  }
  const double cap = 2 * std::sqrt(reach);
  if (!(root > 0)) return cap;
  const double first_order =
      dm / (root + eps) + std::fabs(mh) * dv / (2 * root * (root + eps) * (root + eps));
  return std::min(first_order, cap);
}

// ---------------------------------------------------------------- decisions
// The choice a comparison of scores picks (the first of equals, as the scorers pick), and whether
// rounding could make it another: decided when every other score trails the best by more than
// both their bounds.
struct Pick {
  size_t best = 0;
  bool decided = true;
};
inline Pick pick_of(const Vec& score, const Vec& bound) {
  Pick p;
  for (size_t c = 1; c < score.size(); c++)
    if (score[c] > score[p.best]) p.best = c;
  for (size_t c = 0; c < score.size(); c++)
    if (c != p.best && score[p.best] - score[c] <= bound[p.best] + bound[c]) p.decided = false;
  return p;
}

}  // namespace xsa::test

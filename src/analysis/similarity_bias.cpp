#include "xsa/analysis/similarity_bias.h"

#include <cmath>

#include "xsa/ops/xsa_row.h"
#include "xsa/util/error.h"

namespace xsa {

std::vector<HeadBias> attention_similarity_bias(Gpt<float>& model, const TokenStream& data,
                                                int n_batches) {
  const ModelConfig& cfg = model.config();
  const int B = model.batch_size(), T = model.seq_len(), C = cfg.n_embd, H = cfg.n_head,
            D = cfg.head_dim();
  const int L = cfg.n_layer;
  if (n_batches < 1)
    fail("the analysis needs at least one batch of data (T + 1 = {} tokens)", T + 1);
  std::vector<HeadBias> out(L * H);
  std::vector<double> n_tokens(L * H, 0), n_pairs(L * H, 0);
  std::vector<int32_t> inputs((size_t)B * T), targets((size_t)B * T);
  std::vector<double> prefix(D), vhat(D);
  const double scale = 1.0 / std::sqrt((double)D);
  auto norm = [&](const float* a) {
    double s = 0;
    for (int d = 0; d < D; d++) s += (double)a[d] * a[d];
    return std::sqrt(s);
  };
  auto cosine = [&](const float* a, const float* b) {
    double ab = 0;
    for (int d = 0; d < D; d++) ab += (double)a[d] * b[d];
    double na = norm(a), nb = norm(b);
    return na > 0 && nb > 0 ? ab / (na * nb) : 0.0;
  };
  for (int batch = 0; batch < n_batches; batch++) {
    val_batch(data, batch, n_batches, B, T, inputs.data(), targets.data());
    model.forward(inputs.data(), targets.data());
    const Activations<float>& a = model.activations();
    for (int l = 0; l < L; l++) {
      const BlockBuffers<float>& act = a.layers[l];
      for (int h = 0; h < H; h++) {
        HeadBias& r = out[l * H + h];
        for (int b = 0; b < B; b++) {
          if (targets[(size_t)b * T] < 0) continue;  // a padding row of the last batch
          std::fill(prefix.begin(), prefix.end(), 0.0);
          for (int t = 0; t < T; t++) {
            // GQA: query head h reads key/value head h / (H / Hkv)
            const float* row = act.qkv + ((size_t)b * T + t) * cfg.qkv_dim();
            const int g = h / (H / cfg.kv_heads()), Ck = cfg.kv_heads() * D;
            const float *q = row + h * D, *k = row + C + g * D, *v = row + C + Ck + g * D;
            const float* y = act.att_y + ((size_t)b * T + t) * C + h * D;
            const double nv = norm(v);
            for (int d = 0; d < D; d++) vhat[d] = nv > 0 ? v[d] / nv : 0.0;
            if (t > 0) {  // position 0 attends only to itself: every figure is trivial there
              r.cos_yv += cosine(y, v);
              const double ny = norm(y);
              double others = 0;  // Σ_{j<t} cos(y_t, v_j) = ŷ_t · Σ_{j<t} v̂_j
              for (int d = 0; d < D; d++) others += (double)y[d] * prefix[d];
              r.cos_y_vj += ny > 0 ? others / ny : 0.0;
              if (is_exclusive(cfg.attention[l].kind)) {
                // xsa-gated's exclusion strength α = tanh(w), else 1
                const float* exclusion_w = model.params().w.layers[l].xsa_gate;
                const double alpha = exclusion_w ? std::tanh((double)exclusion_w[h]) : 1.0;
                // z in double: the geometry of the exclusive step, not float rounding (which makes
                // |cos| large where z itself is at rounding level, i.e. y ∥ v).
                double yv = 0, vv = 0, zv = 0, zz = 0;
                for (int d = 0; d < D; d++) yv += (double)y[d] * v[d], vv += (double)v[d] * v[d];
                const double s_over_n =
                    alpha * yv / std::max(vv, ops::kXsaEpsilon * ops::kXsaEpsilon);
                for (int d = 0; d < D; d++) {
                  const double zd = y[d] - s_over_n * v[d];
                  zv += zd * v[d], zz += zd * zd;
                }
                r.cos_zv += zz > 0 && vv > 0 ? std::fabs(zv) / std::sqrt(zz * vv) : 0.0;
              }
              double qk = 0;
              for (int d = 0; d < D; d++) qk += (double)q[d] * k[d];
              if (!cfg.attention[l].no_self)  // no-self masks the own position: its weight is 0
                r.self_weight += std::exp(qk * scale - act.att_lse[((size_t)b * H + h) * T + t]);
              double pairs = 0;  // Σ_{j<t} cos(v_t, v_j) = v̂_t · Σ_{j<t} v̂_j
              for (int d = 0; d < D; d++) pairs += vhat[d] * prefix[d];
              r.cos_vv += pairs;
              n_tokens[l * H + h] += 1;
              n_pairs[l * H + h] += t;
            }
            for (int d = 0; d < D; d++) prefix[d] += vhat[d];
          }
        }
      }
    }
  }
  for (int l = 0; l < L; l++)
    for (int h = 0; h < H; h++) {
      HeadBias& r = out[l * H + h];
      const double n = std::max(1.0, n_tokens[l * H + h]);
      r.layer = l, r.head = h, r.exclusive = is_exclusive(cfg.attention[l].kind);
      r.cos_yv /= n, r.self_weight /= n;
      r.cos_zv = r.exclusive ? r.cos_zv / n : NAN;
      r.cos_vv /= std::max(1.0, n_pairs[l * H + h]);
      r.cos_y_vj /= std::max(1.0, n_pairs[l * H + h]);
    }
  return out;
}

double mean_cos_yv(const std::vector<HeadBias>& heads) {
  double sum = 0;
  for (const HeadBias& h : heads) sum += h.cos_yv;
  return heads.empty() ? NAN : sum / heads.size();
}

double mean_own_lean(const std::vector<HeadBias>& heads) {
  double sum = 0;
  for (const HeadBias& h : heads) sum += h.own_lean();
  return heads.empty() ? NAN : sum / heads.size();
}

}  // namespace xsa

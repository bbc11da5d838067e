// An independent reference for scoring: a model whose blocks add nothing (every block weight zero),
// so the logits after token a are LN_f(e_a) · Eᵀ and log p(b | a) is written out in double.
// Byte-level, context 64: a continuation's log-likelihood depends only on the context's last byte.
#pragma once

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "bounds.h"
#include "xsa/model/gpt.h"
#include "xsa/util/rng.h"

namespace xsa::test {

// With every block's weights zero, attention and MLP add nothing: the logits after token a are
// LN_f(e_a) · Eᵀ, so log p(b | a) can be written out directly in double.
struct BigramModel {
  ModelConfig cfg;
  std::unique_ptr<Gpt<float>> model;
  std::vector<std::vector<double>> logp;  // [a][b] = log p(b | a)
  // What float rounding may do to them, xsa's float path (tests/bounds.h): the blocks add exact
  // zeros, so the logits after a are LN_f(e_a) in float (3u|x̂w| + u|b| per feature) times the
  // embedding (a sum of C products). logit_error[a][b] bounds each logit; loss_error[a][b] the
  // cross-entropy of b after a (its logit's error, the log-sum-exp's, and the cross-entropy's own
  // roundings, crossentropy_bounds).
  std::vector<std::vector<double>> logit_error, loss_error;

  explicit BigramModel(const std::string& attn) {
    cfg.vocab_size = 256, cfg.padded_vocab = 256;
    cfg.n_layer = 2, cfg.n_head = 2, cfg.n_embd = 16, cfg.seq_len = 64;
    set_attention(cfg, attn);
    model = std::make_unique<Gpt<float>>(cfg, 1, cfg.seq_len, GptMode::inference);
    ParamArena<float>& arena = model->params();
    arena.init(cfg, 21);
    for (LayerWeights<float>& L : arena.w.layers)
      for (float* w : {L.qkv_w, L.attn_proj_w, L.fc_w, L.mlp_proj_w})
        std::fill(w,
                  w + (w == L.qkv_w ? cfg.qkv_dim() : cfg.n_embd) * (size_t)cfg.n_embd *
                          (w == L.fc_w || w == L.mlp_proj_w ? 4 : 1),
                  0.0f);
    Rng rng(2);
    const int C = cfg.n_embd, V = cfg.vocab_size;
    for (int i = 0; i < V * C; i++) arena.w.wte[i] *= 40;  // sharp, varied distributions
    for (int c = 0; c < C; c++)
      arena.w.lnf_w[c] = float(1 + 0.3 * rng.normal()),
      arena.w.lnf_b[c] = float(0.2 * rng.normal());
    // After 'e' comes ' ' (its embedding along e's final features), so contexts ending in 'e'
    // have greedy answers.
    const std::vector<double> after_e = final_features('e');
    for (int c = 0; c < C; c++) arena.w.wte[(size_t)' ' * C + c] = (float)after_e[c];
    logp.assign(V, std::vector<double>(V));
    for (int a = 0; a < V; a++) {
      const std::vector<double> x = final_features(a);
      std::vector<double> logits(V);
      double top = -1e300;
      for (int b = 0; b < V; b++) {
        for (int c = 0; c < C; c++) logits[b] += x[c] * arena.w.wte[(size_t)b * C + c];
        top = std::max(top, logits[b]);
      }
      double sum = 0;
      for (int b = 0; b < V; b++) sum += std::exp(logits[b] - top);
      for (int b = 0; b < V; b++) logp[a][b] = logits[b] - top - std::log(sum);
    }
    // The float path's bounds.
    const double u = kFloatRoundoff;
    logit_error.assign(V, std::vector<double>(V));
    loss_error.assign(V, std::vector<double>(V));
    for (int a = 0; a < V; a++) {
      const std::vector<double> x = final_features(a);
      const float* e = arena.w.wte + (size_t)a * C;
      double mean = 0, var = 0;
      for (int c = 0; c < C; c++) mean += e[c];
      mean /= C;
      for (int c = 0; c < C; c++) var += (e[c] - mean) * (e[c] - mean);
      const double rstd = 1 / std::sqrt(var / C + 1e-5);
      std::vector<double> dx(C);
      for (int c = 0; c < C; c++)
        dx[c] = 3 * u * std::fabs((e[c] - mean) * rstd * arena.w.lnf_w[c]) +
                u * std::fabs(arena.w.lnf_b[c]);
      double worst = 0, top = -1e300, l = 0;
      std::vector<double> logits(V, 0.0);
      for (int b = 0; b < V; b++) {
        double mag = 0, moved = 0;
        for (int c = 0; c < C; c++) {
          const double w = arena.w.wte[(size_t)b * C + c];
          logits[b] += x[c] * w, mag += std::fabs(x[c] * w), moved += std::fabs(w) * dx[c];
        }
        logit_error[a][b] = sum_error(C, u) * mag + moved;
        worst = std::max(worst, logit_error[a][b]);
        top = std::max(top, logits[b]);
      }
      double theta = 0;
      for (int b = 0; b < V; b++) {
        l += std::exp(logits[b] - top);
        theta = std::max(theta, u * std::fabs(logits[b] - top) + exp_error(u));
      }
      for (int b = 0; b < V; b++)
        loss_error[a][b] = logit_error[a][b] + worst + sum_error(V, u) + theta +
                           2 * u * std::fabs(std::log(l)) + u * std::fabs(logits[b] - top) +
                           u * std::fabs(logp[a][b]);
    }
  }

  // LN_f(e_a) in double.
  std::vector<double> final_features(int a) const {
    const int C = cfg.n_embd;
    const Weights<float>& w = model->params().w;
    const float* e = w.wte + (size_t)a * C;
    double mean = 0, var = 0;
    for (int c = 0; c < C; c++) mean += e[c];
    mean /= C;
    for (int c = 0; c < C; c++) var += (e[c] - mean) * (e[c] - mean);
    var /= C;
    std::vector<double> x(C);
    for (int c = 0; c < C; c++)
      x[c] = (e[c] - mean) / std::sqrt(var + 1e-5) * w.lnf_w[c] + w.lnf_b[c];
    return x;
  }

  // Σ log p over " " + choice after the context's last byte.
  double loglik(const std::string& context, const std::string& choice) const {
    std::string seq = context + " " + choice;
    double sum = 0;
    for (size_t i = context.size(); i < seq.size(); i++)
      sum += logp[(unsigned char)seq[i - 1]][(unsigned char)seq[i]];
    return sum;
  }
  // How far xsa's float scoring of it may be: its tokens' loss bounds, plus the rounding of their
  // sum in double.
  double loglik_bound(const std::string& context, const std::string& choice) const {
    std::string seq = context + " " + choice;
    double sum = 0;
    for (size_t i = context.size(); i < seq.size(); i++)
      sum += loss_error[(unsigned char)seq[i - 1]][(unsigned char)seq[i]];
    return sum + 1e-15 * std::fabs(loglik(context, choice));
  }
  // Whether float rounding cannot change greedy(): at every position the most likely byte leads
  // the next one by more than both their logits' bounds, or (for false) some position's wanted
  // byte trails the most likely one by more than that.
  bool greedy_decided(const std::string& context, const std::string& choice) const {
    std::string seq = context + " " + choice;
    bool decided = true;
    for (size_t i = context.size(); i < seq.size(); i++) {
      const int a = (unsigned char)seq[i - 1], want = (unsigned char)seq[i];
      const auto& row = logp[a];
      const int best = (int)(std::max_element(row.begin(), row.end()) - row.begin());
      double runner_up = -1e300;
      int second = best;
      for (int b = 0; b < (int)row.size(); b++)
        if (b != best && row[b] > runner_up) runner_up = row[b], second = b;
      const double gap = row[best] - (best == want ? runner_up : row[want]);
      const int other = best == want ? second : want;
      const bool clear = gap > logit_error[a][best] + logit_error[a][other];
      if (best != want && clear) return true;  // decidedly not greedy
      decided = decided && clear;
    }
    return decided;
  }
  bool greedy(const std::string& context, const std::string& choice) const {
    std::string seq = context + " " + choice;
    for (size_t i = context.size(); i < seq.size(); i++) {
      const auto& row = logp[(unsigned char)seq[i - 1]];
      if (std::max_element(row.begin(), row.end()) - row.begin() != (unsigned char)seq[i])
        return false;
    }
    return true;
  }
};

}  // namespace xsa::test

#include "xsa/infer/sampler.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "xsa/util/error.h"

namespace xsa {

void SamplerConfig::validate() const {
  if (!(temperature >= 0) || !std::isfinite(temperature))
    fail("--temperature {} must be 0 (greedy) or positive", temperature);
  if (top_k < 0) fail("--top-k {} must be 0 (off) or positive", top_k);
  if (!(top_p > 0 && top_p <= 1)) fail("--top-p {} must be in (0, 1]", top_p);
}

Sampler::Sampler(const SamplerConfig& cfg) : cfg_(cfg), rng_(cfg.seed) {
  cfg_.validate();
}

std::vector<std::pair<int32_t, double>> Sampler::distribution(const float* logits, int V) const {
  // Most likely first, ties by id: a total order, so the result never depends on the sort.
  auto before = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  std::vector<int32_t> ids(V);
  for (int i = 0; i < V; i++) ids[i] = i;
  if (cfg_.temperature == 0) {
    return {{*std::min_element(ids.begin(), ids.end(), before), 1.0}};
  }
  int keep = cfg_.top_k > 0 ? std::min(cfg_.top_k, V) : V;
  const double top = *std::max_element(logits, logits + V);
  // Divided, not multiplied by 1/T: a tiny T then gives exp(0) = 1 for the top, never 0 · inf.
  auto weight = [&](int32_t id) { return std::exp((logits[id] - top) / cfg_.temperature); };
  // Sort only as far as needed: top-k's k, or for top-p a prefix that grows until it holds p of
  // the mass (a trained model's nucleus is usually a few dozen tokens out of 50 257).
  double total = 0;
  for (int i = 0; i < V; i++) total += weight(i);
  if (cfg_.top_k > 0) {
    std::partial_sort(ids.begin(), ids.begin() + keep, ids.end(), before);
    total = 0;
    for (int i = 0; i < keep; i++) total += weight(ids[i]);
  }
  int sorted = cfg_.top_k > 0 ? keep : 0;
  if (cfg_.top_p < 1) {
    double mass = 0;
    for (int i = 0; i < keep; i++) {
      if (i >= sorted) {  // sort a prefix twice as long (at least 64) and go on
        sorted = std::min(keep, std::max(64, 2 * sorted));
        std::partial_sort(ids.begin() + i, ids.begin() + sorted, ids.begin() + keep, before);
      }
      mass += weight(ids[i]) / total;
      if (mass >= cfg_.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  // Nothing cut by top-p: no order is needed to draw, and sorting 50 257 ids per token would cost
  // more than the head's matrix product; the ids not sorted by top-k stay in id order.

  std::vector<std::pair<int32_t, double>> out(keep);
  double kept = 0;
  for (int i = 0; i < keep; i++) kept += weight(ids[i]);
  for (int i = 0; i < keep; i++) out[i] = {ids[i], weight(ids[i]) / kept};
  return out;
}

int32_t Sampler::sample(const float* logits, int V) {
  const auto dist = distribution(logits, V);
  if (dist.size() == 1) return dist[0].first;
  const double u = rng_.uniform();
  double cumulative = 0;
  for (const auto& [id, p] : dist) {
    cumulative += p;
    if (u < cumulative) return id;
  }
  return dist.back().first;  // u above the rounded total
}

GenerateResult generate(Decoder<float>& decoder, const std::vector<int32_t>& prompt,
                        int max_new_tokens, Sampler& sampler, int32_t stop_token,
                        const std::function<void(int32_t)>& on_token) {
  using clock = std::chrono::steady_clock;
  const ModelConfig& cfg = decoder.config();
  const int context = std::min(cfg.seq_len, decoder.capacity());
  if (prompt.empty()) fail("the prompt is empty: it encodes to no tokens");
  if ((int)prompt.size() > context)
    fail("the prompt is {} tokens; the model's context is {}: shorten it", prompt.size(), context);
  GenerateResult result;
  std::vector<int32_t> history = prompt;
  decoder.truncate(0);
  auto t0 = clock::now();
  const float* logits = decoder.append(prompt.data(), (int)prompt.size());
  auto t1 = clock::now();
  result.prompt_seconds = std::chrono::duration<double>(t1 - t0).count();
  for (int i = 0; i < max_new_tokens; i++) {
    const int32_t token = sampler.sample(logits, cfg.vocab_size);
    result.tokens.push_back(token);
    history.push_back(token);
    on_token(token);
    if (token == stop_token) {
      result.stopped_at_end_of_text = true;
      break;
    }
    if (i + 1 == max_new_tokens) break;
    if (decoder.length() == context) {  // full: keep the last half, recomputed from position 0
      const int keep = std::max(1, context / 2);
      decoder.truncate(0);
      logits = decoder.append(history.data() + history.size() - keep, keep);
      result.context_shifts++;
    } else {
      logits = decoder.append(&token, 1);
    }
  }
  result.decode_seconds = std::chrono::duration<double>(clock::now() - t1).count();
  return result;
}

}  // namespace xsa

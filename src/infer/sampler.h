// Turning logits into text: temperature, top-k and top-p (nucleus) sampling from a seeded
// generator, and the generation loop over the key/value cache, with a context shift when the
// sequence reaches the model's context.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "xsa/model/decoder.h"
#include "xsa/util/rng.h"

namespace xsa {

struct SamplerConfig {
  double temperature = 1.0;  // 0: greedy (the most likely token)
  int top_k = 0;             // keep the k most likely tokens; 0: all
  double top_p = 1.0;        // keep the fewest most likely tokens whose probability reaches p
  uint64_t seed = 1;
  void validate() const;  // throws Error naming the bad value
};

class Sampler {
 public:
  explicit Sampler(const SamplerConfig& cfg);
  // Draws a token from logits [0, V); the same seed and logits give the same tokens.
  int32_t sample(const float* logits, int V);
  // The distribution sample() draws from: (token, probability) pairs after temperature, top-k and
  // top-p, renormalized; most likely first (ties by id) when top-k or top-p is on, in id order
  // otherwise. Greedy: the argmax (the lowest id among equals) with probability 1.
  std::vector<std::pair<int32_t, double>> distribution(const float* logits, int V) const;

 private:
  SamplerConfig cfg_;
  Rng rng_;
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // the new tokens
  double prompt_seconds = 0;    // the prompt's forward pass
  double decode_seconds = 0;    // every token after it
  int context_shifts = 0;       // times the sequence was cut back to fit the context
  bool stopped_at_end_of_text = false;
};

// Appends the prompt (at most the model's context) to an empty decoder, then samples up to
// max_new_tokens tokens, calling on_token(id) for each as it is drawn. Stops after end_of_text
// when stop_token ≥ 0. When the sequence fills the model's context, its last half is kept and
// recomputed from position 0 (a context shift), so generation may run past the context.
GenerateResult generate(Decoder<float>& decoder, const std::vector<int32_t>& prompt,
                        int max_new_tokens, Sampler& sampler, int32_t stop_token,
                        const std::function<void(int32_t)>& on_token);

}  // namespace xsa

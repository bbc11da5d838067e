#include "eval/evaluate.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "util/error.h"

namespace xsa {
namespace {

// log p(target) and whether target is the argmax (the lowest id among equals), in double over the
// real vocabulary.
std::pair<double, bool> token_logprob(const float* logits, int V, int32_t target) {
  int best = 0;
  for (int i = 1; i < V; i++)
    if (logits[i] > logits[best]) best = i;
  const double top = logits[best];
  double sum = 0;
  for (int i = 0; i < V; i++) sum += std::exp((double)logits[i] - top);
  return {(double)logits[target] - top - std::log(sum), best == target};
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::vector<ContinuationScore> score_continuations(Decoder<float>& decoder,
                                                   const std::vector<int32_t>& context,
                                                   const std::vector<std::vector<int32_t>>& conts) {
  const ModelConfig& cfg = decoder.config();
  const int V = cfg.vocab_size, Vp = cfg.padded_vocab;
  if (context.empty()) fail("the context is empty: no token to predict the first one from");
  size_t longest = 0;
  for (const auto& c : conts) {
    if (c.empty()) fail("a choice encodes to no tokens");
    longest = std::max(longest, c.size());
  }
  if ((int)longest >= cfg.seq_len)
    fail("a choice of {} tokens leaves no room for context in the model's {}", longest,
         cfg.seq_len);
  const size_t keep = std::min(context.size(), (size_t)cfg.seq_len - longest);
  decoder.truncate(0);
  const float* last = decoder.append(context.data() + context.size() - keep, (int)keep);
  std::vector<float> first_logits(last, last + Vp);  // predicts every choice's first token

  std::vector<ContinuationScore> scores(conts.size());
  for (size_t c = 0; c < conts.size(); c++) {
    auto [lp, greedy] = token_logprob(first_logits.data(), V, conts[c][0]);
    scores[c] = {lp, (int)conts[c].size(), greedy};
  }
  // Each choice but its last token runs after the context (the last token's prediction is not
  // needed); as many choices per pass as the cache holds.
  std::vector<float> logits;
  for (size_t begin = 0; begin < conts.size();) {
    std::vector<std::vector<int32_t>> group;
    size_t rows = 0, end = begin;
    for (; end < conts.size(); end++) {
      const size_t n = conts[end].size() - 1;
      if (end > begin && keep + rows + n > (size_t)decoder.capacity()) break;
      group.emplace_back(conts[end].begin(), conts[end].end() - 1);
      rows += n;
    }
    logits.resize(std::max<size_t>(1, rows) * Vp);
    decoder.branch(group, logits.data());
    size_t row = 0;
    for (size_t c = begin; c < end; c++) {
      for (size_t i = 1; i < conts[c].size(); i++, row++) {
        auto [lp, greedy] = token_logprob(logits.data() + row * Vp, V, conts[c][i]);
        scores[c].loglik += lp;
        scores[c].greedy = scores[c].greedy && greedy;
      }
    }
    begin = end;
  }
  return scores;
}

TaskResult evaluate_task(Decoder<float>& decoder, const Tokenizer& tokenizer, const TaskFile& file,
                         const EvalProgress& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  TaskResult r;
  r.task = to_string(file.kind);
  const bool lambada = file.kind == TaskKind::lambada;
  int right = 0, right_norm = 0, right_mean = 0;
  double loglik_sum = 0;
  const int total = (int)file.examples.size();
  for (const TaskExample& ex : file.examples) {
    std::vector<int32_t> context = tokenizer.encode(ex.context);
    if (context.empty() && tokenizer.end_of_text() >= 0) context = {tokenizer.end_of_text()};
    std::vector<std::vector<int32_t>> conts;
    for (const std::string& choice : ex.choices) conts.push_back(tokenizer.encode(" " + choice));
    std::vector<ContinuationScore> s;
    try {
      s = score_continuations(decoder, context, conts);
    } catch (const Error& e) {
      fail("{}:{}: {}", file.path, ex.line, e.what());
    }
    // The first best by each rule (ties go to the earlier choice).
    size_t best = 0, best_norm = 0, best_mean = 0;
    auto norm = [&](size_t c) { return s[c].loglik / std::max(1, utf8_length(ex.choices[c])); };
    auto mean = [&](size_t c) { return s[c].loglik / s[c].tokens; };
    for (size_t c = 1; c < s.size(); c++) {
      if (s[c].loglik > s[best].loglik) best = c;
      if (norm(c) > norm(best_norm)) best_norm = c;
      if (mean(c) > mean(best_mean)) best_mean = c;
    }
    if (lambada) {
      right += s[0].greedy;
      loglik_sum += s[0].loglik;
    } else {
      right += (int)best == ex.label;
      right_norm += (int)best_norm == ex.label;
      right_mean += (int)best_mean == ex.label;
    }
    r.n++;
    r.acc = (double)right / r.n;
    if (!lambada)
      r.acc_norm = (double)right_norm / r.n, r.acc_mean_token = (double)right_mean / r.n;
    if (lambada) r.ppl = std::exp(-loglik_sum / r.n);
    r.acc_stderr = r.n > 1 ? std::sqrt(r.acc * (1 - r.acc) / (r.n - 1)) : 0;
    r.seconds = seconds_since(t0);
    if (progress) progress(r.n, total, r);
  }
  return r;
}

ValResult evaluate_val(Gpt<float>& model, const TokenStream& stream, int n_batches,
                       const Tokenizer& tokenizer) {
  const auto t0 = std::chrono::steady_clock::now();
  const int B = model.batch_size(), T = model.seq_len(), V = model.config().vocab_size;
  // Bytes of each token's text, once.
  std::vector<int> token_bytes(V);
  for (int32_t id = 0; id < V; id++)
    token_bytes[id] = id == tokenizer.end_of_text() ? 0 : (int)tokenizer.decode(&id, 1).size();
  std::vector<int32_t> inputs((size_t)B * T), targets((size_t)B * T);
  ValResult r;
  double loss_sum = 0;
  for (int i = 0; i < n_batches; i++) {
    val_batch(stream, i, B, T, inputs.data(), targets.data());
    model.forward(inputs.data(), targets.data());
    const float* losses = model.activations().losses;
    for (size_t n = 0; n < inputs.size(); n++) {
      if (targets[n] < 0) continue;
      loss_sum += losses[n];
      r.tokens++;
      r.bytes += token_bytes[targets[n]];
    }
    r.batches++;
  }
  if (r.tokens == 0) fail("the validation data holds no complete window of {} tokens", T + 1);
  r.loss = loss_sum / r.tokens;
  r.ppl = std::exp(r.loss);
  r.bpb = r.bytes ? loss_sum / std::log(2.0) / r.bytes : NAN;
  r.seconds = seconds_since(t0);
  return r;
}

}  // namespace xsa

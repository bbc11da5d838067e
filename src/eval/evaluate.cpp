#include "xsa/eval/evaluate.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "xsa/util/error.h"

namespace xsa {
namespace {

// Whether target is the most likely token (the lowest id among equals) of a row of logits.
bool is_greedy(const float* logits, int V, int32_t target) {
  float top = logits[0];
#pragma omp simd reduction(max : top)  // a comparison, not std::max, which GCC keeps scalar
  for (int i = 0; i < V; i++) top = logits[i] > top ? logits[i] : top;
  if (logits[target] != top) return false;
  for (int i = 0; i < target; i++)
    if (logits[i] == top) return false;
  return true;
}

// One scored prediction: a row of final features and the token it should predict.
struct ScoredRow {
  int feature_row;
  int32_t target;
  int item, continuation;
};

// Keeps the newest tokens of the context that leave room for the longest continuation. The
// model's inputs are the kept context and a continuation but its last token, at most seq_len: as
// lm-evaluation-harness, which keeps the last seq_len + 1 tokens of context + continuation.
size_t context_kept(const ModelConfig& cfg, const ScoringItem& item) {
  if (item.context.empty()) fail("the context is empty: no token to predict the first one from");
  size_t longest = 0;
  for (const auto& c : item.continuations) {
    if (c.empty()) fail("a choice encodes to no tokens");
    longest = std::max(longest, c.size());
  }
  if ((int)longest > cfg.seq_len)
    fail("a choice of {} tokens does not fit the model's context of {}", longest, cfg.seq_len);
  return std::min(item.context.size(), (size_t)cfg.seq_len + 1 - longest);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

LossSum sum_loss(Gpt<float>& model, const TokenStream& stream, int n_batches, int first, int stride,
                 const std::function<void(const int32_t* targets)>& on_batch, bool by_position) {
  const int B = model.batch_size(), T = model.seq_len();
  std::vector<int32_t> inputs((size_t)B * T), targets((size_t)B * T);
  std::vector<float> losses(by_position ? (size_t)B * T : 0);
  LossSum sum;
  if (by_position) sum.position_total.assign(T, 0.0), sum.position_tokens.assign(T, 0.0);
  for (int i = first; i < n_batches; i += stride) {
    val_batch(stream, i, n_batches, B, T, inputs.data(), targets.data());
    double loss = model.forward(inputs.data(), targets.data());
    if (on_batch) on_batch(targets.data());
    sum.total += loss * model.target_count();
    sum.tokens += model.target_count();
    if (!by_position) continue;
    model.backend().to_host(losses.data(), model.activations().losses, losses.size());
    for (size_t n = 0; n < losses.size(); n++)
      if (targets[n] >= 0) sum.position_total[n % T] += losses[n], sum.position_tokens[n % T] += 1;
  }
  return sum;
}

std::vector<double> bucket_losses(const LossSum& sum, int T) {
  std::vector<double> out;
  for (const PositionBucket& b : position_buckets(T)) {
    double total = 0, tokens = 0;
    for (int p = b.first; p <= b.last && p <= (int)sum.position_total.size(); p++)
      total += sum.position_total[p - 1], tokens += sum.position_tokens[p - 1];
    out.push_back(tokens > 0 ? total / tokens : NAN);
  }
  return out;
}

double evaluate_loss(Gpt<float>& model, const TokenStream& stream, int n_batches,
                     const std::function<void(const int32_t* targets)>& on_batch) {
  const LossSum sum = sum_loss(model, stream, n_batches, 0, 1, on_batch);
  return sum.tokens ? sum.total / sum.tokens : NAN;
}

int scoring_rows(const ModelConfig& cfg, const ScoringItem& item) {
  size_t rows = context_kept(cfg, item);
  for (const auto& c : item.continuations) rows += c.size() - 1;  // the last token predicts nothing
  return (int)rows;
}

std::vector<std::vector<ContinuationScore>> score_items(Decoder<float>& decoder,
                                                        const std::vector<ScoringItem>& items) {
  const ModelConfig& cfg = decoder.config();
  const int C = cfg.n_embd, V = cfg.vocab_size, Vp = cfg.padded_vocab;
  // Segments: each context, then its continuations but their last tokens.
  std::vector<Decoder<float>::Segment> segments;
  std::vector<ScoredRow> rows;
  std::vector<std::vector<ContinuationScore>> scores(items.size());
  int feature_rows = 0;
  for (size_t i = 0; i < items.size(); i++) {
    const ScoringItem& item = items[i];
    const size_t keep = context_kept(cfg, item);
    const int context_segment = (int)segments.size();
    segments.push_back({{item.context.end() - keep, item.context.end()}, -1});
    const int last_context_row = feature_rows + (int)keep - 1;
    feature_rows += (int)keep;
    for (size_t c = 0; c < item.continuations.size(); c++) {
      const std::vector<int32_t>& cont = item.continuations[c];
      const size_t from = item.scored_from.empty() ? 0 : item.scored_from[c];
      XSA_CHECK(from < cont.size(), "scoring from token {} of {}", from, cont.size());
      scores[i].push_back({0, (int)(cont.size() - from), true});
      segments.push_back({{cont.begin(), cont.end() - 1}, context_segment});
      // Token 0 is predicted by the context's last row, token t by the continuation's row t − 1.
      if (from == 0) rows.push_back({last_context_row, cont[0], (int)i, (int)c});
      for (size_t t = std::max<size_t>(from, 1); t < cont.size(); t++)
        rows.push_back({feature_rows + (int)t - 1, cont[t], (int)i, (int)c});
      feature_rows += (int)cont.size() - 1;
    }
  }
  decoder.truncate(0);
  std::vector<float> features((size_t)feature_rows * C);
  decoder.branch(segments, features.data());

  // The head over the scored rows only, in chunks that bound the logits buffer.
  const int chunk = std::max(1, std::min((int)rows.size(), (1 << 24) / Vp));
  std::vector<float> gathered((size_t)chunk * C), logits((size_t)chunk * Vp), losses(chunk);
  std::vector<int32_t> targets(chunk);
  for (size_t r0 = 0; r0 < rows.size(); r0 += chunk) {
    const int n = (int)std::min<size_t>(chunk, rows.size() - r0);
    for (int r = 0; r < n; r++) {
      const ScoredRow& row = rows[r0 + r];
      std::copy_n(features.data() + (size_t)row.feature_row * C, C,
                  gathered.data() + (size_t)r * C);
      targets[r] = row.target;
    }
    decoder.head(gathered.data(), n, logits.data());
    for (int r = 0; r < n; r++) {
      const ScoredRow& row = rows[r0 + r];
      ContinuationScore& s = scores[row.item][row.continuation];
      s.greedy = s.greedy && is_greedy(logits.data() + (size_t)r * Vp, V, row.target);
    }
    // The logits are in host memory: the host's backend turns them into losses.
    cpu_backend<float>().crossentropy_forward_backward(logits.data(), losses.data(), targets.data(),
                                                       n, V, Vp, 0.0f);
    for (int r = 0; r < n; r++) {
      const ScoredRow& row = rows[r0 + r];
      scores[row.item][row.continuation].loglik -= losses[r];
    }
  }
  return scores;
}

std::vector<ContinuationScore> score_continuations(Decoder<float>& decoder,
                                                   const std::vector<int32_t>& context,
                                                   const std::vector<std::vector<int32_t>>& conts) {
  return score_items(decoder, {{context, conts, {}}})[0];
}

std::vector<ScoringItem> tokenize_task(const ModelConfig& cfg, const Tokenizer& tokenizer,
                                       TaskFile& file, bool skip_bad_lines) {
  std::vector<ScoringItem> items;
  std::vector<TaskExample> kept;
  // lm-evaluation-harness moves a context's trailing whitespace to the front of the continuation.
  auto split = [](std::string context) {
    const size_t end = context.find_last_not_of(" \t\n\r\f\v") + 1;  // 0 when all whitespace
    std::string moved = context.substr(end);
    context.resize(end);
    return std::pair{context, moved};
  };
  for (TaskExample& ex : file.examples) {
    ScoringItem item;
    if (ex.choice_contexts.empty()) {
      const auto [context, moved] = split(ex.context);
      item.context = tokenizer.encode(context);
      if (item.context.empty() && tokenizer.end_of_text() >= 0)
        item.context = {tokenizer.end_of_text()};
      for (const std::string& choice : ex.choices)
        item.continuations.push_back(tokenizer.encode(moved + " " + choice));
    } else {  // one context per choice: their common tokens become the shared context
      std::vector<std::vector<int32_t>> contexts, targets;
      for (const std::string& c : ex.choice_contexts) {
        const auto [context, moved] = split(c);
        contexts.push_back(tokenizer.encode(context));
        targets.push_back(tokenizer.encode(moved + " " + ex.target));
      }
      size_t common = contexts[0].size();
      for (const auto& c : contexts) {
        common = std::min(common, c.size());
        for (size_t t = 0; t < common; t++)
          if (c[t] != contexts[0][t]) common = t;
      }
      item.context.assign(contexts[0].begin(), contexts[0].begin() + common);
      if (item.context.empty() && tokenizer.end_of_text() >= 0)
        item.context = {tokenizer.end_of_text()};
      for (size_t c = 0; c < contexts.size(); c++) {
        std::vector<int32_t> cont(contexts[c].begin() + common, contexts[c].end());
        item.scored_from.push_back((int)cont.size());
        cont.insert(cont.end(), targets[c].begin(), targets[c].end());
        item.continuations.push_back(std::move(cont));
      }
    }
    try {
      scoring_rows(cfg, item);  // throws when the example cannot be scored
      for (size_t c = 0; c < item.scored_from.size(); c++)
        if (item.scored_from[c] >= (int)item.continuations[c].size())
          fail("choice {}'s continuation encodes to no tokens", c + 1);
    } catch (const Error& e) {
      const std::string where = fmt::format("{}:{}: {}", file.path, ex.line, e.what());
      if (!skip_bad_lines) fail("{} (--skip-bad-lines leaves such lines out)", where);
      if (file.skipped++ == 0) file.first_skipped = where;
      continue;
    }
    items.push_back(std::move(item));
    kept.push_back(std::move(ex));
  }
  file.examples = std::move(kept);
  if (file.examples.empty())
    fail("{}: no {} example can be scored ({} left out)", file.path, to_string(file.kind),
         file.skipped);
  return items;
}

TaskResult evaluate_task(const ModelConfig& cfg, const Weights<float>& weights,
                         const Tokenizer& tokenizer, const TaskFile& file,
                         const EvalProgress& progress, int rows_per_pass) {
  TaskFile copy = file;
  const std::vector<ScoringItem> items = tokenize_task(cfg, tokenizer, copy, false);
  return evaluate_task(cfg, weights, copy, items, progress, rows_per_pass);
}

TaskResult evaluate_task(const ModelConfig& cfg, const Weights<float>& weights,
                         const TaskFile& file, const std::vector<ScoringItem>& items,
                         const EvalProgress& progress, int rows_per_pass, Backend<float>& backend) {
  const auto t0 = std::chrono::steady_clock::now();
  XSA_CHECK(items.size() == file.examples.size(), "{} items for {} examples", items.size(),
            file.examples.size());
  std::vector<int> item_rows;
  int most_rows = 1;
  for (const ScoringItem& item : items) {
    item_rows.push_back(scoring_rows(cfg, item));
    most_rows = std::max(most_rows, item_rows.back());
  }
  const int budget = std::max(rows_per_pass, most_rows);
  Decoder<float> decoder(cfg, weights, budget, std::min(budget, 1024), backend);

  TaskResult r;
  r.task = to_string(file.kind);
  const bool lambada = file.kind == TaskKind::lambada;
  const bool with_norm = !lambada && reports_acc_norm(file.kind);
  int right = 0, right_norm = 0, right_mean = 0;
  double loglik_sum = 0;
  const int total = (int)file.examples.size();
  for (int begin = 0; begin < total;) {
    int end = begin, rows = 0;  // as many examples as one pass holds
    while (end < total && (end == begin || rows + item_rows[end] <= budget))
      rows += item_rows[end++];
    const std::vector<ScoringItem> group(items.begin() + begin, items.begin() + end);
    const auto scores = score_items(decoder, group);
    for (int e = begin; e < end; e++) {
      const TaskExample& ex = file.examples[e];
      const std::vector<ContinuationScore>& s = scores[e - begin];
      // The first best by each rule (ties go to the earlier choice).
      size_t best = 0, best_norm = 0, best_mean = 0;
      auto norm = [&](size_t c) { return s[c].loglik / std::max(1, utf8_length(ex.choices[c])); };
      auto mean = [&](size_t c) { return s[c].loglik / s[c].tokens; };
      for (size_t c = 1; c < s.size(); c++) {
        if (s[c].loglik > s[best].loglik) best = c;
        if (norm(c) > norm(best_norm)) best_norm = c;
        if (mean(c) > mean(best_mean)) best_mean = c;
      }
      r.correct.push_back(lambada ? s[0].greedy : (int)best == ex.label);
      if (with_norm) r.correct_norm.push_back((int)best_norm == ex.label);
      if (lambada) {
        right += s[0].greedy;
        loglik_sum += s[0].loglik;
      } else {
        right += (int)best == ex.label;
        right_norm += (int)best_norm == ex.label;
        right_mean += (int)best_mean == ex.label;
      }
    }
    r.n = end;
    r.acc = (double)right / r.n;
    if (with_norm)
      r.acc_norm = (double)right_norm / r.n, r.acc_mean_token = (double)right_mean / r.n;
    if (lambada) r.ppl = std::exp(-loglik_sum / r.n);
    r.acc_stderr = r.n > 1 ? std::sqrt(r.acc * (1 - r.acc) / (r.n - 1)) : 0;
    r.seconds = seconds_since(t0);
    if (progress) progress(r.n, total, r);
    begin = end;
  }
  return r;
}

ValResult evaluate_val(Gpt<float>& model, const TokenStream& stream, int n_batches,
                       const Tokenizer& tokenizer) {
  const auto t0 = std::chrono::steady_clock::now();
  const int B = model.batch_size(), T = model.seq_len(), V = model.config().vocab_size;
  const std::vector<int> token_bytes = token_byte_counts(tokenizer, V);
  ValResult r;
  r.loss = evaluate_loss(model, stream, n_batches, [&](const int32_t* targets) {
    for (size_t n = 0; n < (size_t)B * T; n++)
      if (targets[n] >= 0) r.tokens++, r.bytes += token_bytes[targets[n]];
    r.batches++;
  });
  if (r.tokens == 0) fail("the validation data holds no complete window of {} tokens", T + 1);
  r.ppl = std::exp(r.loss);
  r.bpb = r.bytes ? bits_per_byte(r.loss, (double)r.bytes / (double)r.tokens) : NAN;
  r.seconds = seconds_since(t0);
  return r;
}

std::vector<int> token_byte_counts(const Tokenizer& tokenizer, int vocab_size) {
  std::vector<int> bytes(vocab_size);
  for (int32_t id = 0; id < vocab_size; id++)
    bytes[id] = id == tokenizer.end_of_text() ? 0 : (int)tokenizer.decode(&id, 1).size();
  return bytes;
}

double validation_bytes_per_token(const TokenStream& stream, int n_batches, int B, int T,
                                  const Tokenizer& tokenizer, int vocab_size) {
  const std::vector<int> token_bytes = token_byte_counts(tokenizer, vocab_size);
  std::vector<int32_t> inputs((size_t)B * T), targets(inputs.size());
  int64_t tokens = 0, bytes = 0;
  for (int b = 0; b < n_batches; b++) {
    val_batch(stream, b, n_batches, B, T, inputs.data(), targets.data());
    for (int32_t t : targets)
      if (t >= 0) tokens++, bytes += token_bytes[t];
  }
  return tokens && bytes ? (double)bytes / tokens : NAN;
}

}  // namespace xsa

// Scoring a model: validation loss, perplexity and bits per byte on token data; multiple-choice
// tasks by the log-likelihood of each choice (acc, acc_norm, and llm.c's lowest mean token loss);
// LAMBADA's last word (greedy accuracy and perplexity). Choices share their context: it runs once
// into the key/value cache and the choices run side by side after it (Decoder::branch).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "xsa/data/dataset.h"
#include "xsa/eval/tasks.h"
#include "xsa/model/decoder.h"
#include "xsa/model/gpt.h"
#include "xsa/tokenizer/tokenizer.h"

namespace xsa {

struct ContinuationScore {
  double loglik = 0;    // Σ log p(token | everything before it), natural log
  int tokens = 0;       // tokens of the continuation
  bool greedy = false;  // every token was the most likely one (the lowest id among equals)
};

// Scores each continuation after `context` (token ids). A context that would not leave room for
// the longest continuation within the model's context loses its oldest tokens; an empty context
// or a continuation that cannot fit is an Error.
std::vector<ContinuationScore> score_continuations(Decoder<float>& decoder,
                                                   const std::vector<int32_t>& context,
                                                   const std::vector<std::vector<int32_t>>& conts);

// Several questions at once, all in one forward pass (the decoder's cache must hold the context
// and continuation tokens of all of them): each context runs once, its continuations side by side
// after it, and the tied head only over the rows whose predictions are scored.
struct ScoringItem {
  std::vector<int32_t> context;
  std::vector<std::vector<int32_t>> continuations;
  // Per continuation, how many of its first tokens are context, not scored (WinoGrande: each
  // option and the rest of its sentence continue the shared words before the blank; only the rest
  // is scored). Empty: every token is scored.
  std::vector<int> scored_from;
};
std::vector<std::vector<ContinuationScore>> score_items(Decoder<float>& decoder,
                                                        const std::vector<ScoringItem>& items);
// Cache slots score_items needs for an item (its context as kept, and its continuations).
int scoring_rows(const ModelConfig& cfg, const ScoringItem& item);

struct TaskResult {
  std::string task;
  int n = 0;
  // Multiple choice: fractions of examples right by each rule. LAMBADA: acc only.
  double acc = 0, acc_norm = -1, acc_mean_token = -1;
  double acc_stderr = 0;  // sqrt(acc (1 − acc) / (n − 1)), as lm-evaluation-harness reports
  double ppl = -1;        // LAMBADA: exp(−mean log-likelihood of the answer)
  double seconds = 0;
  std::vector<uint8_t> correct;       // per example, in file order: right by acc's rule
  std::vector<uint8_t> correct_norm;  // and by acc_norm's (empty when the task has no acc_norm)
};

// Calls progress(done, total, result so far) after each forward pass (a group of examples).
using EvalProgress = std::function<void(int, int, const TaskResult&)>;

// Tokenizes a task's examples: the context as is (its trailing whitespace moved to the front of
// each continuation, as lm-evaluation-harness does), each choice as " " + choice (its delimiter);
// an empty context starts from the end-of-text token (GPT-2). WinoGrande: each choice's context
// and " " + the target, the contexts' common tokens shared as the item's context (a blank at the
// start of the sentence shares the end-of-text token; a byte-level model cannot score it). An
// example that cannot be scored (a choice longer than the model's context, an empty context without
// an end-of-text token) is an Error naming the file and line, or with skip_bad_lines is removed
// from `file` and counted.
std::vector<ScoringItem> tokenize_task(const ModelConfig& cfg, const Tokenizer& tokenizer,
                                       TaskFile& file, bool skip_bad_lines);
// Scores the examples in groups of about rows_per_pass tokens, one forward pass per group;
// items[i] belongs to file.examples[i]. `backend` runs the passes; the weights live in its memory
// (allocated through it, so that a backend keeping derived copies sees them change).
TaskResult evaluate_task(const ModelConfig& cfg, const Weights<float>& weights,
                         const TaskFile& file, const std::vector<ScoringItem>& items,
                         const EvalProgress& progress = nullptr, int rows_per_pass = 1024,
                         Backend<float>& backend = cpu_backend<float>());
// Both steps, stopping at the first example that cannot be scored.
TaskResult evaluate_task(const ModelConfig& cfg, const Weights<float>& weights,
                         const Tokenizer& tokenizer, const TaskFile& file,
                         const EvalProgress& progress = nullptr, int rows_per_pass = 1024);

// Mean loss over a pass of n_batches windows of `stream` (see val_batch), the figure training
// reports as its validation loss. After each batch's forward, on_batch (when given) sees its
// targets [B·T] (−1: not scored).
double evaluate_loss(Gpt<float>& model, const TokenStream& stream, int n_batches,
                     const std::function<void(const int32_t* targets)>& on_batch = nullptr);
// Its parts over the batches first, first + stride, … below n_batches (one process's share of a
// data-parallel validation): Σ token losses and the tokens scored; with by_position, the same per
// position in the window (index t: the prediction that sees t + 1 tokens).
struct LossSum {
  double total = 0;
  int64_t tokens = 0;
  std::vector<double> position_total;   // [T] with by_position, else empty
  std::vector<double> position_tokens;  // [T]
};
LossSum sum_loss(Gpt<float>& model, const TokenStream& stream, int n_batches, int first = 0,
                 int stride = 1,
                 const std::function<void(const int32_t* targets)>& on_batch = nullptr,
                 bool by_position = false);
// The mean loss of each bucket of positions (position_buckets(T)) from a sum by position; NaN for
// a bucket with no token scored.
std::vector<double> bucket_losses(const LossSum& sum, int T);

struct ValResult {
  double loss = 0, ppl = 0, bpb = 0;  // mean token loss (nats), exp(loss), bits per UTF-8 byte
  int64_t tokens = 0, bytes = 0;
  int batches = 0;
  double seconds = 0;
};

// Over a pass of n_batches validation batches (val_batch), the same windows training reports.
// Bytes are those of each scored token's text; the end-of-text token is scored but has no bytes.
ValResult evaluate_val(Gpt<float>& model, const TokenStream& stream, int n_batches,
                       const Tokenizer& tokenizer);

// The bytes of each token's text (0 for end-of-text), for ids below vocab_size.
std::vector<int> token_byte_counts(const Tokenizer& tokenizer, int vocab_size);
// Bytes of text per scored token over the same windows (B rows of T): a mean validation loss in
// nats over them is loss / ln 2 / this bits per byte, whatever the vocabulary.
double validation_bytes_per_token(const TokenStream& stream, int n_batches, int B, int T,
                                  const Tokenizer& tokenizer, int vocab_size);

}  // namespace xsa

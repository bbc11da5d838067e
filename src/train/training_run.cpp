#include "xsa/train/training_run.h"

#include <chrono>
#include <cmath>
#include <optional>

#include "xsa/dist/agree.h"
#include "xsa/eval/evaluate.h"
#include "xsa/io/checkpoint.h"
#include "xsa/tokenizer/tokenizer.h"
#include "xsa/train/schedule.h"
#include "xsa/util/error.h"
#include "xsa/util/fmt.h"
#include "xsa/util/memory.h"
#include "xsa/util/signals.h"
#include "xsa/util/threads.h"

namespace xsa {

namespace {

double val_bytes_per_token(const RunInputs& in, const std::string& gpt2_vocab_dir) {
  const bool spm = in.data.tokenizer == TokenizerKind::spm;
  std::unique_ptr<Tokenizer> tokenizer;
  try {
    tokenizer = make_tokenizer(in.data.tokenizer, spm ? in.data.vocab_dir : gpt2_vocab_dir);
  } catch (const Error&) {
    // llm.c's GPT-2 shards train without GPT-2's vocabulary files; only bits per byte need them.
    // A folder named with --vocab-dir must hold them.
    if (spm || !gpt2_vocab_dir.empty()) throw;
    return NAN;
  }
  return validation_bytes_per_token(in.data.val, in.val_batches, in.shape.batch, in.model.seq_len,
                                    *tokenizer, in.model.vocab_size);
}

}  // namespace

RunInputs prepare_run(const ModelConfig& requested, const RunConfig& run, const Comm& comm) {
  requested.validate();
  run.validate();
  RunInputs in;
  const int T = requested.seq_len;
  in.shape = step_shape(run, T, comm.size());
  in.threads = set_thread_count(run.threads, comm.local_size());
  std::optional<TokenizerKind> tokenizer;
  std::string spm_dir;  // --tokenizer spm:FOLDER: a text file's vocabulary, or the shards' again
  if (!run.tokenizer.empty()) {
    const TokenizerChoice choice = parse_run_tokenizer(run.tokenizer);
    tokenizer = choice.kind;
    spm_dir = choice.spm_dir;
  }
  in.data =
      open_dataset(run.data, tokenizer, run.val_fraction, in.shape.rows_per_process() * comm.size(),
                   T, spm_dir.empty() ? run.vocab_dir : spm_dir);
  if (!spm_dir.empty()) check_same_vocabulary(in.data, spm_dir);
  if (!run.init_from.empty() && in.data.tokenizer != requested.tokenizer)
    fail("--init-from {} was trained with the {} tokenizer, but the data is {}", run.init_from,
         to_string(requested.tokenizer), to_string(in.data.tokenizer));
  if (!run.init_from.empty()) check_same_vocabulary(in.data, resolve_checkpoint(run.init_from));
  in.model = requested;
  in.model.tokenizer = in.data.tokenizer;  // the vocabulary is the data's
  in.model.vocab_size = in.data.vocab_size;
  in.model.padded_vocab = pad_vocab(in.model.vocab_size);
  // --val-batches counts batches of the step's size, however the step is split.
  if (run.val_batches > 0)
    in.val_batches = val_batch_count(in.data.val, in.shape.batch, T,
                                     run.val_batches * in.shape.accumulation * in.shape.world);
  if (in.val_batches > 0) in.val_bytes_per_token = val_bytes_per_token(in, run.vocab_dir);
  return in;
}

void check_fits_in_memory(const ModelConfig& model, int B, int T, int copies, double data_bytes) {
  const double need = (double)copies * Gpt<float>::memory_bytes(model, B, T) + data_bytes;
  const double available = available_memory_bytes();
  if (available > 0 && need > 0.9 * available)
    fail(
        "{} of this model need about {:.1f} GB at --batch {} and --seq-len {}, but {:.1f} GB are "
        "available; use a smaller model or batch{}",
        copies > 1 ? fmt::format("{} arms", copies) : std::string("training"), need / 1e9, B, T,
        available / 1e9, copies > 1 ? ", or fewer variants" : "");
}

double shared_loss(Comm& comm, Gpt<float>& model, const TokenStream& stream, int n) {
  if (n == 0) return NAN;
  const LossSum part = sum_loss(model, stream, n, comm.rank(), comm.size());
  double sums[2] = {part.total, (double)part.tokens};
  comm.all_reduce(sums, 2);
  return sums[1] > 0 ? sums[0] / sums[1] : NAN;
}

LossByPosition shared_loss_by_position(Comm& comm, Gpt<float>& model, const TokenStream& stream,
                                       int n) {
  LossByPosition r;
  const int T = model.seq_len();
  if (n == 0) {
    r.buckets.assign(position_buckets(T).size(), NAN);
    return r;
  }
  LossSum part = sum_loss(model, stream, n, comm.rank(), comm.size(), nullptr, true);
  // One sum over the processes: the totals, then every position's loss and count.
  std::vector<double> sums = {part.total, (double)part.tokens};
  sums.insert(sums.end(), part.position_total.begin(), part.position_total.end());
  sums.insert(sums.end(), part.position_tokens.begin(), part.position_tokens.end());
  comm.all_reduce(sums.data(), sums.size());
  r.loss = sums[1] > 0 ? sums[0] / sums[1] : NAN;
  std::copy(sums.begin() + 2, sums.begin() + 2 + T, part.position_total.begin());
  std::copy(sums.begin() + 2 + T, sums.end(), part.position_tokens.begin());
  r.buckets = bucket_losses(part, T);
  return r;
}

TrainingRun::TrainingRun(const RunConfig& run, const StepShape& shape, Comm& comm,
                         const TokenStream& val, int val_batches)
    : run_(run),
      shape_(shape),
      comm_(comm),
      val_(val),
      val_batches_(val_batches),
      inputs_((size_t)shape.rows_per_process() * shape.T),
      targets_(inputs_.size()) {}

void TrainingRun::validate(int64_t step) {
  std::vector<double> losses;
  for (TrainingArm& arm : arms_)
    losses.push_back(arm.stopped && *arm.stopped
                         ? NAN
                         : shared_loss(comm_, arm.step->model(), val_, val_batches_));
  for (RunObserver* o : observers_) o->validated(step, losses);
}

void TrainingRun::run(const LoopSettings& settings) {
  using clock = std::chrono::steady_clock;
  const LrSchedule schedule{run_.lr, run_.min_lr_fraction, run_.warmup_steps(), run_.steps};
  if (settings.validate_first && settings.first_step == 0) validate(0);
  for (int64_t step = settings.first_step; step < run_.steps; step++) {
    const double lr = schedule.at(step);
    const int64_t done = step + 1;
    for (size_t i = 0; i < arms_.size(); i++) {
      const size_t k = settings.rotate ? (i + step) % arms_.size() : i;
      TrainingArm& arm = arms_[k];
      if (arm.stopped && *arm.stopped) continue;
      const double arm_lr = lr * arm.lr_scale;
      const auto t0 = clock::now();
      arm.loader->next(inputs_.data(), targets_.data());
      for (RunObserver* o : observers_) o->batch_read(k, inputs_);
      const StepResult r = arm.step->run(inputs_.data(), targets_.data(), arm_lr, done,
                                         shape_.accumulation, shape_.tokens());
      const double ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
      for (RunObserver* o : observers_) o->arm_stepped({k, done, arm_lr, ms, &r});
    }
    for (RunObserver* o : observers_) o->stepped(done, lr);
    const bool validate_now =
        (run_.val_every > 0 && done % run_.val_every == 0) || done == run_.steps;
    if (validate_now) validate(done);
    for (RunObserver* o : observers_) o->step_finished(done, validate_now);
    // Every rank stops at the same step; one signalled at the last step simply finishes.
    if (const int signal = done < run_.steps ? agreed_stop_signal(comm_) : 0) {
      std::string message;
      for (RunObserver* o : observers_)
        if (std::string m = o->stopping(done); !m.empty()) message = std::move(m);
      throw Interrupted(signal, message);
    }
  }
}

}  // namespace xsa

// One training run, written once for every command that trains: the setup they share (the checks,
// the step's shape over the processes, threads, data and vocabulary) and the loop that steps one
// model (xsa train) or several side by side (xsa compare's arms): the schedule, each arm's batches,
// validation, and the stop signals every rank agrees on. What a command does around the loop
// (metrics.jsonl and checkpoints, progress lines, the comparison's fingerprints and timings) it
// does as an observer of the loop's events.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "xsa/data/dataset.h"
#include "xsa/dist/comm.h"
#include "xsa/model/gpt.h"
#include "xsa/model/model_config.h"
#include "xsa/options/run_config.h"
#include "xsa/train/step.h"
#include "xsa/train/trainer.h"

namespace xsa {

// What a run needs before its first step. Each rank prepares its own (its data).
struct RunInputs {
  StepShape shape;  // the step over the job's processes
  int threads = 0;
  Dataset data;
  ModelConfig model;    // the requested shape with the data's tokenizer and vocabulary
  int val_batches = 0;  // batches of --batch rows: --val-batches batches of the step's size
  // Bytes of text per validation token (validation_bytes_per_token): loss / ln 2 / this is bits
  // per byte. NaN without validation, or when GPT-2's vocabulary files are not at hand.
  double val_bytes_per_token = NAN;
};

// Checks the model and run settings, shapes the step over comm's processes, sets the thread
// count, opens the data (its tokenizer must be --init-from's, whose model `requested` is) and gives
// the model the data's vocabulary. Throws Error naming the bad value; writes nothing.
RunInputs prepare_run(const ModelConfig& requested, const RunConfig& run, const Comm& comm);

// Refuses (one line) a run whose `copies` models of `model` at B × T, with `data_bytes` of data
// beside them, would need more than 90 % of the memory available: before anything is allocated.
void check_fits_in_memory(const ModelConfig& model, int B, int T, int copies, double data_bytes);

// The mean loss over n batches of `stream`, dealt round-robin over comm's processes and summed;
// NaN when n is 0.
double shared_loss(Comm& comm, Gpt<float>& model, const TokenStream& stream, int n);
// The same, and the mean loss of each bucket of positions in the window (position_buckets).
struct LossByPosition {
  double loss = NAN;
  std::vector<double> buckets;
};
LossByPosition shared_loss_by_position(Comm& comm, Gpt<float>& model, const TokenStream& stream,
                                       int n);

// One model in training: its optimizer step and its batches; its peak learning rate as a multiple
// of the run's (compare's arms at their own tuned rates), and a flag that, once set, stops it
// (a tuning arm that diverged: the others go on; its validation loss is then NaN).
struct TrainingArm {
  TrainStep* step = nullptr;
  BatchLoader* loader = nullptr;
  double lr_scale = 1;
  const bool* stopped = nullptr;
};

// One arm's step, as its observers see it.
struct ArmStep {
  size_t arm = 0;
  int64_t done = 0;  // the step just taken, 1-based
  double lr = 0;
  double ms = 0;  // the step's time, reading its batch included
  const StepResult* result = nullptr;
};

// What the loop tells the command that drives it. Every rank gets every event.
class RunObserver {
 public:
  virtual ~RunObserver() = default;
  // This process's rows of the batch arm `arm` is about to step on (inside the step's timing).
  virtual void batch_read(size_t arm, std::span<const int32_t> inputs) {}
  virtual void arm_stepped(const ArmStep& step) {}
  // Every arm took step `done`; validation comes next when due.
  virtual void stepped(int64_t done, double lr) {}
  // Each arm's validation loss at `step` (NaN without validation batches).
  virtual void validated(int64_t step, const std::vector<double>& losses) {}
  // Step `done` is complete, validation included (`validated`: whether there was one).
  virtual void step_finished(int64_t done, bool validated) {}
  // Every rank got a stop signal after step `done`, before the last: keep what must survive.
  // The loop then stops with Interrupted and the last non-empty message returned.
  virtual std::string stopping(int64_t done) { return {}; }
};

struct LoopSettings {
  int64_t first_step = 0;  // steps already taken (a resumed run)
  // Validation at first_step (a fresh run's step 0); then every val_every steps and at the end.
  bool validate_first = true;
  // Rotate which arm steps first at each step, so that no arm always runs on a warm machine.
  bool rotate = false;
};

class TrainingRun {
 public:
  // val: the validation stream, of which val_batches batches are read at each validation.
  TrainingRun(const RunConfig& run, const StepShape& shape, Comm& comm, const TokenStream& val,
              int val_batches);
  void add_arm(TrainingArm arm) { arms_.push_back(arm); }
  void add_observer(RunObserver* observer) { observers_.push_back(observer); }
  // Steps every arm from settings.first_step to --steps. Throws Interrupted at an agreed stop
  // signal; an observer's Error propagates.
  void run(const LoopSettings& settings);

 private:
  void validate(int64_t step);

  const RunConfig& run_;
  StepShape shape_;
  Comm& comm_;
  const TokenStream& val_;
  int val_batches_;
  std::vector<TrainingArm> arms_;
  std::vector<RunObserver*> observers_;
  std::vector<int32_t> inputs_, targets_;
};

}  // namespace xsa

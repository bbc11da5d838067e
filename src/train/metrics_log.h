// A run folder's live record, read by xsa info and xsa board while the run trains: metrics.jsonl
// (one JSON record per line: each step's and each validation's) and run.json (what the run is
// and how many steps it will take). xsa train writes both into its run folder, xsa compare into
// each arm's folder (REPORT/arms/VARIANT-seedN).
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "xsa/train/training_run.h"

namespace xsa {

// Appends records to metrics.jsonl. Each line goes out in one write(2) on an O_APPEND file, so a
// kill at any moment leaves whole lines, and a reader sees a line whole or not at all; a write
// that fails (disk full, file-size limit) is undone and reported with the path.
class MetricsLog {
 public:
  explicit MetricsLog(const std::filesystem::path& path);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;
  void write(const nlohmann::json& record);

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

// NaN and infinity as JSON null (JSON has no such numbers).
nlohmann::json json_number(double v);

// A step's record: step, loss, lr, grad_norm, ms, tokens_per_s, rss_mb (and `skipped` with why,
// for an update --skip-bad-steps left out).
nlohmann::json step_record(const ArmStep& step, int64_t tokens_per_step);
// A validation pass's record: {"split": "val", "step", "loss", "bpb"}: bits per byte from the
// validation set's bytes per token (bpb left out when that is NaN).
nlohmann::json val_record(int64_t step, double loss, double bytes_per_token);

// Writes run.json into the run folder (atomically): `description` with "steps" (the run's
// target), "started" (seconds since the epoch) and the data's vocabulary added: "tokenizer",
// "vocab_size" and, for a SentencePiece vocabulary, its "vocabulary_checksum".
void write_run_description(const std::filesystem::path& run_dir, nlohmann::json description,
                           int64_t steps, const Dataset& data);

}  // namespace xsa

#include "xsa/train/metrics_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>

#include "xsa/tokenizer/spm_tokenizer.h"
#include "xsa/tokenizer/tokenizer.h"
#include "xsa/util/error.h"
#include "xsa/util/files.h"
#include "xsa/util/memory.h"

namespace xsa {

MetricsLog::MetricsLog(const std::filesystem::path& path) : path_(path) {
  fd_ = open_owned(path, O_WRONLY | O_APPEND | O_CREAT);
  if (fd_ < 0) fail("{}: cannot open for appending: {}", path.string(), std::strerror(errno));
}

MetricsLog::~MetricsLog() {
  ::close(fd_);
}

void MetricsLog::write(const nlohmann::json& record) {
  const std::string line = record.dump() + "\n";
  const off_t before = ::lseek(fd_, 0, SEEK_END);
  const ssize_t n = ::write(fd_, line.data(), line.size());
  if (n == (ssize_t)line.size()) return;
  const int err = n < 0 ? errno : ENOSPC;
  if (before >= 0) (void)!::ftruncate(fd_, before);  // best effort: a torn line is skipped
  fail("{}: write failed: {}", path_.string(), std::strerror(err));
}

nlohmann::json json_number(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nullptr;
}

nlohmann::json step_record(const ArmStep& s, int64_t tokens_per_step) {
  const StepResult& r = *s.result;
  nlohmann::json record = {
      {"step", s.done},    {"loss", json_number(r.loss)},
      {"lr", s.lr},        {"grad_norm", json_number(r.grad_norm)},
      {"ms", s.ms},        {"tokens_per_s", (double)tokens_per_step / (s.ms / 1000.0)},
      {"rss_mb", rss_mb()}};
  if (!r.skipped.empty()) record["skipped"] = r.skipped;
  return record;
}

nlohmann::json val_record(int64_t step, double loss, double bytes_per_token) {
  nlohmann::json record = {{"split", "val"}, {"step", step}, {"loss", json_number(loss)}};
  if (std::isfinite(bytes_per_token))
    record["bpb"] = json_number(bits_per_byte(loss, bytes_per_token));
  return record;
}

void write_run_description(const std::filesystem::path& run_dir, nlohmann::json description,
                           int64_t steps, const Dataset& data) {
  description["steps"] = steps;
  description["started"] = (int64_t)std::time(nullptr);
  description["tokenizer"] = to_string(data.tokenizer);
  description["vocab_size"] = data.vocab_size;
  if (data.tokenizer == TokenizerKind::spm)
    description["vocabulary_checksum"] = SpmTokenizer(data.vocab_dir).checksum();
  write_file_atomic(run_dir / "run.json", description.dump(2) + "\n");
}

}  // namespace xsa

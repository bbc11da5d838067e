#include "xsa/data/tokenizer_training.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>
#include <unordered_map>

#include "xsa/tokenizer/spm_tokenizer.h"
#include "xsa/util/error.h"
#include "xsa/util/files.h"
#include "xsa/util/fmt.h"
#ifdef XSA_WITH_SENTENCEPIECE
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#endif

namespace xsa {

namespace fs = std::filesystem;

namespace {

void check_config(const SpmTrainConfig& cfg) {
  if (cfg.inputs.empty()) fail("--input: no input files or folders");
  if (cfg.out.empty()) fail("--out: where the vocabulary goes is missing");
  if (cfg.model != "bpe" && cfg.model != "unigram")
    fail("--model {}: expected bpe or unigram", cfg.model);
  // SentencePiece's specials (unk, bos, eos) and its 256 byte pieces come first.
  if (cfg.vocab < 512 || cfg.vocab > kMaxSpmVocab)
    fail(
        "--vocab {}: expected 512 to {} (xsa's shards hold ids as uint16; 259 of the ids are "
        "SentencePiece's specials and byte pieces)",
        cfg.vocab, kMaxSpmVocab);
  refuse_symlink(folder_path(cfg.out));  // said before the training, not after it
  check_output_folder(cfg.out, cfg.force, "tokenizer.json");
}

// The documents as SentencePiece's training sentences: their lines, without empty ones (a
// sentence is trained on whole, and one longer than max_sentence_length is left out).
struct Corpus {
  std::vector<std::string> lines;
  size_t documents = 0, bytes = 0;
  std::string checksum;
};

Corpus read_corpus(const SpmTrainConfig& cfg) {
  Corpus c;
  uint64_t h = 1469598103934665603ull;
  for (const PrepareInput& file : list_input_files(cfg.inputs)) {
    DocumentReader reader(file, "text", BadInput::stop);
    for (std::string d; reader.next(d);) {
      c.documents++, c.bytes += d.size();
      for (unsigned char ch : d) h = (h ^ ch) * 1099511628211ull;
      h = (h ^ 0xffu) * 1099511628211ull;  // a document boundary counts
      for (size_t start = 0; start < d.size();) {
        size_t end = d.find('\n', start);
        if (end == std::string::npos) end = d.size();
        if (end > start) c.lines.emplace_back(d, start, end - start);
        start = end + 1;
      }
    }
  }
  if (c.lines.empty()) fail("{}: no text in the inputs", cfg.inputs[0].path);
  c.checksum = fmt::format("{:016x}", h);
  return c;
}

#ifdef XSA_WITH_SENTENCEPIECE
class LinesIterator : public sentencepiece::SentenceIterator {
 public:
  explicit LinesIterator(const std::vector<std::string>& lines) : lines_(lines) {}
  bool done() const override { return at_ >= lines_.size(); }
  void Next() override { at_++; }
  const std::string& value() const override { return lines_[at_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::vector<std::string>& lines_;
  size_t at_ = 0;
};
#endif

// The options of SentencePiece's trainer (spm_train's flags): no normalization and no dummy
// prefix or whitespace folding, so that decode(encode(x)) == x; byte fallback for what the pieces
// do not cover; digits split one by one (as LLaMA's vocabulary); ids unk 0, bos 1, eos 2.
std::unordered_map<std::string, std::string> trainer_options(const SpmTrainConfig& cfg,
                                                             int threads) {
  return {{"model_type", cfg.model},
          {"vocab_size", std::to_string(cfg.vocab)},
          {"byte_fallback", "true"},
          {"character_coverage", "0.9995"},
          {"normalization_rule_name", "identity"},
          {"add_dummy_prefix", "false"},
          {"remove_extra_whitespaces", "false"},
          {"split_digits", "true"},
          {"allow_whitespace_only_pieces", "true"},
          {"max_sentence_length", "16384"},
          {"input_sentence_size", "0"},
          {"unk_id", "0"},
          {"bos_id", "1"},
          {"eos_id", "2"},
          {"pad_id", "-1"},
          {"num_threads", std::to_string(threads)},
          {"minloglevel", "2"}};  // its errors come back as the status
}

}  // namespace

SpmTrainResult train_spm_tokenizer(const SpmTrainConfig& cfg) {
  std::string why;
  if (!sentencepiece_available(&why)) fail("xsa tokenizer train: {}", why);
  check_config(cfg);
  const auto t0 = std::chrono::steady_clock::now();
  const int threads =
      cfg.threads > 0 ? cfg.threads : (int)std::max(1u, std::thread::hardware_concurrency());
  if (!cfg.quiet) std::printf("tokenizer train: reading the inputs\n"), std::fflush(stdout);
  const Corpus corpus = read_corpus(cfg);
  if (!cfg.quiet) {
    std::printf(
        "tokenizer train: %zu documents, %zu lines, %.1f MB; training a %d-piece %s "
        "vocabulary with SentencePiece (%d threads)\n",
        corpus.documents, corpus.lines.size(), corpus.bytes / 1e6, cfg.vocab, cfg.model.c_str(),
        threads);
    std::fflush(stdout);
  }
  SpmTrainResult result;
#ifdef XSA_WITH_SENTENCEPIECE
  const auto options = trainer_options(cfg, threads);
  LinesIterator lines(corpus.lines);
  std::string model;
  const auto status = sentencepiece::SentencePieceTrainer::Train(options, &lines, &model);
  if (!status.ok()) fail("xsa tokenizer train: SentencePiece refused: {}", status.ToString());
  sentencepiece::SentencePieceProcessor trained;
  if (!trained.LoadFromSerializedProto(model).ok())
    fail("xsa tokenizer train: SentencePiece's model does not load back");
  result.model_checksum = spm_vocabulary_checksum(trained);
  nlohmann::json inputs = nlohmann::json::array();
  for (const PrepareInput& in : cfg.inputs)
    inputs.push_back({{"path", in.path}, {"format", in.format}});
  nlohmann::json trainer =
      nlohmann::json(std::map<std::string, std::string>(options.begin(), options.end()));
  trainer.erase("num_threads"), trainer.erase("minloglevel");
  const nlohmann::json description = {{"kind", "spm"},
                                      {"model_type", cfg.model},
                                      {"vocab_size", cfg.vocab},
                                      {"byte_fallback", true},
                                      {"special_ids", {{"unk", 0}, {"bos", 1}, {"eos", 2}}},
                                      {"end_of_text", 2},
                                      {"vocabulary_checksum", result.model_checksum},
                                      {"corpus",
                                       {{"inputs", inputs},
                                        {"documents", corpus.documents},
                                        {"bytes", corpus.bytes},
                                        {"checksum", corpus.checksum}}},
                                      {"trainer", trainer}};
  // Complete or not at all: a temporary folder renamed into place.
  const fs::path out = folder_path(cfg.out);
  std::error_code ec;
  if (out.has_parent_path()) fs::create_directories(out.parent_path(), ec);
  FolderOutput output(out, cfg.force, "tokenizer.json");
  write_file_atomic(output.tmp() / "tokenizer.model", model);
  write_file_atomic(output.tmp() / "tokenizer.json", description.dump(2) + "\n");
  output.commit();
#endif
  result.documents = corpus.documents, result.lines = corpus.lines.size();
  result.bytes = corpus.bytes, result.vocab = cfg.vocab;
  result.corpus_checksum = corpus.checksum;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!cfg.quiet)
    std::printf(
        "tokenizer train: %s (tokenizer.model, tokenizer.json) in %.1f s; use it as "
        "--tokenizer spm:%s\n",
        cfg.out.c_str(), result.seconds, cfg.out.c_str());
  return result;
}

}  // namespace xsa

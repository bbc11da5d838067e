// xsa tokenizer train: a SentencePiece vocabulary of one's own (data/tokenizer_training.h).
#include <cstdio>

#include "xsa/data/tokenizer_training.h"
#include "xsa/tools/commands.h"
#include "xsa/util/error.h"

namespace xsa::cli {

void add_tokenizer_command(CLI::App& root) {
  auto* group = root.add_subcommand(
      "tokenizer", "Vocabularies: train one of your own (SentencePiece), encode text, decode ids");
  group->require_subcommand(1);
  auto* cmd = group->add_subcommand(
      "train", "Train a SentencePiece vocabulary (BPE or unigram) on the inputs xsa prepare reads");
  struct Args {
    SpmTrainConfig cfg;
    std::vector<std::string> inputs;
    std::string format = "auto";
    bool default_corpus = false;
  };
  auto a = std::make_shared<Args>();
  auto* input = cmd->add_option(
      "--input", a->inputs,
      "Files or folders: text, .jsonl (a text field), .json (strings), as xsa prepare");
  cmd->add_flag("--default", a->default_corpus,
                "The default corpus of xsa prepare --default (scripts/get_data.sh)")
      ->excludes(input);
  cmd->add_option("--format", a->format, "auto, text, jsonl, json or brown, for every input")
      ->capture_default_str();
  cmd->add_option("--vocab", a->cfg.vocab, "Vocabulary size (512 to 65536)")->capture_default_str();
  cmd->add_option("--model", a->cfg.model, "bpe or unigram")->capture_default_str();
  cmd->add_option("--out", a->cfg.out, "The vocabulary's folder (tokenizer.model, tokenizer.json)")
      ->required();
  cmd->add_option("--threads", a->cfg.threads, "Training threads (0: every core)")
      ->capture_default_str();
  cmd->add_flag("--force", a->cfg.force, "Replace an existing folder");
  cmd->add_flag("--quiet", a->cfg.quiet, "No progress output");
  cmd->callback([a, cmd] {
    if (a->default_corpus && cmd->count("--format"))
      fail("--default takes no --format: it reads the installed default corpus");
    if (a->default_corpus)
      a->cfg.inputs = default_corpus_config(TokenizerKind::byte).inputs;
    else if (a->inputs.empty())
      fail("--input: no input files or folders (or --default)");
    for (const std::string& in : a->inputs) a->cfg.inputs.push_back({in, a->format});
    train_spm_tokenizer(a->cfg);
  });
}

}  // namespace xsa::cli

// xsa prepare: text → token shards (see data/prepare.h).
#include "xsa/data/prepare.h"
#include "xsa/tools/commands.h"
#include "xsa/util/error.h"
#include "xsa/util/memory.h"
#include "xsa/util/signals.h"

namespace xsa::cli {

void add_prepare_command(CLI::App& root) {
  auto* cmd = root.add_subcommand("prepare",
                                  "Tokenize text files, folders or JSON lines into token shards");
  struct Args {
    PrepareConfig cfg;
    std::vector<std::string> inputs;
    std::string format = "auto", tokenizer = "gpt2", on_bad = "stop";
    bool use_default = false;
  };
  auto a = std::make_shared<Args>();
  PrepareConfig& c = a->cfg;
  cmd->add_option("--input", a->inputs,
                  "Files, folders (recursively) or quoted globs; .jsonl: a \"text\" field per "
                  "line; .json: an array of strings; .gz and .zst read as they are")
      ->expected(1, -1);
  cmd->add_option("--format", a->format,
                  "auto (by extension), text (a file over 1 MiB: documents split at blank "
                  "lines), jsonl, json or brown (POS-tagged Brown corpus)")
      ->capture_default_str();
  cmd->add_option("--text-field", c.text_field, "The JSON field holding a document's text")
      ->capture_default_str();
  cmd->add_option("--on-bad-input", a->on_bad,
                  "A line that is not JSON, invalid UTF-8, a truncated archive: stop (one line "
                  "naming file and line) or skip (counted in the summary and meta.json)")
      ->capture_default_str();
  cmd->add_option_function<double>(
         "--max-record-mb",
         [&c](double mb) {
           if (!(mb > 0) || mb > 4096)
             fail("--max-record-mb {} must be above 0 and at most 4096", mb);
           c.max_record_bytes = (size_t)(mb * (1 << 20));
         },
         "The longest record read, in MiB: a JSON line, a JSON array's item, a Brown file; a "
         "longer one is bad input (stop or skip), never held whole")
      ->default_str(std::to_string(kMaxRecordBytes >> 20));
  cmd->add_option("--batch-bytes", c.batch_bytes,
                  "Bytes of text read and tokenized at once (memory is about 7 times this); a "
                  "killed prepare continues from its last batch")
      ->capture_default_str()
      ->check(within(1 << 16, 1ull << 34));
  cmd->add_option("--save-every", c.save_every_seconds,
                  "Seconds between saves of where prepare stands (after a batch; each syncs the "
                  "shards to disk); a killed prepare continues from the last save")
      ->capture_default_str();
  cmd->add_option("--tokenizer", a->tokenizer,
                  "gpt2, byte or spm:FOLDER (a vocabulary of xsa tokenizer train)")
      ->capture_default_str();
  cmd->add_option("--vocab-dir", c.vocab_dir,
                  "Folder with GPT-2's encoder.json and vocab.bpe (default: data/gpt2)");
  cmd->add_option("--out", c.out, "Output folder for train_*.bin, val_*.bin and meta.json");
  cmd->add_option("--val-fraction", c.val_fraction, "Share of documents held out for validation")
      ->capture_default_str();
  cmd->add_option("--seed", c.seed, "Seed that draws the validation documents")
      ->capture_default_str();
  cmd->add_option("--shard-tokens", c.shard_tokens, "Tokens per shard file")
      ->capture_default_str()
      ->check(within(1, 1ull << 31));
  cmd->add_option("--long-min-tokens", c.long_min_tokens,
                  "Hold out a long-document evaluation set in OUT/long: documents of at least "
                  "this many tokens (0: none; --default: 3 windows of 4096 bytes or 1024 tokens)")
      ->check(within(0, 1e12));
  cmd->add_option("--long-fraction", c.long_fraction,
                  "Share of those long documents held out (drawn by --seed; in neither split)")
      ->capture_default_str();
  cmd->add_option("--threads", c.threads, "Threads (0: every core)")
      ->capture_default_str()
      ->check(within(0, 4096));
  cmd->add_flag("--force", c.force, "Replace an existing output folder");
  cmd->add_flag("--quiet", c.quiet, "No progress output");
  cmd->add_flag("--default", a->use_default,
                "Prepare the default corpus (nlp-corpus, the Brown corpus and the State of the "
                "Union addresses, installed by scripts/get_data.sh) into data/default (gpt2), "
                "data/default-byte or data/default-<the spm:FOLDER's name>, with its long/ set");
  cmd->callback([a, cmd] {
    catch_stop_signals();  // Ctrl-C: stop after the batch at work; the same command continues
    PrepareConfig cfg = a->cfg;
    cfg.on_bad = parse_bad_input(a->on_bad);
    const TokenizerChoice choice = parse_tokenizer_choice(a->tokenizer);
    cfg.tokenizer = choice.kind;
    if (choice.kind == TokenizerKind::spm) cfg.vocab_dir = choice.spm_dir;
    if (a->use_default) {
      if (!a->inputs.empty())
        fail("--default takes no --input: it prepares the installed default corpus");
      PrepareConfig d = default_corpus_config(cfg.tokenizer, choice.spm_dir);
      cfg.inputs = d.inputs;
      if (cmd->count("--out") == 0) cfg.out = d.out;
      if (cmd->count("--long-min-tokens") == 0) cfg.long_min_tokens = d.long_min_tokens;
    } else {
      for (const std::string& path : a->inputs) cfg.inputs.push_back({path, a->format});
    }
    keep_freed_memory_for_reuse();  // each batch's buffers, again and again
    prepare(cfg);
  });
}

}  // namespace xsa::cli

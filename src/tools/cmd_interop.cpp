// xsa import / xsa export: GPT-2 models to and from Hugging Face's and llm.c's files.
#include <cstdio>

#include "xsa/io/checkpoint.h"
#include "xsa/io/interop.h"
#include "xsa/tools/commands.h"
#include "xsa/util/error.h"
#include "xsa/util/fmt.h"

namespace xsa::cli {
namespace {

constexpr const char* kFormats = "hf (Hugging Face GPT-2) or llmc (llm.c's model file)";

void check_format(const std::string& format) {
  if (format != "hf" && format != "llmc") fail("format '{}' is not known: {}", format, kFormats);
}

}  // namespace

void add_import_command(CLI::App& root) {
  auto* cmd = root.add_subcommand(
      "import", "Read a GPT-2 model from Hugging Face's or llm.c's files into an xsa run folder");
  struct Args {
    std::string format, source, out;
    bool force = false;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("format", a->format, kFormats)->required();
  cmd->add_option("source", a->source,
                  "hf: model.safetensors or its folder (with config.json); llmc: gpt2_124M.bin")
      ->required();
  cmd->add_option("--out", a->out, "The run folder to write (its checkpoint ckpt_000000)")
      ->required();
  cmd->add_flag("--force", a->force, "Replace a run already in --out (after the import is read)");
  cmd->callback([a] {
    check_format(a->format);
    std::error_code ec;
    const fs::path out = a->out;
    if (!a->force && !list_checkpoints(out).empty())
      fail("{}: already holds a run; pass --force to replace it, or choose another --out",
           out.string());
    // Everything is read and checked before anything is written; then --force clears the run
    // that was there, so that no later checkpoint of it shadows the imported one.
    const ForeignModel m = a->format == "hf" ? import_hf(a->source) : import_llmc(a->source);
    for (const fs::path& old : list_checkpoints(out)) fs::remove_all(old, ec);
    fs::remove(out / "metrics.jsonl", ec);
    const std::vector<TensorInfo> layout = param_layout(m.cfg);
    const fs::path ckpt =
        save_checkpoint(out, 0, m.cfg, {layout, m.params.data()}, nlohmann::json(), a->force);
    std::printf(
        "imported %s\n  -> %s (%s attention, %lld parameters; weights only: eval, sample, "
        "analyze, or train --init-from)\n",
        m.description.c_str(), ckpt.string().c_str(), attention_string(m.cfg).c_str(),
        (long long)parameter_count(m.cfg));
  });
}

void add_export_command(CLI::App& root) {
  auto* cmd = root.add_subcommand(
      "export", "Write an xsa model (GPT-2 architecture) as Hugging Face's or llm.c's files");
  struct Args {
    std::string format, run, dest;
    Precision precision = Precision::fp32;
    bool force = false;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("format", a->format, kFormats)->required();
  cmd->add_option("run", a->run, "A run folder (its latest checkpoint) or a checkpoint folder")
      ->required();
  cmd->add_option("dest", a->dest, "hf: the folder to write; llmc: the file to write")->required();
  add_precision_option(cmd, a->precision,
                       "llmc: fp32 (version 3, what llm.c's CPU trainer reads) or bf16 (version 5, "
                       "its CUDA trainer)");
  cmd->add_flag("--force", a->force, "Replace dest when it exists");
  cmd->callback([a] {
    check_format(a->format);
    if (a->format == "hf" && a->precision != Precision::fp32)
      fail("--precision {}: Hugging Face files are written in fp32", to_string(a->precision));
    const fs::path dest = a->dest;
    std::error_code ec;
    const bool taken = a->format == "hf" ? fs::exists(dest / "model.safetensors", ec) ||
                                               fs::exists(dest / "config.json", ec)
                                         : fs::exists(dest, ec);
    if (taken && !a->force) fail("{}: already exists; pass --force to replace it", dest.string());
    const fs::path ckpt = resolve_checkpoint(a->run);
    const ModelConfig cfg = load_checkpoint_config(ckpt);
    if (cfg.tokenizer == TokenizerKind::spm)
      fail(
          "{}: its vocabulary is a SentencePiece one of its own; export writes models of GPT-2's "
          "vocabulary or of bytes, which the other programs read with their own tokenizer",
          ckpt.string());
    const std::vector<TensorInfo> layout = param_layout(cfg);
    std::vector<float> params(param_arena_size(layout));
    load_checkpoint_tensors(ckpt, {layout, params.data()});
    if (a->format == "hf")
      export_hf(cfg, layout, params.data(), dest);
    else
      export_llmc(cfg, layout, params.data(), dest, a->precision == Precision::bf16);
    std::printf("exported %s -> %s (%s)\n", ckpt.string().c_str(), dest.string().c_str(),
                a->format == "hf" ? "Hugging Face GPT-2: model.safetensors, config.json"
                                  : fmt::format("llm.c model file, version {}",
                                                a->precision == Precision::bf16 ? 5 : 3)
                                        .c_str());
  });
}

}  // namespace xsa::cli

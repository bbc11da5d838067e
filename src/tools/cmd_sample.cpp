// xsa sample: generate text from a checkpoint, token by token through the key/value cache.
#include <cstdio>

#include "xsa/infer/sampler.h"
#include "xsa/io/checkpoint.h"
#include "xsa/tokenizer/tokenizer.h"
#include "xsa/tools/commands.h"
#include "xsa/train/trainer.h"
#include "xsa/util/error.h"
#include "xsa/util/files.h"
#include "xsa/util/fmt.h"
#include "xsa/util/threads.h"

namespace xsa::cli {

void add_sample_command(CLI::App& root) {
  auto* cmd = root.add_subcommand("sample", "Generate text from a checkpoint (key/value cache)");
  struct Args {
    std::string ckpt, vocab_dir, prompt_file, device = "cpu";
    Precision precision = Precision::fp32;
    std::optional<std::string> prompt;
    int max_new_tokens = 200, samples = 1, threads = 0;
    bool ignore_eot = false;
    SamplerConfig sampling{.temperature = 0.8, .top_k = 40, .top_p = 0.95, .seed = 1};
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("--ckpt", a->ckpt, "A run folder (its latest checkpoint) or a checkpoint folder")
      ->required();
  cmd->add_option("--prompt", a->prompt,
                  "Text to continue (default: the end-of-text token, i.e. a new document; byte "
                  "models need a prompt)");
  cmd->add_option("--prompt-file", a->prompt_file, "Read the prompt from this file")
      ->excludes("--prompt");
  cmd->add_option("--max-new-tokens", a->max_new_tokens, "Tokens to generate per sample")
      ->capture_default_str()
      ->check(within(0, 1 << 24));
  cmd->add_option("--temperature", a->sampling.temperature, "Softmax temperature; 0: greedy")
      ->capture_default_str();
  cmd->add_option("--top-k", a->sampling.top_k, "Sample among the k most likely tokens; 0: all")
      ->capture_default_str()
      ->check(within(0, 1 << 24));
  cmd->add_option("--top-p", a->sampling.top_p,
                  "Sample among the fewest most likely tokens holding this probability; 1: all")
      ->capture_default_str();
  cmd->add_option("--seed", a->sampling.seed, "Random seed: the same seed, the same text")
      ->capture_default_str();
  cmd->add_option("--samples", a->samples, "Samples to draw, one after the other")
      ->capture_default_str();
  cmd->add_flag("--ignore-eot", a->ignore_eot,
                "Go on after the end-of-text token instead of stopping there");
  cmd->add_option("--vocab-dir", a->vocab_dir, "Folder with GPT-2's encoder.json and vocab.bpe");
  cmd->add_option("--threads", a->threads, "Threads (0: every core)")->capture_default_str();
  add_precision_option(cmd, a->precision,
                       "fp32, or bf16: the prompt's matrix products in bf16 with fp32 accumulation "
                       "(each new token's stay fp32: they are bound by reading the weights)");
  cmd->add_option("--device", a->device, "cpu, cuda, cuda:N, or auto (a GPU when one works)")
      ->capture_default_str();
  cmd->callback([a] {
    if (smoke_test())
      a->max_new_tokens = std::min(a->max_new_tokens, 16), a->samples = std::min(a->samples, 2);
    Backend<float>& backend = select_backend({a->device, a->precision});
    a->sampling.validate();
    if (a->max_new_tokens <= 0) fail("--max-new-tokens {} must be positive", a->max_new_tokens);
    if (a->samples <= 0) fail("--samples {} must be positive", a->samples);
    const fs::path ckpt = resolve_checkpoint(a->ckpt);
    const ModelConfig cfg = load_checkpoint_config(ckpt);
    auto tokenizer = make_tokenizer(cfg.tokenizer, tokenizer_folder(ckpt, cfg, a->vocab_dir));
    if (!a->prompt_file.empty()) {
      std::error_code ec;
      if (!fs::is_regular_file(a->prompt_file, ec))
        fail("--prompt-file {}: no such file", a->prompt_file);
      a->prompt = read_file(a->prompt_file);
    }
    std::vector<int32_t> prompt;
    if (a->prompt) {
      prompt = tokenizer->encode(*a->prompt);
      if (prompt.empty()) fail("--prompt '{}' encodes to no tokens", *a->prompt);
    } else if (tokenizer->end_of_text() >= 0) {
      prompt = {tokenizer->end_of_text()};
    } else {
      fail(
          "{} uses the byte tokenizer, which has no end-of-text token to start from: give --prompt",
          ckpt.string());
    }
    set_thread_count(a->threads);
    ParamArena<float> weights(cfg, /*training_state=*/false, backend);
    load_checkpoint_weights(ckpt, weights, false);
    Decoder<float> decoder(cfg, weights.w, cfg.seq_len, 256, backend);
    Sampler sampler(a->sampling);
    const int32_t stop = a->ignore_eot ? -1 : tokenizer->end_of_text();
    for (int s = 0; s < a->samples; s++) {
      if (s > 0) std::printf("\n---------------\n");
      if (a->prompt) std::fwrite(a->prompt->data(), 1, a->prompt->size(), stdout);
      std::fflush(stdout);
      GenerateResult r =
          generate(decoder, prompt, a->max_new_tokens, sampler, stop, [&](int32_t id) {
            if (id == tokenizer->end_of_text()) return;  // a document's end, not text
            const std::string text = tokenizer->decode(&id, 1);
            std::fwrite(text.data(), 1, text.size(), stdout);
            std::fflush(stdout);
          });
      const int generated = (int)r.tokens.size();
      std::fprintf(
          stderr, "\n[%d tokens in %.2f s: %.1f tokens/s; prompt %zu tokens in %.3f s%s%s]\n",
          generated, r.decode_seconds, generated > 1 ? (generated - 1) / r.decode_seconds : 0.0,
          prompt.size(), r.prompt_seconds,
          r.stopped_at_end_of_text ? "; stopped at end-of-text" : "",
          r.context_shifts ? fmt::format("; context shifted {} time(s)", r.context_shifts).c_str()
                           : "");
    }
  });
}

}  // namespace xsa::cli

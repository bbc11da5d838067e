// The model and training options that train, compare and sweep share: each declared once here
// (name, default, help), bound straight to ModelConfig and RunConfig.
#include "tools/commands.h"

namespace xsa::cli {

void add_model_options(CLI::App* cmd, ModelConfig& m) {
  cmd->add_option("--layers", m.n_layer, "Transformer blocks (L)")->capture_default_str();
  cmd->add_option("--heads", m.n_head, "Attention heads (H)")->capture_default_str();
  cmd->add_option("--kv-heads", m.n_kv_head,
                  "Key/value heads, grouped-query attention (0: one per head)")
      ->capture_default_str();
  cmd->add_option("--embd", m.n_embd, "Embedding width (C)")->capture_default_str();
  cmd->add_option("--seq-len", m.seq_len, "Context length (T)")->capture_default_str();
  cmd->add_option("--rope-theta", m.rope_theta, "RoPE base")->capture_default_str();
}

void add_training_options(CLI::App* cmd, RunConfig& r, std::string& tokenizer) {
  cmd->add_option(
      "--data", r.data,
      "A text file, a folder of token shards (xsa prepare, llm.c), or a glob of shard files");
  cmd->add_option("--tokenizer", tokenizer,
                  "byte or gpt2 (default: byte for a text file, the shards' meta.json, else gpt2)");
  cmd->add_option("--vocab-dir", r.vocab_dir,
                  "Folder with GPT-2's encoder.json and vocab.bpe (default: data/gpt2)");
  cmd->add_flag("--shuffle,!--no-shuffle", r.shuffle,
                "Visit training windows in a seeded random order (default) or in order");
  cmd->add_option("--batch", r.batch, "Sequences per step (B)")->capture_default_str();
  cmd->add_option("--steps", r.steps, "Optimizer steps (per model)")->capture_default_str();
  cmd->add_option("--lr", r.lr, "Peak learning rate")->capture_default_str();
  cmd->add_option("--min-lr-fraction", r.min_lr_fraction,
                  "Final learning rate as a fraction of the peak")
      ->capture_default_str();
  cmd->add_option("--warmup", r.warmup, "Linear warm-up steps (-1: 5% of --steps)")
      ->capture_default_str();
  cmd->add_option("--weight-decay", r.weight_decay,
                  "AdamW decoupled weight decay (2-D weights only)")
      ->capture_default_str();
  cmd->add_option("--beta1", r.beta1, "AdamW beta1")->capture_default_str();
  cmd->add_option("--beta2", r.beta2, "AdamW beta2")->capture_default_str();
  cmd->add_option("--grad-clip", r.grad_clip, "Global gradient-norm clip (0: off)")
      ->capture_default_str();
  cmd->add_option("--seed", r.seed, "Seed of the initial weights and of the batch order")
      ->capture_default_str();
  cmd->add_option("--threads", r.threads, "Threads (0: every core)")->capture_default_str();
  cmd->add_option("--val-fraction", r.val_fraction,
                  "Share of a text file held out (its tail) for validation")
      ->capture_default_str();
  cmd->add_option("--val-every", r.val_every,
                  "Steps between validation passes (0: only at the end)")
      ->capture_default_str();
  cmd->add_option("--val-batches", r.val_batches, "Batches per validation pass")
      ->capture_default_str();
  cmd->add_option("--log-every", r.log_every,
                  "Steps between progress lines when output is not a terminal")
      ->capture_default_str();
  cmd->add_flag("--quiet", r.quiet, "No progress output");
}

}  // namespace xsa::cli

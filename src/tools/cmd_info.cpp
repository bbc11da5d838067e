// xsa info RUN: what a run or checkpoint holds.
#include <cstdio>
#include <fstream>

#include "xsa/io/checkpoint.h"
#include "xsa/model/params.h"
#include "xsa/tools/commands.h"

namespace xsa::cli {

void add_info_command(CLI::App& root) {
  auto* cmd =
      root.add_subcommand("info", "Print a checkpoint's model config, parameter count and step");
  auto path = std::make_shared<std::string>();
  cmd->add_option("path", *path, "A run folder (its latest checkpoint) or a checkpoint folder")
      ->required();
  cmd->callback([path] {
    fs::path ckpt = resolve_checkpoint(*path);
    ModelConfig cfg = load_checkpoint_config(ckpt);
    std::printf("checkpoint:  %s\n", ckpt.string().c_str());
    std::error_code ec;
    if (fs::exists(ckpt / "trainer.json", ec)) {
      nlohmann::json state = load_trainer_state(ckpt);
      std::printf("step:        %lld", (long long)state.value("step", (int64_t)0));
      if (state.contains("run"))
        std::printf(" of %lld", (long long)state["run"].value("steps", (int64_t)0));
      std::printf(" (%lld tokens seen)\n", (long long)state.value("tokens_seen", (int64_t)0));
      if (state.contains("data"))
        std::printf("data:        %s\n", state["data"].value("source", "?").c_str());
      // Checkpoints from before data parallelism were trained by one process.
      const nlohmann::json run = state.value("run", nlohmann::json::object());
      const int world = state.value("world_size", 1);
      const int64_t step_tokens = run.value("total_batch_tokens", (int64_t)0) > 0
                                      ? run.value("total_batch_tokens", (int64_t)0)
                                      : (int64_t)run.value("batch", 0) * cfg.seq_len * world;
      std::printf(
          "trained on:  %d process%s%s; %lld tokens per step (%d rows x %d accumulation x %d)\n",
          world, world == 1 ? "" : "es", run.value("zero", 0) == 1 && world > 1 ? ", ZeRO-1" : "",
          (long long)step_tokens, run.value("batch", 0), state.value("accumulation_steps", 1),
          world);
      if (run.value("optimizer", std::string("adamw")) == "muon")
        std::printf(
            "optimizer:   muon (peak lr %g, momentum %g) on the hidden matrices, adamw "
            "(peak lr %g) on the rest\n",
            run.value("muon_lr", 0.02), run.value("muon_momentum", 0.95), run.value("lr", 0.0));
    } else {
      std::printf("step:        (no trainer.json: weights only)\n");
    }
    std::printf("attention:   %s\n", attention_string(cfg).c_str());
    std::printf("arch:        %s\n", architecture_name(cfg));
    std::printf("tokenizer:   %s (vocab %d, padded %d)\n", to_string(cfg.tokenizer), cfg.vocab_size,
                cfg.padded_vocab);
    std::printf(
        "layers:      %d\nheads:       %d (head dim %d)\nembd:        %d\nseq_len:     %d\n",
        cfg.n_layer, cfg.n_head, cfg.head_dim(), cfg.n_embd, cfg.seq_len);
    if (cfg.positions == Positions::rope) std::printf("rope_theta:  %g\n", cfg.rope_theta);
    if (cfg.mlp != MlpActivation::gelu) std::printf("mlp:         %s\n", to_string(cfg.mlp));
    if (cfg.logit_softcap > 0) std::printf("logit cap:   %g\n", cfg.logit_softcap);
    std::printf("parameters:  %lld\n", (long long)parameter_count(cfg));
    // The run's last losses, from metrics.jsonl beside the checkpoints.
    std::ifstream metrics(ckpt.parent_path() / "metrics.jsonl");
    nlohmann::json last_train, last_val;
    for (std::string line; std::getline(metrics, line);) {
      auto rec = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      // (a step skipped by --skip-bad-steps may have a null loss: not a loss to show)
      if (!rec.is_object() || !rec.contains("loss") || !rec["loss"].is_number()) continue;
      (rec.contains("split") ? last_val : last_train) = rec;
    }
    if (!last_train.is_null())
      std::printf("train loss:  %.4f (step %lld)\n", last_train["loss"].get<double>(),
                  (long long)last_train.value("step", 0));
    if (!last_val.is_null())
      std::printf("val loss:    %.4f (step %lld)\n", last_val["loss"].get<double>(),
                  (long long)last_val.value("step", 0));
    if (auto runs = list_checkpoints(ckpt.parent_path()); runs.size() > 1) {
      std::printf("checkpoints:");
      for (const auto& p : runs) std::printf(" %s", p.filename().string().c_str());
      std::printf("\n");
    }
  });
}

}  // namespace xsa::cli

// xsa analyze: the attention similarity bias of a checkpoint, per layer and head.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "xsa/analysis/similarity_bias.h"
#include "xsa/io/checkpoint.h"
#include "xsa/report/svg.h"
#include "xsa/tools/commands.h"
#include "xsa/util/error.h"
#include "xsa/util/files.h"
#include "xsa/util/fmt.h"
#include "xsa/util/threads.h"

namespace xsa::cli {

void add_analyze_command(CLI::App& root) {
  auto* cmd = root.add_subcommand(
      "analyze", "Measure the attention similarity bias of a checkpoint per layer and head");
  struct Args {
    std::string ckpt, data, json_path, plot, vocab_dir;
    int batches = 4, batch = 8, threads = 0;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("--ckpt", a->ckpt, "A run folder (its latest checkpoint) or a checkpoint folder")
      ->required();
  cmd->add_option("--data", a->data,
                  "Data to measure on (default: the data the checkpoint was trained on)");
  cmd->add_option("--batches", a->batches, "Batches of the validation split to average over")
      ->capture_default_str()
      ->check(within(1, 1 << 20));
  cmd->add_option("--batch", a->batch, "Sequences per batch")
      ->capture_default_str()
      ->check(within(1, 1 << 20));
  cmd->add_option("--json", a->json_path,
                  "Write one record per layer and head to this file (a JSON array)");
  cmd->add_option("--plot", a->plot,
                  "Heat map of cos(y, v), layers × heads: PATH.svg (and PATH.png)");
  cmd->add_option("--vocab-dir", a->vocab_dir, "Folder with GPT-2's encoder.json and vocab.bpe");
  cmd->add_option("--threads", a->threads, "Threads (0: every core)")
      ->capture_default_str()
      ->check(within(0, 4096));
  cmd->callback([a] {
    set_thread_count(a->threads);
    fs::path ckpt = resolve_checkpoint(a->ckpt);
    ModelConfig cfg = load_checkpoint_config(ckpt);
    std::string data_path = a->data;
    std::error_code ec;
    if (data_path.empty() && fs::exists(ckpt / "trainer.json", ec))
      data_path = load_trainer_state(ckpt).value("/data/source"_json_pointer, std::string());
    if (data_path.empty())
      fail("{}: does not say what data it was trained on; pass --data", ckpt.string());
    Dataset data = open_dataset(data_path, cfg.tokenizer, 0.1, 1, cfg.seq_len,
                                tokenizer_folder(ckpt, cfg, a->vocab_dir), /*evaluation=*/true);
    check_same_vocabulary(data, ckpt);
    const TokenStream& stream = data.val.size() > (size_t)cfg.seq_len ? data.val : data.train;
    Gpt<float> model(cfg, a->batch, cfg.seq_len, GptMode::inference);
    load_checkpoint_weights(ckpt, model.params(), false);
    const int batches = val_batch_count(stream, a->batch, cfg.seq_len, a->batches);
    auto heads = attention_similarity_bias(model, stream, batches);
    std::printf("attention similarity bias of %s (%s attention) on %s, %d batch(es) of %d x %d\n\n",
                ckpt.string().c_str(), attention_string(cfg).c_str(), data_path.c_str(), batches,
                a->batch, cfg.seq_len);
    std::printf(
        "| layer | head | attn | cos(y,v) | cos(y_i,v_j) | own lean | |cos(z,v)| | self weight "
        "a_ii | cos(v_i,v_j) |\n|---|---|---|---|---|---|---|---|---|\n");
    nlohmann::json records = nlohmann::json::array();
    std::vector<std::vector<double>> grid(cfg.n_layer, std::vector<double>(cfg.n_head));
    for (const HeadBias& h : heads) {
      std::printf("| %d | %d | %s | %.4f | %.4f | %.4f | %s | %.4f | %.4f |\n", h.layer, h.head,
                  to_string(cfg.attention[h.layer].kind), h.cos_yv, h.cos_y_vj, h.own_lean(),
                  h.exclusive ? fmt::format("{:.2e}", h.cos_zv).c_str() : "–", h.self_weight,
                  h.cos_vv);
      nlohmann::json r = {{"layer", h.layer},
                          {"head", h.head},
                          {"attn", to_string(cfg.attention[h.layer].kind)},
                          {"cos_yv", h.cos_yv},
                          {"self_weight", h.self_weight},
                          {"cos_vv", h.cos_vv},
                          {"cos_y_vj", h.cos_y_vj},
                          {"own_lean", h.own_lean()}};
      if (h.exclusive) r["cos_zv"] = h.cos_zv;
      records.push_back(r);
      grid[h.layer][h.head] = h.cos_yv;
    }
    std::printf(
        "\nmean over heads: cos(y_i, v_i) %.4f; cos(y_i, v_j) over earlier tokens j %.4f; own "
        "lean %.4f (the first less the second: where values are alike y leans to all of them, and "
        "cos(y_i, v_i) alone overstates the bias)\n",
        mean_cos_yv(heads), mean_cos_yv(heads) - mean_own_lean(heads), mean_own_lean(heads));
    if (!a->json_path.empty()) write_file_atomic(a->json_path, records.dump(2) + "\n");
    if (!a->plot.empty()) {
      auto files =
          write_plot(a->plot, svg_heatmap("mean cos(y_i, v_i): attention output vs own value", grid,
                                          "layer", "head", 0, 1));
      std::printf("\nplot: %s\n", fmt::format("{}", fmt::join(files, ", ")).c_str());
    }
  });
}

}  // namespace xsa::cli

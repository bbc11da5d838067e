// xsa bench: the command line of the benchmark library (bench/bench.h).
#include <cstdio>
#include <memory>

#include "xsa/bench/bench.h"
#include "xsa/tools/commands.h"
#include "xsa/util/threads.h"

namespace xsa::cli {

namespace {

using BenchOptionsPtr = std::shared_ptr<bench::BenchOptions>;

// The model, the steps and the tables' own options.
void add_table_options(CLI::App* cmd, const BenchOptionsPtr& o) {
  cmd->add_option(
         "--model,--config", o->config,
         "tiny, demo, small, gpt2 or all (docs/SPEC.md §4; demo: the main job's model); --config "
         "is its old name")
      ->capture_default_str();
  cmd->add_option("--arch", o->arch,
                  "xsa (RoPE, no linear biases) or gpt2 (learned positions, linear biases)")
      ->capture_default_str();
  cmd->add_option("--steps", o->steps, "Timed steps per arm")
      ->capture_default_str()
      ->check(within(1, 1e6));
  cmd->add_option("--warmup", o->warmup, "Warm-up steps per arm")
      ->capture_default_str()
      ->check(within(0, 1e6));
  cmd->add_option("--threads", o->threads, "Threads (0: every core)")
      ->capture_default_str()
      ->check(within(0, 4096));
  cmd->add_option("--attn-T", o->attn_T, "Sequence lengths of the attention-alone table")
      ->delimiter(',');
  cmd->add_option("--attn-D", o->attn_D, "Head sizes of the CPU's attention-alone table (8 heads)")
      ->delimiter(',')
      ->check(CLI::Range(1, 512));
  cmd->add_flag(
      "--gemm", o->gemm,
      "Also print the GEMM ceiling per shape (bf16 with --precision bf16) and the effect of "
      "the BLAS kernel choice");
  cmd->add_flag("--no-steps", o->no_steps, "Skip the training-step table");
  cmd->add_flag("--no-attention", o->no_attention, "Skip the attention-alone table");
  cmd->add_flag("--decode", o->decode,
                "Also time decoding with the key/value cache against recomputing the sequence");
}

// --profile and the profiled model's options.
void add_profile_options(CLI::App* cmd, const BenchOptionsPtr& o) {
  cmd->add_flag("--profile", o->profile,
                "Instead of the tables: each op's time in a training step of --model (demo, tiny, "
                "small, gpt2), its share, rate and share of its roofline (docs/performance.md)");
  cmd->add_option("--attn", o->attn, "With --profile: the attention (as xsa train's --attn)")
      ->capture_default_str();
  cmd->add_option("--optimizer", o->optimizer,
                  "With --profile: adamw or muon (Muon on the hidden matrices: its share of the "
                  "step)")
      ->capture_default_str()
      ->check(CLI::IsMember({"adamw", "muon"}));
  cmd->add_option("--mlp", o->mlp, "With --profile: the MLP's activation, gelu or relu2")
      ->capture_default_str()
      ->check(CLI::IsMember({"gelu", "relu2"}));
  cmd->add_option("--logit-softcap", o->logit_softcap,
                  "With --profile: the logits' soft-cap (0: off)")
      ->check(within(0, 1e6));
  cmd->add_option("--layers", o->layers, "With --profile: layers (0: the model's)")
      ->check(within(0, kMaxLayers));
  cmd->add_option("--embd", o->embd, "With --profile: width (0: the model's)")
      ->check(within(0, kMostWidth));
  cmd->add_option("--heads", o->heads, "With --profile: heads (0: the model's)")
      ->check(within(0, kMostWidth));
}

// --data: the tokenizer, prepare and the loader.
void add_data_options(CLI::App* cmd, const BenchOptionsPtr& o) {
  cmd->add_flag("--data", o->data,
                "Instead of the tables: the tokenizer and prepare (1 thread and all), and the "
                "loader's shuffled windows from GB of shards against the training of --model "
                "(gpt2 unless named) at T 1024");
  cmd->add_option("--data-text-mb", o->data_text_mb, "With --data: MB of text to tokenize")
      ->capture_default_str()
      ->check(within(1, 1 << 20));
  cmd->add_option("--data-gb", o->data_gb, "With --data: GB of shards the loader reads")
      ->capture_default_str()
      ->check(within(0.001, 1 << 20));
}

// The precision, the device and the step's shape there, and where the rows go.
void add_device_and_output_options(CLI::App* cmd, const BenchOptionsPtr& o) {
  add_precision_option(cmd, o->precision,
                       "fp32, or bf16: the step table and its GEMM ceiling with bf16 products");
  cmd->add_option("--device", o->device,
                  "cpu, cuda, cuda:N or auto: on a GPU the step table (gpt2 at T 1024) reports "
                  "model FLOPs utilisation and device memory, the attention table T 1024-16384")
      ->capture_default_str();
  cmd->add_option(
         "--batch", o->batch,
         "Sequences per step (0: the configuration's; on a GPU 32768 tokens); with --profile the "
         "profiled model's")
      ->capture_default_str();
  cmd->add_option(
         "--seq-len", o->seq_len,
         "Tokens per sequence (0: the configuration's; gpt2 on a GPU 1024); with --profile the "
         "profiled model's")
      ->capture_default_str();
  cmd->add_flag("--tf32", o->tf32, "On a GPU with --precision fp32: TF32 products");
  cmd->add_flag("--deterministic", o->deterministic,
                "On a GPU: attention's backward without atomics");
  cmd->add_flag("--allreduce", o->allreduce,
                "Time the gradient sum over the processes of this job (run under mpirun), 1 MB to "
                "the gpt2 model's gradients");
  cmd->add_option("--json", o->json_path,
                  "Write one JSON record per row (a JSON array) to this file");
  cmd->add_option("--csv", o->csv_path, "Write the rows as CSV to this file");
}

}  // namespace

void add_bench_command(CLI::App& root) {
  auto* cmd = root.add_subcommand("bench",
                                  "Measure training-step, attention and (--decode) decoding speed, "
                                  "SA vs XSA, and the GEMM ceiling");
  auto o = std::make_shared<bench::BenchOptions>();
  auto child = std::make_shared<bool>(false);
  add_table_options(cmd, o);
  add_profile_options(cmd, o);
  add_data_options(cmd, o);
  add_device_and_output_options(cmd, o);
  cmd->add_flag("--gemm-child", *child)->group("");  // internal: prints the `small` ceiling alone
  cmd->callback([o, child, cmd] {
    o->attn_T_given = cmd->count("--attn-T") > 0;
    if (smoke_test()) {
      o->config = o->library_config = "tiny", o->steps = 1, o->warmup = 0, o->attn_T = {256};
      o->attn_T_given = true, o->attn_D = {64}, o->data_text_mb = 1, o->data_gb = 0.01;
    }
    bench::validate(*o);
    if (*child) {
      set_thread_count(o->threads);
      std::printf("%.3f\n", bench::gemm_ceiling_gflops(o->config == "all" ? "small" : o->config));
      return;
    }
    bench::run_bench(*o);
  });
}

}  // namespace xsa::cli

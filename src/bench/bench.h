// xsa bench as a library: training-step speed of the docs/SPEC.md §4 configurations (SA and XSA
// interleaved in one process) against the GEMM ceiling on the same shapes and the CPU's measured
// FMA peak, attention alone up to T = 8192, what the product library and OpenBLAS's kernel choice
// are worth, decoding with the key/value cache against recomputing the sequence, the data side
// (tokenizer, prepare, the loader against training's consumption), the gradient sum
// over the processes of a job, and on a GPU the step's model FLOPs utilisation. Markdown on stdout;
// one JSON record (or CSV row) per table row for scripts. The `xsa bench` command is a thin client.
#pragma once

#include <string>
#include <vector>

#include "xsa/util/precision.h"

namespace xsa::bench {

struct BenchOptions {
  std::string config = "all";  // tiny, small, gpt2 or all
  std::string json_path, csv_path;
  Precision precision = Precision::fp32;  // bf16: the step table with bf16 products
  std::string arch = "xsa";               // or gpt2: learned positions and linear biases
  std::string device = "cpu";             // cpu, cuda, cuda:N or auto
  int steps = 5, warmup = 2, threads = 0;
  int batch = 0, seq_len = 0;  // 0: the configuration's (on a GPU 32768 tokens; gpt2 at 1024)
  bool tf32 = false, deterministic = false;
  std::vector<int> attn_T = {256, 1024, 4096, 8192};
  bool attn_T_given = false;                // else a GPU takes 1024 … 16384
  std::vector<int> attn_D = {32, 64, 128};  // head sizes of the CPU's attention-alone table
  bool gemm = false, no_steps = false, no_attention = false, decode = false, allreduce = false;
  // --profile: each op family's time in a step of --model (its layers, width, heads, T and batch
  // replaced where given) with --attn's attention, instead of the other tables.
  bool profile = false;
  std::string attn = "xsa";
  int layers = 0, embd = 0, heads = 0;
  // With --profile: the recipe's options (docs/SPEC.md §11): adamw or muon, gelu or relu2, a cap.
  std::string optimizer = "adamw", mlp = "gelu";
  double logit_softcap = 0;
  // --data: the tokenizer and prepare on data_text_mb MB of text, the loader on data_gb GB of
  // shards, instead of the other tables.
  bool data = false;
  int data_text_mb = 32;
  double data_gb = 2;
  // With --gemm: the configuration whose ceiling shows what the product library and OpenBLAS's
  // kernel choice are worth.
  std::string library_config = "small";
};

// Checks the options, one line naming a bad value (Error), before anything runs.
void validate(const BenchOptions& o);
// Runs the tables the options ask for and writes --json / --csv.
void run_bench(const BenchOptions& o);
// A configuration's fp32 GEMM ceiling alone, in GFLOP/s: what a child process measures under
// another product library or other BLAS kernels (`xsa bench --gemm-child`).
double gemm_ceiling_gflops(const std::string& config);

}  // namespace xsa::bench

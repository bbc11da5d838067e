// xsa eval: validation loss, perplexity and bits per byte, multiple-choice tasks and LAMBADA.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "xsa/eval/evaluate.h"
#include "xsa/eval/suite.h"
#include "xsa/io/checkpoint.h"
#include "xsa/tools/commands.h"
#include "xsa/train/trainer.h"
#include "xsa/util/error.h"
#include "xsa/util/files.h"
#include "xsa/util/fmt.h"
#include "xsa/util/stats.h"
#include "xsa/util/threads.h"

namespace xsa::cli {
namespace {

struct EvalArgs {
  std::vector<std::string> ckpts, tasks, files;
  std::string data, json_path, vocab_dir, suite, dir, device = "cpu";
  Precision precision = Precision::fp32;
  int limit = 0, batch = 8, val_batches = 0, threads = 0;
  bool skip_bad_lines = false;
};

std::string metric(double v) {
  return v < 0 || std::isnan(v) ? "–" : fmt::format("{:.4f}", v);
}

// One record of --json: only the metrics that apply to the task.
nlohmann::json record(const TaskResult& r, const std::string& ckpt, const TaskFile& file) {
  nlohmann::json j = {{"task", r.task},      {"n", r.n},
                      {"acc", r.acc},        {"acc_stderr", r.acc_stderr},
                      {"file", file.path},   {"checkpoint", ckpt},
                      {"seconds", r.seconds}};
  if (r.acc_norm >= 0) j["acc_norm"] = r.acc_norm, j["acc_mean_token"] = r.acc_mean_token;
  if (r.ppl >= 0) j["ppl"] = r.ppl;
  if (file.skipped) j["skipped_lines"] = file.skipped;
  return j;
}

// One checkpoint with everything read and checked, before any forward pass.
struct Prepared {
  fs::path ckpt;
  ModelConfig cfg;
  std::unique_ptr<Tokenizer> tokenizer;
  std::vector<TaskFile> files;
  std::vector<std::vector<ScoringItem>> items;
  std::string data_path;
  std::optional<Dataset> data;
  int batch = 8;
};

Prepared prepare(const std::string& path, const EvalArgs& a, const std::vector<TaskKind>& kinds,
                 bool batch_given) {
  Prepared p;
  p.ckpt = resolve_checkpoint(path);
  p.cfg = load_checkpoint_config(p.ckpt);
  // A SentencePiece vocabulary travels in the checkpoint (vocabulary_files).
  p.tokenizer = make_tokenizer(p.cfg.tokenizer, tokenizer_folder(p.ckpt, p.cfg, a.vocab_dir));
  for (size_t i = 0; i < kinds.size(); i++) {
    p.files.push_back(load_task_file(kinds[i], a.files[i], a.skip_bad_lines, a.limit));
    p.items.push_back(tokenize_task(p.cfg, *p.tokenizer, p.files.back(), a.skip_bad_lines));
  }
  p.data_path = a.data;
  double val_fraction = 0.1;
  std::error_code ec;
  if (fs::exists(p.ckpt / "trainer.json", ec)) {
    const nlohmann::json state = load_trainer_state(p.ckpt);
    val_fraction = state.value("/run/val_fraction"_json_pointer, val_fraction);
    if (p.data_path.empty() && p.files.empty())
      p.data_path = state.value("/data/source"_json_pointer, std::string());
  }
  if (p.data_path.empty() && p.files.empty())
    fail("{}: does not say what data it was trained on; pass --data or --task/--file",
         p.ckpt.string());
  if (!p.data_path.empty())  // refuses data of another tokenizer than the checkpoint's
    p.data = open_dataset(p.data_path, p.cfg.tokenizer, val_fraction, 1, p.cfg.seq_len,
                          tokenizer_folder(p.ckpt, p.cfg, a.vocab_dir), /*evaluation=*/true);
  if (p.data) check_same_vocabulary(*p.data, p.ckpt);
  // Inference keeps every layer's activations (analyze reads them): with a long context and a
  // wide model, 8 sequences can take gigabytes, so the default batch shrinks to fit 1 GB.
  p.batch = a.batch;
  if (p.data && !batch_given) {
    const double weights = Gpt<float>::memory_bytes(p.cfg, 1, 1, GptMode::inference);
    while (p.batch > 1 &&
           Gpt<float>::memory_bytes(p.cfg, p.batch, p.cfg.seq_len, GptMode::inference) - weights >
               1e9)
      p.batch /= 2;
  }
  return p;
}

// A bar on a terminal; otherwise (logs, batch jobs) a line at every tenth of the examples.
EvalProgress progress_printer(bool tty) {
  auto next_line = std::make_shared<int>(1);
  return [tty, next_line](int done, int total, const TaskResult& r) {
    if (tty) {
      const int width = 30, filled = (int)((double)done / total * width);
      std::fprintf(stderr, "\r\033[K%s [%s%s] %d/%d acc %.4f  %.1f ex/s", r.task.c_str(),
                   std::string(filled, '#').c_str(), std::string(width - filled, '.').c_str(), done,
                   total, r.acc, done / std::max(r.seconds, 1e-9));
      if (done == total) std::fprintf(stderr, "\r\033[K");
    } else if (done * 10 >= *next_line * total && done < total) {
      std::fprintf(stderr, "%s %d/%d acc %.4f  %.1f ex/s\n", r.task.c_str(), done, total, r.acc,
                   done / std::max(r.seconds, 1e-9));
      while (done * 10 >= *next_line * total) ++*next_line;
    }
  };
}

void add_eval_options(CLI::App* cmd, EvalArgs& a) {
  cmd->add_option("--ckpt", a.ckpts,
                  "A run folder (its latest checkpoint) or a checkpoint folder; repeat it to score "
                  "several (e.g. SA and XSA twins) on the same examples, with a paired test")
      ->required();
  cmd->add_option("--data", a.data,
                  "Validation data: shard folder, glob or text file (default, when no --task is "
                  "given: the data the checkpoint was trained on)");
  cmd->add_option("--task", a.tasks,
                  "arc_easy, arc_challenge, boolq, hellaswag, lambada, openbookqa, piqa, "
                  "social_iqa, winogrande or mc; repeatable, each paired with a --file in order");
  cmd->add_option("--suite", a.suite,
                  "paper: the paper's eight tasks, from the files in --dir, with their average");
  cmd->add_option("--dir", a.dir,
                  "The folder of the suite's task files as the Hugging Face hub distributes them "
                  "(JSON lines or JSON), each recognised by its fields");
  cmd->add_option("--file", a.files, "The task's jsonl file, one per --task");
  cmd->add_option("--limit", a.limit, "Score only the first N examples of each task (0: all)")
      ->capture_default_str()
      ->check(within(0, 1e9));
  cmd->add_flag("--skip-bad-lines", a.skip_bad_lines,
                "Leave out malformed task lines (counted and reported) instead of stopping");
  cmd->add_option("--json", a.json_path, "Write the results to this file (a JSON array)");
  cmd->add_option("--batch", a.batch,
                  "Validation sequences per forward pass (default: 8, fewer when their "
                  "activations would pass 1 GB)")
      ->check(within(1, 1 << 20));
  cmd->add_option("--val-batches", a.val_batches, "Validation batches to score (0: all)")
      ->capture_default_str()
      ->check(within(0, 1 << 20));
  cmd->add_option("--vocab-dir", a.vocab_dir, "Folder with GPT-2's encoder.json and vocab.bpe");
  cmd->add_option("--threads", a.threads, "Threads (0: every core)")
      ->capture_default_str()
      ->check(within(0, 4096));
  add_precision_option(cmd, a.precision,
                       "fp32, or bf16: matrix products of more than one row in bf16 with fp32 "
                       "accumulation (needs AVX512_BF16 or AMX)");
  cmd->add_option("--device", a.device, "cpu, cuda, cuda:N, or auto (a GPU when one works)")
      ->capture_default_str();
}

void check_args(const EvalArgs& a) {
  if (!a.suite.empty() && a.suite != "paper")
    fail("--suite '{}' is not known (expected paper)", a.suite);
  if (a.suite.empty() != a.dir.empty())
    fail("--suite and --dir go together: --suite paper --dir TASKS/");
  if (!a.suite.empty() && !a.tasks.empty()) fail("--suite and --task exclude each other");
  if (a.tasks.size() != a.files.size())
    fail("{} --task but {} --file: give one --file per --task, in the same order", a.tasks.size(),
         a.files.size());
  if (a.limit < 0) fail("--limit {} must be 0 (all) or positive", a.limit);
  if (a.batch <= 0) fail("--batch {} must be positive", a.batch);
  if (a.val_batches < 0) fail("--val-batches {} must be 0 (all) or positive", a.val_batches);
  select_backend({a.device, a.precision});  // unknown values, bf16 or a GPU that cannot run here
}

// What the checkpoints' runs produce: the table's rows (printed once all have run) and the --json
// records.
struct EvalOutput {
  std::vector<std::string> rows;
  nlohmann::json records = nlohmann::json::array();
};

void run_val(Gpt<float>& model, const Prepared& p, int val_batches, const std::string& first_column,
             EvalOutput& out) {
  const int available = val_batch_count(p.data->val, p.batch, p.cfg.seq_len, INT32_MAX);
  if (available == 0)
    fail("{}: the validation split holds no window of {} tokens", p.data_path, p.cfg.seq_len + 1);
  const int batches = val_batches ? std::min(val_batches, available) : available;
  const ValResult v = evaluate_val(model, p.data->val, batches, *p.tokenizer);
  out.rows.push_back(first_column + fmt::format("| val | {} | – | – | – | {} | {} | {} | {:.1f} |",
                                                v.tokens, metric(v.ppl), metric(v.loss),
                                                metric(v.bpb), v.seconds));
  out.records.push_back({{"task", "val"},
                         {"n", v.tokens},
                         {"val_loss", v.loss},
                         {"ppl", v.ppl},
                         {"bpb", v.bpb},
                         {"bytes", v.bytes},
                         {"batches", v.batches},
                         {"data", p.data_path},
                         {"checkpoint", p.ckpt.string()},
                         {"seconds", v.seconds}});
}

// One checkpoint: its tasks, then its validation data when it has some. Returns the tasks' results.
std::vector<TaskResult> run_checkpoint(const Prepared& p, int val_batches, int threads,
                                       const BackendOptions& device, bool several, bool tty,
                                       EvalOutput& out) {
  const ModelConfig& cfg = p.cfg;
  // The forward's activations are sized for validation batches; tasks use the decoder's own.
  Backend<float>& backend = select_backend(device);
  Gpt<float> model(cfg, p.data ? p.batch : 1, cfg.seq_len, GptMode::inference, backend);
  load_checkpoint_weights(p.ckpt, model.params(), false);
  std::printf("xsa eval: %s (%s attention, %d layers, %d embd, seq %d, %s tokenizer), %s%s\n",
              p.ckpt.string().c_str(), attention_string(cfg).c_str(), cfg.n_layer, cfg.n_embd,
              cfg.seq_len, to_string(cfg.tokenizer),
              backend.device() == Device::cpu ? fmt::format("{} threads", threads).c_str()
                                              : backend.describe().c_str(),
              backend.device() == Device::cpu && device.precision == Precision::bf16
                  ? ", bf16 products"
                  : "");
  std::fflush(stdout);
  const std::string first_column = several ? fmt::format("| {} ", p.ckpt.string()) : "";
  std::vector<TaskResult> results;
  for (size_t t = 0; t < p.files.size(); t++) {
    const TaskFile& file = p.files[t];
    if (file.skipped)
      std::fprintf(stderr, "%s: left out %d bad line(s); the first: %s\n", file.path.c_str(),
                   file.skipped, file.first_skipped.c_str());
    const TaskResult r = evaluate_task(cfg, model.params().w, file, p.items[t],
                                       progress_printer(tty), 1024, backend);
    out.rows.push_back(first_column +
                       fmt::format("| {} | {} | {} ± {:.4f} | {} | {} | {} | – | – | {:.1f} |",
                                   r.task, r.n, metric(r.acc), r.acc_stderr, metric(r.acc_norm),
                                   metric(r.acc_mean_token), metric(r.ppl), r.seconds));
    out.records.push_back(record(r, p.ckpt.string(), file));
    results.push_back(r);
  }
  if (p.data) run_val(model, p, val_batches, first_column, out);
  return results;
}

void print_table(const std::vector<std::string>& rows, bool several) {
  std::printf(
      "\n%s| task | n | acc | acc_norm | acc_mean_token | ppl | val_loss | bpb | seconds |\n"
      "%s|---|---|---|---|---|---|---|---|---|\n",
      several ? "| checkpoint " : "", several ? "|---" : "");
  for (const std::string& row : rows) std::printf("%s\n", row.c_str());
}

// Whether two checkpoints kept the same examples of a task (tokenizers can leave out different
// lines).
bool same_examples(const TaskFile& a, const TaskFile& b) {
  bool same = a.examples.size() == b.examples.size();
  for (size_t e = 0; same && e < a.examples.size(); e++)
    same = a.examples[e].line == b.examples[e].line;
  return same;
}

// Each further checkpoint against the first, example by example (exact McNemar test), where both
// scored the same examples.
void print_paired_tests(const std::vector<Prepared>& runs, const std::vector<TaskKind>& kinds,
                        const std::vector<std::vector<TaskResult>>& results,
                        nlohmann::json& records) {
  std::printf(
      "\nPaired with %s on the same examples (acc's rule; exact McNemar test):\n\n"
      "| checkpoint | task | n | Δ acc | only the first right | only this right | p |\n"
      "|---|---|---|---|---|---|---|\n",
      runs[0].ckpt.string().c_str());
  for (size_t k = 1; k < runs.size(); k++) {
    for (size_t t = 0; t < kinds.size(); t++) {
      if (!same_examples(runs[0].files[t], runs[k].files[t])) {
        std::printf("| %s | %s | – | – | – | – | (other examples) |\n",
                    runs[k].ckpt.string().c_str(), to_string(kinds[t]));
        continue;
      }
      const TaskResult &r0 = results[0][t], &rk = results[k][t];
      int only_first = 0, only_this = 0;
      for (size_t e = 0; e < r0.correct.size(); e++)
        only_first += r0.correct[e] && !rk.correct[e], only_this += !r0.correct[e] && rk.correct[e];
      const double p = mcnemar_exact_p(only_first, only_this);
      std::printf("| %s | %s | %d | %+.4f | %d | %d | %.4g |\n", runs[k].ckpt.string().c_str(),
                  to_string(kinds[t]), rk.n, rk.acc - r0.acc, only_first, only_this, p);
      records.push_back({{"task", to_string(kinds[t])},
                         {"paired", {runs[0].ckpt.string(), runs[k].ckpt.string()}},
                         {"n", rk.n},
                         {"delta_acc", rk.acc - r0.acc},
                         {"only_first_right", only_first},
                         {"only_second_right", only_this},
                         {"p_mcnemar", p}});
    }
  }
}

// The paper's table, and with several checkpoints each against the first: per task in the
// table's metric (exact McNemar) and the average (paired bootstrap, 95 % interval).
void print_suite(const std::vector<Prepared>& runs,
                 const std::vector<std::vector<TaskResult>>& results, nlohmann::json& records) {
  std::vector<std::string> names;
  for (const Prepared& p : runs) names.push_back(p.ckpt.string());
  std::printf(
      "\nThe paper's tasks (lm-evaluation-harness v0.4 prompts, in %%; the average and the "
      "paired tests over acc_norm where the harness reports it, else acc):\n\n%s",
      suite_table(names, results).c_str());
  for (size_t k = 0; k < results.size(); k++) {
    double sum = 0;
    for (const TaskResult& r : results[k]) sum += suite_metric(r);
    records.push_back({{"task", "paper_average"},
                       {"checkpoint", names[k]},
                       {"tasks", results[k].size()},
                       {"average", sum / results[k].size()}});
  }
  for (size_t k = 1; k < runs.size(); k++) {
    for (size_t t = 0; t < runs[0].files.size(); t++)
      if (!same_examples(runs[0].files[t], runs[k].files[t]))
        fail(
            "{}: {} and {} scored different examples (their tokenizers left out different "
            "lines); the paired test needs the same ones",
            runs[0].files[t].path, names[0], names[k]);
    std::printf(
        "\n%s against %s on the same questions (Δ in points; per task exact McNemar, the "
        "average by a paired bootstrap over all questions, 10 000 resamples):\n\n"
        "| task | n | Δ | only the first right | only this right | p | 95 %% interval |\n"
        "|---|---|---|---|---|---|---|\n",
        names[k].c_str(), names[0].c_str());
    const std::vector<SuiteComparison> cmp = compare_suite(results[0], results[k]);
    for (const SuiteComparison& c : cmp) {
      std::printf("| %s | %d | %+.2f | %d | %d | %.4g | %s |\n", c.task.c_str(), c.n, 100 * c.delta,
                  c.only_first, c.only_second, c.p,
                  std::isnan(c.low)
                      ? "–"
                      : fmt::format("[{:+.2f}, {:+.2f}]", 100 * c.low, 100 * c.high).c_str());
      nlohmann::json j = {{"task", c.task},
                          {"paired", {names[0], names[k]}},
                          {"n", c.n},
                          {"delta", c.delta},
                          {"only_first_right", c.only_first},
                          {"only_second_right", c.only_second},
                          {c.task == "average" ? "p_bootstrap" : "p_mcnemar", c.p}};
      if (!std::isnan(c.low)) j["ci95"] = {c.low, c.high};
      records.push_back(j);
    }
    const SuiteComparison& avg = cmp.back();
    std::printf("\n%s\n",
                avg.low > 0 ? fmt::format("On average {} beats {}: its 95 % interval lies above 0.",
                                          names[k], names[0])
                                  .c_str()
                : avg.high < 0
                    ? fmt::format("On average {} is worse than {}: its 95 % interval lies "
                                  "below 0.",
                                  names[k], names[0])
                          .c_str()
                    : fmt::format("On average no difference between {} and {} beyond "
                                  "chance: the 95 % interval holds 0.",
                                  names[k], names[0])
                          .c_str());
  }
}

}  // namespace

void add_eval_command(CLI::App& root) {
  auto* cmd = root.add_subcommand(
      "eval",
      "Score a checkpoint: validation loss/perplexity/bits per byte, the paper's eight tasks "
      "(ARC-Easy, BoolQ, HellaSwag, LAMBADA, OpenBookQA, PIQA, SocialIQA, WinoGrande), "
      "multiple choice");
  auto a = std::make_shared<EvalArgs>();
  add_eval_options(cmd, *a);
  cmd->callback([a, cmd] {
    check_args(*a);
    // Everything that can fail on bad input is read, for every checkpoint, before the first
    // forward pass.
    EvalArgs args = *a;
    if (smoke_test()) {
      args.limit = args.limit > 0 ? std::min(args.limit, 8) : 8;
      args.val_batches = args.val_batches > 0 ? std::min(args.val_batches, 2) : 2;
    }
    std::vector<TaskKind> kinds;
    if (!args.suite.empty()) {  // the suite's files, found once, then read per checkpoint
      const SuiteFiles suite = find_suite_files(args.dir, args.skip_bad_lines, args.limit);
      for (const std::string& note : suite.notes) std::fprintf(stderr, "%s\n", note.c_str());
      for (const TaskFile& f : suite.files) kinds.push_back(f.kind), args.files.push_back(f.path);
    } else {
      for (const std::string& t : args.tasks) kinds.push_back(parse_task_kind(t));
    }
    std::vector<Prepared> runs;
    for (const std::string& path : args.ckpts)
      runs.push_back(prepare(path, args, kinds, cmd->count("--batch") > 0));
    const int threads = set_thread_count(a->threads);
    const bool several = runs.size() > 1, tty = isatty(STDERR_FILENO);

    EvalOutput out;
    std::vector<std::vector<TaskResult>> results;
    for (const Prepared& p : runs)
      results.push_back(
          run_checkpoint(p, a->val_batches, threads, {a->device, a->precision}, several, tty, out));
    print_table(out.rows, several);
    if (!args.suite.empty()) {
      print_suite(runs, results, out.records);
    } else if (several && !kinds.empty()) {
      print_paired_tests(runs, kinds, results, out.records);
    }
    if (!a->json_path.empty()) {
      write_file_atomic(a->json_path, out.records.dump(2) + "\n");
      std::printf("\nwrote %s\n", a->json_path.c_str());
    }
  });
}

}  // namespace xsa::cli

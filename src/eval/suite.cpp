#include "xsa/eval/suite.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>

#include "xsa/util/error.h"
#include "xsa/util/fmt.h"
#include "xsa/util/stats.h"

namespace xsa {

namespace fs = std::filesystem;

const TaskKind kPaperTasks[8] = {TaskKind::arc_easy,   TaskKind::boolq,      TaskKind::hellaswag,
                                 TaskKind::lambada,    TaskKind::openbookqa, TaskKind::piqa,
                                 TaskKind::social_iqa, TaskKind::winogrande};

const char* harness_split(TaskKind kind) {
  switch (kind) {
    case TaskKind::arc_easy:
    case TaskKind::arc_challenge:
    case TaskKind::lambada:
    case TaskKind::openbookqa:
      return "test";
    default:
      return "validation";
  }
}

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = (char)std::tolower((unsigned char)c);
  return s;
}

bool names_split(const fs::path& path, const std::string& split) {
  const std::string name = lower(path.filename().string());
  if (split == "test") return name.find("test") != std::string::npos;
  for (const char* s : {"validation", "val", "dev"})
    if (name.find(s) != std::string::npos) return true;
  return false;
}

}  // namespace

SuiteFiles find_suite_files(const std::string& dir, bool skip_bad_lines, int limit) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail("--dir {}: no such folder", dir);
  std::vector<fs::path> paths;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec)) {
    const std::string ext = lower(e.path().extension().string());
    if (e.is_regular_file() && (ext == ".jsonl" || ext == ".json")) paths.push_back(e.path());
  }
  std::sort(paths.begin(), paths.end());
  SuiteFiles out;
  std::map<TaskKind, std::vector<fs::path>> by_task;
  for (const fs::path& p : paths) {
    const std::vector<TaskRecord> records = read_task_records(p.string());
    const auto first = std::find_if(records.begin(), records.end(),
                                    [](const TaskRecord& r) { return r.error.empty(); });
    if (first == records.end()) fail("{}: holds no JSON record", p.string());
    const TaskKind kind = task_kind_of(first->value, p.string());
    if (std::find(std::begin(kPaperTasks), std::end(kPaperTasks), kind) == std::end(kPaperTasks)) {
      out.notes.push_back(fmt::format("{}: {} is not one of the paper's tasks; left aside",
                                      p.string(), to_string(kind)));
      continue;
    }
    by_task[kind].push_back(p);
  }
  for (TaskKind kind : kPaperTasks) {
    std::vector<fs::path> found = by_task[kind];
    if (found.empty()) {
      out.notes.push_back(fmt::format("{}: no file in {}; skipped", to_string(kind), dir));
      continue;
    }
    if (found.size() > 1) {
      std::vector<fs::path> split;
      for (const fs::path& p : found)
        if (names_split(p, harness_split(kind))) split.push_back(p);
      if (split.size() != 1) {
        std::string names;
        for (const fs::path& p : found) names += (names.empty() ? "" : ", ") + p.string();
        fail(
            "{}: {} files ({}); lm-evaluation-harness scores the {} split: keep one file, or "
            "name it so",
            to_string(kind), found.size(), names, harness_split(kind));
      }
      for (const fs::path& p : found)
        if (p != split[0])
          out.notes.push_back(
              fmt::format("{}: another split of {}; left aside", p.string(), to_string(kind)));
      found = split;
    }
    out.files.push_back(load_task_file(kind, found[0].string(), skip_bad_lines, limit));
  }
  if (out.files.empty())
    fail(
        "--dir {}: holds none of the paper's eight tasks (ARC-Easy, BoolQ, HellaSwag, LAMBADA, "
        "OpenBookQA, PIQA, SocialIQA, WinoGrande)",
        dir);
  return out;
}

double suite_metric(const TaskResult& r) {
  return r.acc_norm >= 0 ? r.acc_norm : r.acc;
}

const char* suite_metric_name(TaskKind kind) {
  return kind != TaskKind::lambada && reports_acc_norm(kind) ? "acc_norm" : "acc";
}

const std::vector<uint8_t>& suite_correct(const TaskResult& r) {
  return r.correct_norm.empty() ? r.correct : r.correct_norm;
}

std::vector<SuiteComparison> compare_suite(const std::vector<TaskResult>& first,
                                           const std::vector<TaskResult>& second) {
  XSA_CHECK(first.size() == second.size(), "{} against {} tasks", first.size(), second.size());
  std::vector<SuiteComparison> out;
  std::vector<std::vector<double>> deltas;
  for (size_t t = 0; t < first.size(); t++) {
    const std::vector<uint8_t>&a = suite_correct(first[t]), &b = suite_correct(second[t]);
    XSA_CHECK(a.size() == b.size(), "{} against {} examples", a.size(), b.size());
    SuiteComparison c;
    c.task = first[t].task, c.n = (int)a.size();
    std::vector<double> d;
    for (size_t e = 0; e < a.size(); e++) {
      c.only_first += a[e] && !b[e], c.only_second += !a[e] && b[e];
      d.push_back((double)b[e] - (double)a[e]);
    }
    c.delta = suite_metric(second[t]) - suite_metric(first[t]);
    c.p = mcnemar_exact_p(c.only_first, c.only_second);
    c.low = c.high = NAN;
    deltas.push_back(std::move(d));
    out.push_back(c);
  }
  const BootstrapResult boot = paired_bootstrap_group_mean(deltas);
  SuiteComparison avg;
  avg.task = "average";
  for (const auto& c : out)
    avg.n += c.n, avg.only_first += c.only_first, avg.only_second += c.only_second;
  avg.delta = boot.mean, avg.p = boot.p, avg.low = boot.low, avg.high = boot.high;
  out.push_back(avg);
  return out;
}

std::string suite_table(const std::vector<std::string>& names,
                        const std::vector<std::vector<TaskResult>>& results) {
  // Both of a task's metrics where the harness reports both; the average over its reported one.
  std::string md = "| checkpoint |", rule = "|---|";
  bool lambada = false;
  for (const TaskResult& r : results.at(0)) {
    const TaskKind kind = parse_task_kind(r.task);
    md += fmt::format(" {} ({}) |", r.task, r.acc_norm >= 0 ? "acc / acc_norm" : "acc");
    rule += "---|";
    lambada = lambada || kind == TaskKind::lambada;
  }
  if (lambada) md += " lambada ppl |", rule += "---|";
  md += " average |\n" + rule + "---|\n";
  for (size_t k = 0; k < results.size(); k++) {
    md += "| " + names[k] + " |";
    double sum = 0, ppl = -1;
    for (const TaskResult& r : results[k]) {
      md += r.acc_norm >= 0 ? fmt::format(" {:.2f} / {:.2f} |", 100 * r.acc, 100 * r.acc_norm)
                            : fmt::format(" {:.2f} |", 100 * r.acc);
      sum += suite_metric(r);
      if (r.ppl >= 0) ppl = r.ppl;
    }
    if (lambada) md += fmt::format(" {:.2f} |", ppl);
    md += fmt::format(" {:.2f} |\n", 100 * sum / results[k].size());
  }
  return md;
}

}  // namespace xsa

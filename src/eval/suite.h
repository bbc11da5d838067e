// The paper's eight downstream tasks as one suite: the task files of a folder, each recognised by
// its fields, scored as lm-evaluation-harness v0.4 scores them, with each task's reported metric
// (acc_norm where the harness reports it, else acc) and the average over tasks.
#pragma once

#include <string>
#include <vector>

#include "xsa/eval/evaluate.h"
#include "xsa/eval/tasks.h"

namespace xsa {

// ARC-Easy, BoolQ, HellaSwag, LAMBADA, OpenBookQA, PIQA, SocialIQA, WinoGrande.
extern const TaskKind kPaperTasks[8];
// The split lm-evaluation-harness scores for a task: "test" or "validation".
const char* harness_split(TaskKind kind);

struct SuiteFiles {
  std::vector<TaskFile> files;     // in kPaperTasks order, the tasks found
  std::vector<std::string> notes;  // tasks missing, files left aside and why
};

// Every *.json / *.jsonl file under `dir`, recognised by the fields of its first record. Where a
// task has several files (the hub's splits), the one whose name holds the harness's split wins
// ("validation", "val" or "dev" / "test"); otherwise they are refused as ambiguous, named. Fails
// when no task of the suite is there.
SuiteFiles find_suite_files(const std::string& dir, bool skip_bad_lines, int limit = 0);

// The metric a task's column shows (acc_norm where the harness reports it, else acc; LAMBADA: acc)
// and per example whether it was right by that metric.
double suite_metric(const TaskResult& r);
const char* suite_metric_name(TaskKind kind);
const std::vector<uint8_t>& suite_correct(const TaskResult& r);

struct SuiteComparison {
  std::string task;  // a task, or "average"
  int n = 0;
  double delta = 0;  // the second minus the first, in the suite's metric
  int only_first = 0, only_second = 0;
  double p = 1;              // exact McNemar per task; paired bootstrap for the average
  double low = 0, high = 0;  // the average's 95 % interval (bootstrap)
};
// The second checkpoint against the first on the same examples: per task, then the average over
// tasks (a paired bootstrap over all questions of all tasks, 10 000 resamples).
std::vector<SuiteComparison> compare_suite(const std::vector<TaskResult>& first,
                                           const std::vector<TaskResult>& second);

// The paper's table in Markdown: a row per checkpoint, a column per task (acc, and acc_norm where
// the harness reports it), and the average over tasks of acc_norm where reported, else acc.
std::string suite_table(const std::vector<std::string>& names,
                        const std::vector<std::vector<TaskResult>>& results);

}  // namespace xsa

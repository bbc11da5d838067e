// Downstream task files (docs/SPEC.md §3), read line by line from jsonl:
//   hellaswag: {"ctx" or "activity_label"/"ctx_a"/"ctx_b", "endings": [...], "label"}, the context
//              and endings preprocessed as lm-evaluation-harness does;
//   mc:        {"context", "choices": [...], "label"}, a generic multiple-choice task;
//   lambada:   {"text"}, the last word (after the last space) is the answer.
// A malformed line is an error naming the file and line, or with skip_bad_lines is counted and left
// out.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace xsa {

enum class TaskKind { hellaswag, mc, lambada };
TaskKind parse_task_kind(const std::string& name);  // throws Error
const char* to_string(TaskKind kind);

struct TaskExample {
  std::string context;
  std::vector<std::string> choices;  // each scored as " " + choice; lambada: the last word alone
  int label = 0;                     // index of the right choice (lambada: 0)
  int line = 0;                      // 1-based line in the file
};

struct TaskFile {
  TaskKind kind = TaskKind::mc;
  std::string path;
  std::vector<TaskExample> examples;
  int skipped = 0;            // bad lines left out (skip_bad_lines)
  std::string first_skipped;  // "file:line: what" of the first of them
};

// Reads up to `limit` examples (0: all). Blank lines are ignored.
TaskFile load_task_file(TaskKind kind, const std::string& path, bool skip_bad_lines, int limit = 0);

// lm-evaluation-harness's HellaSwag preprocessing: strip, " [title]" → ". ", other [...] removed,
// double spaces replaced once (Python's str.replace).
std::string hellaswag_preprocess(std::string_view text);
// Python's str.capitalize for ASCII: the first character upper case, the rest lower case.
std::string capitalize(std::string_view text);
// Characters (Unicode code points) of UTF-8 text: the length acc_norm divides by.
int utf8_length(std::string_view text);

}  // namespace xsa

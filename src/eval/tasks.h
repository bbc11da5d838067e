// Downstream task files (docs/SPEC.md §3) in the formats the Hugging Face hub distributes them
// (JSON lines, or one JSON array), with the prompts lm-evaluation-harness v0.4 builds from them
// (lm_eval/tasks/<task>/*.yaml and utils.py; the paper's eight tasks):
//   arc_easy, arc_challenge: {"question", "choices": {"text", "label"}, "answerKey"}
//              "Question: {question}\nAnswer:" → each choice text; the answer is answerKey's
//              index among the labels (letters or digits)
//   boolq:     {"passage", "question", "label" 0/1 or "answer" true/false}
//              "{passage}\nQuestion: {question}?\nAnswer:" → "no" / "yes"
//   hellaswag: {"ctx" or "activity_label"/"ctx_a"/"ctx_b", "endings": [...], "label"}, the context
//              and endings preprocessed as lm-evaluation-harness does
//   lambada:   {"text"}, the last word (after the last space) is the answer (lambada_openai)
//   openbookqa: {"question_stem", "choices": {"text", "label"}, "answerKey"}
//              "{question_stem}" → each choice text
//   piqa:      {"goal", "sol1", "sol2", "label"} "Question: {goal}\nAnswer:" → sol1 / sol2
//   social_iqa: {"context", "question", "answerA", "answerB", "answerC", "label" "1"-"3"}
//              "Q: {context} {question}\nA:" → answerA / B / C
//   winogrande: {"sentence" with one "_", "option1", "option2", "answer" "1"/"2"}: the sentence
//              up to the blank with each option filled in is the context of that choice, and the
//              rest of the sentence (stripped) is the one continuation scored after each
//   mc:        {"context", "choices": [...], "label"}, a generic multiple-choice task
// A continuation is scored after the delimiter " " (lambada: " " + the last word). A malformed line
// is an error naming the file and line, or with skip_bad_lines is counted and left out.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace xsa {

enum class TaskKind {
  hellaswag,
  mc,
  lambada,
  arc_easy,
  arc_challenge,
  boolq,
  openbookqa,
  piqa,
  social_iqa,
  winogrande
};
TaskKind parse_task_kind(const std::string& name);  // throws Error
const char* to_string(TaskKind kind);
// Whether lm-evaluation-harness reports acc_norm for the task (besides acc).
bool reports_acc_norm(TaskKind kind);
// The task whose fields a record has (the first record of a file); throws Error naming the fields
// found when they match none. ARC's two sets share their fields: the file name tells them apart.
TaskKind task_kind_of(const nlohmann::json& record, const std::string& path);

struct TaskExample {
  std::string context;
  std::vector<std::string> choices;  // each scored as " " + choice; lambada: the last word alone
  int label = 0;                     // index of the right choice (lambada: 0)
  int line = 0;                      // 1-based line in the file (element, in a JSON array)
  // WinoGrande: a context per choice and one continuation, `target`, scored after each (then
  // `context` is their common text and `choices` the options).
  std::vector<std::string> choice_contexts;
  std::string target;
};

struct TaskFile {
  TaskKind kind = TaskKind::mc;
  std::string path;
  std::vector<TaskExample> examples;
  int skipped = 0;            // bad lines left out (skip_bad_lines)
  std::string first_skipped;  // "file:line: what" of the first of them
};

// Reads up to `limit` examples (0: all): JSON lines (blank lines are ignored) or, when the file
// starts with '[', one JSON array.
TaskFile load_task_file(TaskKind kind, const std::string& path, bool skip_bad_lines, int limit = 0);
// The same, the task told by the fields of the file's first record (task_kind_of).
TaskFile load_task_file(const std::string& path, bool skip_bad_lines, int limit = 0);
// The records of a task file (a JSON array's elements, or its lines), with their line numbers;
// a line that is not JSON is kept as a string with `error` set.
struct TaskRecord {
  int line = 0;
  nlohmann::json value;
  std::string error;
};
std::vector<TaskRecord> read_task_records(const std::string& path, int limit = 0);
// The same from a task file's bytes; `path` names it in errors (and tells ARC's sets apart).
std::vector<TaskRecord> task_records_from_text(std::string_view text, const std::string& path,
                                               int limit = 0);
TaskFile task_file_from_text(TaskKind kind, std::string_view text, const std::string& path,
                             bool skip_bad_lines, int limit = 0);
TaskFile task_file_from_text(std::string_view text, const std::string& path, bool skip_bad_lines,
                             int limit = 0);

// lm-evaluation-harness's HellaSwag preprocessing: strip, " [title]" → ". ", other [...] removed,
// double spaces replaced once (Python's str.replace).
std::string hellaswag_preprocess(std::string_view text);
// Python's str.capitalize for ASCII: the first character upper case, the rest lower case.
std::string capitalize(std::string_view text);
// Characters (Unicode code points) of UTF-8 text: the length acc_norm divides by.
int utf8_length(std::string_view text);

}  // namespace xsa

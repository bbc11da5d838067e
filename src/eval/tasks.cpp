#include "xsa/eval/tasks.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "xsa/util/error.h"

namespace xsa {

namespace {

constexpr TaskKind kAllKinds[] = {TaskKind::arc_easy,   TaskKind::arc_challenge,
                                  TaskKind::boolq,      TaskKind::hellaswag,
                                  TaskKind::lambada,    TaskKind::openbookqa,
                                  TaskKind::piqa,       TaskKind::social_iqa,
                                  TaskKind::winogrande, TaskKind::mc};

}  // namespace

TaskKind parse_task_kind(const std::string& name) {
  for (TaskKind k : kAllKinds)
    if (name == to_string(k)) return k;
  if (name == "lambada_openai") return TaskKind::lambada;
  if (name == "siqa") return TaskKind::social_iqa;
  std::string known;
  for (TaskKind k : kAllKinds) known += std::string(known.empty() ? "" : ", ") + to_string(k);
  fail("--task '{}' is not known (expected one of {})", name, known);
}

const char* to_string(TaskKind kind) {
  switch (kind) {
    case TaskKind::hellaswag:
      return "hellaswag";
    case TaskKind::mc:
      return "mc";
    case TaskKind::lambada:
      return "lambada";
    case TaskKind::arc_easy:
      return "arc_easy";
    case TaskKind::arc_challenge:
      return "arc_challenge";
    case TaskKind::boolq:
      return "boolq";
    case TaskKind::openbookqa:
      return "openbookqa";
    case TaskKind::piqa:
      return "piqa";
    case TaskKind::social_iqa:
      return "social_iqa";
    case TaskKind::winogrande:
      return "winogrande";
  }
  return "?";
}

bool reports_acc_norm(TaskKind kind) {
  switch (kind) {
    case TaskKind::arc_easy:
    case TaskKind::arc_challenge:
    case TaskKind::hellaswag:
    case TaskKind::openbookqa:
    case TaskKind::piqa:
    case TaskKind::mc:
      return true;
    default:
      return false;
  }
}

TaskKind task_kind_of(const nlohmann::json& r, const std::string& path) {
  auto has = [&](std::initializer_list<const char*> names) {
    if (!r.is_object()) return false;
    for (const char* n : names)
      if (!r.contains(n)) return false;
    return true;
  };
  if (has({"sentence", "option1", "option2", "answer"})) return TaskKind::winogrande;
  if (has({"goal", "sol1", "sol2"})) return TaskKind::piqa;
  if (has({"context", "question", "answerA", "answerB", "answerC"})) return TaskKind::social_iqa;
  if (has({"question_stem", "choices", "answerKey"})) return TaskKind::openbookqa;
  if (has({"question", "choices", "answerKey"})) {
    std::string name = std::filesystem::path(path).filename().string();
    for (char& c : name) c = (char)std::tolower((unsigned char)c);
    return name.find("challenge") != std::string::npos ? TaskKind::arc_challenge
                                                       : TaskKind::arc_easy;
  }
  if (has({"passage", "question"}) && (r.contains("label") || r.contains("answer")))
    return TaskKind::boolq;
  if (has({"endings"}) && (r.contains("ctx") || r.contains("ctx_a"))) return TaskKind::hellaswag;
  if (has({"context", "choices", "label"})) return TaskKind::mc;
  if (has({"text"})) return TaskKind::lambada;
  std::string fields;
  if (r.is_object())
    for (auto it = r.begin(); it != r.end(); ++it)
      fields += std::string(fields.empty() ? "" : ", ") + it.key();
  fail(
      "{}: its records' fields ({}) match no known task (ARC, BoolQ, HellaSwag, LAMBADA, "
      "OpenBookQA, PIQA, SocialIQA, WinoGrande, or mc: context, choices, label)",
      path, r.is_object() ? fields : "not a JSON object");
}

std::string capitalize(std::string_view text) {
  std::string out(text);
  for (size_t i = 0; i < out.size(); i++) {
    const unsigned char c = out[i];
    out[i] = (char)(i == 0 ? std::toupper(c) : std::tolower(c));
  }
  return out;
}

namespace {

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  std::string out;
  size_t at = 0;
  for (size_t hit; (hit = s.find(from, at)) != std::string::npos; at = hit + from.size())
    out.append(s, at, hit - at).append(to);
  return out.append(s, at);
}

std::string strip(std::string_view s) {
  const char* space = " \t\n\r\f\v";
  const size_t begin = s.find_first_not_of(space);
  if (begin == std::string_view::npos) return "";
  return std::string(s.substr(begin, s.find_last_not_of(space) - begin + 1));
}

}  // namespace

std::string hellaswag_preprocess(std::string_view text) {
  std::string s = replace_all(strip(text), " [title]", ". ");
  // re.sub("\\[.*?\\]", "", s): the shortest bracketed run, within one line.
  std::string out;
  for (size_t i = 0; i < s.size(); i++) {
    if (s[i] == '[') {
      const size_t close = s.find_first_of("]\n", i + 1);
      if (close != std::string::npos && s[close] == ']') {
        i = close;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return replace_all(out, "  ", " ");
}

int utf8_length(std::string_view text) {
  int n = 0;
  for (unsigned char c : text) n += (c & 0xC0) != 0x80;
  return n;
}

namespace {

// One line's problem; the caller adds the file and line.
struct BadLine {
  std::string what;
};

const nlohmann::json& field(const nlohmann::json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end()) throw BadLine{fmt::format("missing field '{}'", name)};
  return *it;
}

std::string string_field(const nlohmann::json& j, const char* name) {
  const nlohmann::json& v = field(j, name);
  if (!v.is_string()) throw BadLine{fmt::format("field '{}' must be a string", name)};
  return v.get<std::string>();
}

int label_field(const nlohmann::json& j, size_t choices) {
  const nlohmann::json& v = field(j, "label");
  long long label = -1;
  if (v.is_number_integer()) {
    label = v.get<long long>();
  } else if (v.is_string() && !v.get<std::string>().empty() &&
             v.get<std::string>().find_first_not_of("0123456789") == std::string::npos &&
             v.get<std::string>().size() < 10) {
    label = std::stoll(v.get<std::string>());  // HellaSwag on the Hugging Face hub: "2"
  } else {
    throw BadLine{fmt::format("'label' must be an integer, not {}", v.dump())};
  }
  if (label < 0 || label >= (long long)choices)
    throw BadLine{fmt::format("label {} is out of range for {} choices", label, choices)};
  return (int)label;
}

std::vector<std::string> choices_field(const nlohmann::json& j, const char* name) {
  const nlohmann::json& v = field(j, name);
  if (!v.is_array()) throw BadLine{fmt::format("field '{}' must be a list of strings", name)};
  if (v.size() < 2)
    throw BadLine{
        fmt::format("field '{}' has {} choice(s); at least 2 are needed", name, v.size())};
  std::vector<std::string> out;
  for (const auto& c : v) {
    if (!c.is_string()) throw BadLine{fmt::format("field '{}' must be a list of strings", name)};
    out.push_back(c.get<std::string>());
  }
  return out;
}

TaskExample parse_example(TaskKind kind, const nlohmann::json& j) {
  if (!j.is_object()) throw BadLine{"not a JSON object"};
  TaskExample ex;
  switch (kind) {
    case TaskKind::hellaswag: {
      // lm-evaluation-harness: activity_label + ": " + ctx_a + " " + ctx_b.capitalize(); files
      // without the parts (llm.c's) give "ctx" alone.
      if (j.contains("ctx_a") && j.contains("ctx_b") && j.contains("activity_label"))
        ex.context = string_field(j, "activity_label") + ": " + string_field(j, "ctx_a") + " " +
                     capitalize(string_field(j, "ctx_b"));
      else
        ex.context = string_field(j, "ctx");
      ex.context = hellaswag_preprocess(ex.context);
      ex.choices = choices_field(j, "endings");
      for (std::string& c : ex.choices) c = hellaswag_preprocess(c);
      ex.label = label_field(j, ex.choices.size());
      break;
    }
    case TaskKind::arc_easy:
    case TaskKind::arc_challenge:
    case TaskKind::openbookqa: {
      const bool arc = kind != TaskKind::openbookqa;
      ex.context = arc ? "Question: " + string_field(j, "question") + "\nAnswer:"
                       : string_field(j, "question_stem");
      const nlohmann::json& choices = field(j, "choices");
      if (!choices.is_object())
        throw BadLine{"field 'choices' must be an object with 'text' and 'label' lists"};
      ex.choices = choices_field(choices, "text");
      const std::vector<std::string> labels = choices_field(choices, "label");
      if (labels.size() != ex.choices.size())
        throw BadLine{
            fmt::format("{} choice texts but {} labels", ex.choices.size(), labels.size())};
      std::string key = string_field(j, "answerKey");
      if (!arc) key.erase(0, key.find_first_not_of(" \t\n\r\f\v"));  // answerKey.lstrip()
      const auto at = std::find(labels.begin(), labels.end(), key);
      if (at == labels.end())
        throw BadLine{fmt::format("answerKey '{}' is not one of the choice labels", key)};
      ex.label = (int)(at - labels.begin());
      break;
    }
    case TaskKind::boolq: {
      ex.context =
          string_field(j, "passage") + "\nQuestion: " + string_field(j, "question") + "?\nAnswer:";
      ex.choices = {"no", "yes"};
      if (j.contains("label")) {
        ex.label = label_field(j, 2);
      } else {
        const nlohmann::json& a = field(j, "answer");
        if (!a.is_boolean()) throw BadLine{"'answer' must be true or false"};
        ex.label = a.get<bool>() ? 1 : 0;
      }
      break;
    }
    case TaskKind::piqa:
      ex.context = "Question: " + string_field(j, "goal") + "\nAnswer:";
      ex.choices = {string_field(j, "sol1"), string_field(j, "sol2")};
      ex.label = label_field(j, 2);
      break;
    case TaskKind::social_iqa: {
      ex.context = "Q: " + string_field(j, "context") + " " + string_field(j, "question") + "\nA:";
      ex.choices = {string_field(j, "answerA"), string_field(j, "answerB"),
                    string_field(j, "answerC")};
      ex.label = label_field(j, 4) - 1;  // "1"-"3"
      if (ex.label < 0) throw BadLine{"label 0 is out of range: SocialIQA's labels are 1, 2, 3"};
      break;
    }
    case TaskKind::winogrande: {
      const std::string sentence = string_field(j, "sentence");
      const size_t blank = sentence.find('_');
      if (blank == std::string::npos) throw BadLine{"'sentence' has no blank '_'"};
      ex.choices = {string_field(j, "option1"), string_field(j, "option2")};
      ex.context = sentence.substr(0, blank);
      for (const std::string& option : ex.choices)
        ex.choice_contexts.push_back(ex.context + option);
      ex.target = strip(std::string_view(sentence).substr(blank + 1));
      if (ex.target.empty()) throw BadLine{"'sentence' ends at its blank: nothing to score"};
      const std::string answer = string_field(j, "answer");
      if (answer != "1" && answer != "2")
        throw BadLine{fmt::format("'answer' must be \"1\" or \"2\", not \"{}\"", answer)};
      ex.label = answer == "1" ? 0 : 1;
      break;
    }
    case TaskKind::mc:
      ex.context = string_field(j, "context");
      ex.choices = choices_field(j, "choices");
      ex.label = label_field(j, ex.choices.size());
      break;
    case TaskKind::lambada: {
      const std::string text = string_field(j, "text");
      const size_t space = text.rfind(' ');
      if (space == std::string::npos || space == 0 || space + 1 == text.size())
        throw BadLine{"'text' must end in a word after a space, with text before it"};
      ex.context = text.substr(0, space);
      ex.choices = {text.substr(space + 1)};
      ex.label = 0;
      break;
    }
  }
  return ex;
}

}  // namespace

std::vector<TaskRecord> read_task_records(const std::string& path, int limit) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open the task file", path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) fail("{}: read error", path);
  return task_records_from_text(text, path, limit);
}

std::vector<TaskRecord> task_records_from_text(std::string_view text, const std::string& path,
                                               int limit) {
  std::vector<TaskRecord> records;
  const size_t start = text.find_first_not_of(" \t\r\n");
  const bool array = !text.empty() && (text[0] == '[' || text[0] == ' ' || text[0] == '\n') &&
                     start != std::string_view::npos && text[start] == '[';
  if (array) {  // one JSON array
    nlohmann::json all;
    try {
      all = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      std::string what = e.what();
      fail("{}: not a valid JSON array ({})", path, what.substr(what.find(']') + 2));
    }
    for (size_t i = 0; i < all.size() && (limit <= 0 || (int)records.size() < limit); i++)
      records.push_back({(int)i + 1, std::move(all[i]), ""});
    return records;
  }
  int number = 0;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(at, end - at);
    at = end + 1, number++;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    TaskRecord r{number, {}, ""};
    try {
      r.value = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      std::string what = e.what();
      r.error = "not JSON (" + what.substr(what.find(']') + 2) + ")";
    }
    records.push_back(std::move(r));
  }
  return records;
}

namespace {

TaskFile parse_task_records(TaskKind kind, const std::string& path,
                            const std::vector<TaskRecord>& records, bool skip_bad_lines,
                            int limit) {
  TaskFile file;
  file.kind = kind, file.path = path;
  for (const TaskRecord& record : records) {
    if (limit > 0 && (int)file.examples.size() >= limit) break;
    try {
      if (!record.error.empty()) throw BadLine{record.error};
      TaskExample ex = parse_example(kind, record.value);
      ex.line = record.line;
      file.examples.push_back(std::move(ex));
    } catch (const BadLine& bad) {
      const std::string where = fmt::format("{}:{}: {}", path, record.line, bad.what);
      if (!skip_bad_lines) fail("{} (--skip-bad-lines leaves such lines out)", where);
      if (file.skipped++ == 0) file.first_skipped = where;
    }
  }
  if (file.examples.empty())
    fail("{}: no {} examples in it{}", path, to_string(kind),
         file.skipped ? fmt::format(" ({} bad lines left out)", file.skipped) : "");
  return file;
}

}  // namespace

TaskFile load_task_file(TaskKind kind, const std::string& path, bool skip_bad_lines, int limit) {
  return parse_task_records(kind, path, read_task_records(path), skip_bad_lines, limit);
}

TaskFile task_file_from_text(TaskKind kind, std::string_view text, const std::string& path,
                             bool skip_bad_lines, int limit) {
  return parse_task_records(kind, path, task_records_from_text(text, path), skip_bad_lines, limit);
}

namespace {

TaskFile task_file_of_records(const std::vector<TaskRecord>& records, const std::string& path,
                              bool skip_bad_lines, int limit) {
  const TaskRecord* first = nullptr;
  for (const TaskRecord& r : records)
    if (r.error.empty()) {
      first = &r;
      break;
    }
  if (!first) fail("{}: holds no JSON record", path);
  return parse_task_records(task_kind_of(first->value, path), path, records, skip_bad_lines, limit);
}

}  // namespace

TaskFile load_task_file(const std::string& path, bool skip_bad_lines, int limit) {
  return task_file_of_records(read_task_records(path), path, skip_bad_lines, limit);
}

TaskFile task_file_from_text(std::string_view text, const std::string& path, bool skip_bad_lines,
                             int limit) {
  return task_file_of_records(task_records_from_text(text, path), path, skip_bad_lines, limit);
}

}  // namespace xsa

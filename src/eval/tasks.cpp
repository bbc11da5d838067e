#include "xsa/eval/tasks.h"

#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>

#include "xsa/util/error.h"

namespace xsa {

TaskKind parse_task_kind(const std::string& name) {
  if (name == "hellaswag") return TaskKind::hellaswag;
  if (name == "mc") return TaskKind::mc;
  if (name == "lambada") return TaskKind::lambada;
  fail("--task '{}' is not known (expected hellaswag, mc or lambada)", name);
}

const char* to_string(TaskKind kind) {
  switch (kind) {
    case TaskKind::hellaswag:
      return "hellaswag";
    case TaskKind::mc:
      return "mc";
    case TaskKind::lambada:
      return "lambada";
  }
  return "?";
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

TaskFile load_task_file(TaskKind kind, const std::string& path, bool skip_bad_lines, int limit) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open the task file", path);
  TaskFile file;
  file.kind = kind, file.path = path;
  std::string line;
  for (int number = 1; std::getline(in, line); number++) {
    if (limit > 0 && (int)file.examples.size() >= limit) break;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    try {
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception& e) {
        std::string what = e.what();
        throw BadLine{"not JSON (" + what.substr(what.find(']') + 2) + ")"};
      }
      TaskExample ex = parse_example(kind, j);
      ex.line = number;
      file.examples.push_back(std::move(ex));
    } catch (const BadLine& bad) {
      const std::string where = fmt::format("{}:{}: {}", path, number, bad.what);
      if (!skip_bad_lines) fail("{} (--skip-bad-lines leaves such lines out)", where);
      if (file.skipped++ == 0) file.first_skipped = where;
    }
  }
  if (in.bad()) fail("{}: read error", path);
  if (file.examples.empty())
    fail("{}: no {} examples in it{}", path, to_string(kind),
         file.skipped ? fmt::format(" ({} bad lines left out)", file.skipped) : "");
  return file;
}

}  // namespace xsa

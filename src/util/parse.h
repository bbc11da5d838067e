// Text read from the command line: a number that must be the whole text (std::stod alone takes
// "3x" as 3 and throws its own message on "x"), and lists.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace xsa {

inline std::optional<double> parse_number(const std::string& text) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used == 0 || used != text.size()) return std::nullopt;
  return v;
}

// "a,b,,c" → {"a", "b", "", "c"}: every item, empty ones too (the caller names what is wrong).
inline std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> items;
  for (size_t pos = 0;;) {
    const size_t next = text.find(separator, pos);
    items.push_back(text.substr(pos, next == std::string::npos ? std::string::npos : next - pos));
    if (next == std::string::npos) return items;
    pos = next + 1;
  }
}

}  // namespace xsa

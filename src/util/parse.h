// Numbers read from the command line: the whole text must be one number (std::stod alone takes
// "3x" as 3 and throws its own message on "x").
#pragma once

#include <optional>
#include <stdexcept>
#include <string>

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

}  // namespace xsa

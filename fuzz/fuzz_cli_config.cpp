// `xsa train --config FILE` (src/tools/main.cpp): the file's `key = value` lines are read by
// CLI11's TOML/INI parser, whose refusal is a CLI::ParseError (the tool turns it into one line).
#include <CLI/CLI.hpp>
#include <sstream>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  try {
    for (const CLI::ConfigItem& item : CLI::ConfigTOML().from_config(in)) (void)item.fullname();
  } catch (const CLI::ParseError&) {
  }
  return 0;
}

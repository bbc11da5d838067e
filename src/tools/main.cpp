// xsa: train, compare, analyze, evaluate and sample GPT models with standard or exclusive self
// attention.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "xsa/tools/commands.h"
#include "xsa/util/blas.h"
#include "xsa/util/error.h"

namespace {

// `xsa CMD --config FILE ...`: the file's `key = value` lines (TOML or INI, read by CLI11's own
// parser) become `--key value` arguments placed before the command line's, so the command line
// wins. Done here because CLI11 2.1 does not apply config files given to a subcommand.
std::vector<std::string> expand_config_file(std::vector<std::string> args) {
  if (args.size() < 2 || args[1] != "train")
    return args;  // (bench's --config names a model config)
  for (size_t i = 2; i < args.size(); i++) {
    std::string path;
    size_t erase = 0;
    if (args[i] == "--config" && i + 1 < args.size())
      path = args[i + 1], erase = 2;
    else if (args[i].rfind("--config=", 0) == 0)
      path = args[i].substr(9), erase = 1;
    if (path.empty()) continue;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) xsa::fail("--config {}: no such file", path);
    std::vector<CLI::ConfigItem> items;
    try {
      items = CLI::ConfigTOML().from_file(path);
    } catch (const CLI::ParseError& e) {
      xsa::fail("--config {}: {}", path, e.what());
    }
    std::vector<std::string> from_file;
    for (const CLI::ConfigItem& item : items) {
      if (item.name == "++" || item.name == "--" || item.inputs.empty())
        continue;  // section markers
      if (item.inputs.size() == 1 && (item.inputs[0] == "true" || item.inputs[0] == "false")) {
        if (item.inputs[0] == "true") from_file.push_back("--" + item.name);
        continue;
      }
      from_file.push_back("--" + item.name);
      for (const std::string& v : item.inputs) from_file.push_back(v);
    }
    args.erase(args.begin() + i, args.begin() + i + erase);
    args.insert(args.begin() + 2, from_file.begin(), from_file.end());  // after `xsa CMD`
    break;
  }
  return args;
}

}  // namespace

int main(int argc, char** argv) {
  xsa::ensure_fast_blas(argv);
  CLI::App app{"xsa: GPT models with exclusive self attention (XSA) vs standard attention (SA)",
               "xsa"};
  app.set_version_flag("--version", "xsa 0.1.0");
  app.require_subcommand(1);
  xsa::cli::add_train_command(app);
  xsa::cli::add_info_command(app);
  xsa::cli::add_prepare_command(app);
  xsa::cli::add_compare_command(app);
  xsa::cli::add_analyze_command(app);
  xsa::cli::add_sweep_command(app);
  xsa::cli::add_eval_command(app);
  xsa::cli::add_sample_command(app);
  xsa::cli::add_bench_command(app);
  xsa::cli::add_tokenize_command(app);
  try {
    std::vector<std::string> args = expand_config_file(std::vector<std::string>(argv, argv + argc));
    args.erase(args.begin());
    std::reverse(args.begin(), args.end());  // CLI11 takes the arguments last first
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const xsa::Error& e) {
    std::fprintf(stderr, "xsa: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "xsa: error: out of memory (try a smaller --batch, --seq-len or model)\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "xsa: error: %s\n", e.what());
    return 1;
  }
  return 0;
}

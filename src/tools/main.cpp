// xsa: train, compare, analyze, evaluate and sample GPT models with standard or exclusive self
// attention.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "xsa/dist/agree.h"
#include "xsa/tools/commands.h"
#include "xsa/util/blas.h"
#include "xsa/util/error.h"
#include "xsa/util/signals.h"

namespace {

// `xsa CMD --config FILE ...` for the commands that train (train, compare, sweep): the file's
// `key = value` lines (TOML or INI, read by CLI11's own parser) become `--key value` arguments
// placed before the command line's, so the command line wins; a key that is not an option of CMD
// is refused with the file's name. Done here because CLI11 2.1 does not apply config files given
// to a subcommand.
std::vector<std::string> expand_config_file(std::vector<std::string> args, const CLI::App& app) {
  if (args.size() < 2 || (args[1] != "train" && args[1] != "compare" && args[1] != "sweep"))
    return args;  // (bench's --config names a model config)
  const CLI::App* command = app.get_subcommand(args[1]);
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
      if (item.name == "config" || !command->get_option_no_throw("--" + item.name))
        xsa::fail("--config {}: '{}' is not an option of xsa {} (xsa {} --help lists them)", path,
                  item.name, args[1], args[1]);
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

// Reports an error and ends the process. In a job of several processes an error every rank holds
// (AgreedError) is printed by rank 0 and each rank leaves the job normally; an error of one rank
// is printed with its rank and ends the whole job, so that no rank waits forever in a collective.
int fail_with(const char* message, bool agreed) {
  xsa::Comm& comm = xsa::world_comm();
  if (comm.size() == 1) {
    std::fprintf(stderr, "xsa: error: %s\n", message);
    xsa::leave_job();
    return 1;
  }
  if (agreed) {
    if (comm.is_root()) std::fprintf(stderr, "xsa: error: %s\n", message);
    xsa::leave_job();
    return 1;
  }
  std::fprintf(stderr, "xsa: error: rank %d: %s\n", comm.rank(), message);
  xsa::abort_job(1);
}

// The commands that run data-parallel under mpirun; the others run in one process.
bool runs_in_parallel(const std::string& command) {
  return command == "train" || command == "compare" || command == "sweep" || command == "bench";
}

int main(int argc, char** argv) {
  // A file-size limit (ulimit -f) then fails the write with EFBIG, which is reported with the
  // path, instead of killing the process mid-write.
  std::signal(SIGXFSZ, SIG_IGN);
  xsa::ensure_fast_blas(argv);
  try {
    xsa::join_launched_job(&argc, &argv);
  } catch (const xsa::Error& e) {
    return fail_with(e.what(), false);
  }
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
  xsa::cli::add_import_command(app);
  xsa::cli::add_export_command(app);
  xsa::cli::add_bench_command(app);
  xsa::cli::add_board_command(app);
  xsa::cli::add_tokenizer_command(app);
  xsa::cli::add_tokenize_command(app);  // encode and decode under tokenizer, and tokenize
  const xsa::Comm& comm = xsa::world_comm();
  try {
    std::vector<std::string> args =
        expand_config_file(std::vector<std::string>(argv, argv + argc), app);
    if (comm.size() > 1 && args.size() > 1 && args[1].rfind("-", 0) != 0 &&
        !runs_in_parallel(args[1]))
      throw xsa::AgreedError(fmt::format(
          "xsa {} runs in one process; start it without mpirun (train, compare, sweep and bench "
          "run data-parallel)",
          args[1]));
    args.erase(args.begin());
    std::reverse(args.begin(), args.end());  // CLI11 takes the arguments last first
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    // Every rank parses the same command line, so rank 0 speaks for all: --help and --version as
    // CLI11 prints them, a bad option or value in one line, as every other bad input.
    // Exit status 1, as every other bad input's (CLI11's own codes tell nothing more a script
    // could use).
    int code = e.get_exit_code();
    if (code == 0 || !comm.is_root()) {
      code = comm.is_root() ? app.exit(e) : code;
    } else {
      std::fprintf(stderr, "xsa: error: %s (--help lists the options)\n", e.what());
      code = 1;
    }
    xsa::leave_job();
    return code;
  } catch (const xsa::Interrupted& e) {
    // Every rank stopped at the same step (agreed_stop_signal), so rank 0 speaks for all.
    if (comm.is_root())
      std::fprintf(stderr, "xsa: interrupted by %s: %s\n", xsa::signal_name(e.signal).c_str(),
                   e.what());
    xsa::leave_job();
    return 128 + e.signal;
  } catch (const xsa::AgreedError& e) {
    return fail_with(e.what(), true);
  } catch (const xsa::Error& e) {
    return fail_with(e.what(), false);
  } catch (const std::bad_alloc&) {
    return fail_with("out of memory (try a smaller --batch, --seq-len or model)", false);
  } catch (const std::exception& e) {
    return fail_with(e.what(), false);
  }
  xsa::leave_job();
  return 0;
}

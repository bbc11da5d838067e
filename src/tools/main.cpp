// xsa: train, inspect (and, as the project grows, compare, analyze, evaluate, sample) GPT models
// with standard or exclusive self attention.
#include <cstdio>
#include <exception>

#include "tools/commands.h"
#include "util/error.h"

int main(int argc, char** argv) {
  CLI::App app{"xsa: GPT models with exclusive self attention (XSA) vs standard attention (SA)", "xsa"};
  app.set_version_flag("--version", "xsa 0.1.0");
  app.require_subcommand(1);
  xsa::cli::add_train_command(app);
  xsa::cli::add_info_command(app);
  try {
    app.parse(argc, argv);
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

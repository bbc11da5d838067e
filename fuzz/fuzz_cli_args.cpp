// The command line of `xsa train` (src/tools/options.cpp and the option tables): the input is the
// arguments, one per line. Every option is declared as the tool declares it, parsed by CLI11 with
// each option's limits, then the values are checked as train checks them (the model, the run, the
// attention grammar) without allocating the model. A refusal is a CLI::ParseError or an
// xsa::Error; anything else is a finding. An accepted command line holds values within every
// option's stated maximum.
#include <CLI/CLI.hpp>
#include <sstream>

#include "fuzz_common.h"
#include "xsa/model/model_config.h"
#include "xsa/options/model_options.h"
#include "xsa/options/run_config.h"
#include "xsa/tools/commands.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args;
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  for (std::string line; std::getline(in, line) && args.size() < 64;) args.push_back(line);
  CLI::App app{"fuzz"};
  xsa::ModelConfig model;
  xsa::RunConfig run;
  std::string attn = "xsa";
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  xsa::cli::add_training_options(&app, run);
  xsa::cli::add_model_options(&app, model);
  app.add_option("--attn", attn);
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments last first
  try {
    app.parse(args);
  } catch (const CLI::ParseError&) {
    return 0;
  } catch (const xsa::Error&) {  // an option's own check (--arch's value), one line as in xsa
    return 0;
  }
  XSA_FUZZ_EXPECT(model.n_layer >= 1 && model.n_layer <= xsa::kMaxLayers);
  XSA_FUZZ_EXPECT(model.n_embd <= xsa::kMostWidth && model.seq_len <= xsa::kMostSequence);
  XSA_FUZZ_EXPECT(run.batch >= 1 && run.batch <= xsa::kMostRows);
  (void)xsa::fuzz::accepts([&] {
    xsa::set_attention(model, attn);
    model.vocab_size = 256, model.padded_vocab = 256;
    model.validate();
    if (run.data.empty()) run.data = "x";
    run.validate();
    (void)xsa::parameter_count(model);
  });
  return 0;
}

// A checkpoint's trainer.json as resume reads its run settings (src/options/run_config.*): its "run"
// object overlaid onto a RunConfig or refused; the settings read survive to_json → read unchanged.
#include <nlohmann/json.hpp>

#include "fuzz_common.h"
#include "xsa/options/run_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace xsa;
  const nlohmann::json state = nlohmann::json::parse(data, data + size, nullptr, false);
  if (state.is_discarded()) return 0;
  const nlohmann::json& run = state.is_object() && state.contains("run") ? state["run"] : state;
  fuzz::accepts([&] {
    RunConfig r;
    run_config_update_from_json(r, run, "trainer.json");
    fuzz::accepts([&] {
      r.validate();
      (void)r.accumulation_steps(64, 1);
    });
    const nlohmann::json written = run_config_to_json(r, kSaved);
    RunConfig again;
    run_config_update_from_json(again, written, "written trainer.json");
    XSA_FUZZ_EXPECT(run_config_to_json(again, kSaved) == written);
  });
  return 0;
}

// A checkpoint's config.json (src/model/config.*): read or refused; an accepted config is valid,
// its parameters countable, and it survives to_json → read unchanged.
#include <nlohmann/json.hpp>

#include "fuzz_common.h"
#include "xsa/model/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace xsa;
  const nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, false);
  if (j.is_discarded()) return 0;
  fuzz::accepts([&] {
    const ModelConfig cfg = model_config_from_json(j, "config.json");
    cfg.validate();
    XSA_FUZZ_EXPECT(parameter_count(cfg) > 0);
    nlohmann::json written;
    to_json(written, cfg);
    const ModelConfig again = model_config_from_json(written, "written config.json");
    nlohmann::json rewritten;
    to_json(rewritten, again);
    XSA_FUZZ_EXPECT(written == rewritten);
    XSA_FUZZ_EXPECT(layer_attn_string(again) == layer_attn_string(cfg));
  });
  return 0;
}

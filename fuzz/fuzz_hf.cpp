// A Hugging Face GPT-2 checkpoint (src/io/interop.*: import_hf). The input is config.json, a NUL
// byte (which JSON text cannot hold), then model.safetensors; read into xsa's layout or refused.
#include <cstring>

#include "fuzz_common.h"
#include "xsa/io/interop.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace xsa;
  const auto* nul = static_cast<const uint8_t*>(std::memchr(data, 0, size));
  const size_t split = nul ? (size_t)(nul - data) : size;
  const std::string config(reinterpret_cast<const char*>(data), split);
  std::string safetensors(reinterpret_cast<const char*>(data) + (nul ? split + 1 : size),
                          nul ? size - split - 1 : 0);
  fuzz::accepts([&] {
    const ForeignModel m =
        import_hf_bytes(config, "config.json", std::move(safetensors), "model.safetensors");
    XSA_FUZZ_EXPECT(m.params.size() == (size_t)param_arena_size(param_layout(m.cfg)));
  });
  return 0;
}

// The attention grammar (parse_attention, src/model/attention.*) that --attn, compare's --variants
// and config files read: the first two bytes pick the layer count (0 to 999: past kMaxLayers too),
// the rest is the spec. An accepted spec fills exactly the model's layers and is written back by
// attention_string into a spec that parses to the same layers.
#include "fuzz_common.h"
#include "xsa/model/attention.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const int n_layer = (data[0] | data[1] << 8) % 1000;
  const std::string spec(reinterpret_cast<const char*>(data) + 2, size - 2);
  xsa::AttentionLayers layers{};
  if (!xsa::fuzz::accepts([&] { layers = xsa::parse_attention(spec, n_layer, "--attn"); }))
    return 0;
  XSA_FUZZ_EXPECT(n_layer >= 1 && n_layer <= xsa::kMaxLayers);
  const std::string written = xsa::attention_string(layers, n_layer);
  xsa::AttentionLayers again{};
  XSA_FUZZ_EXPECT(
      xsa::fuzz::accepts([&] { again = xsa::parse_attention(written, n_layer, "--attn"); }));
  for (int l = 0; l < n_layer; l++) XSA_FUZZ_EXPECT(again[l] == layers[l]);
  return 0;
}

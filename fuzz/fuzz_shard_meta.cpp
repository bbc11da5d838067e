// A shard folder's meta.json (src/data/dataset.*: the tokenizer it names): read or refused.
#include "fuzz_common.h"
#include "xsa/data/dataset.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  xsa::fuzz::accepts([&] { (void)xsa::tokenizer_of_meta(text, "meta.json"); });
  return 0;
}

// llm.c's model file (src/io/interop.*: import_llmc): read into xsa's layout or refused; the size
// check comes before any allocation of the model it claims.
#include "fuzz_common.h"
#include "xsa/io/interop.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace xsa;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  fuzz::accepts([&] {
    const ForeignModel m = import_llmc_bytes(bytes, "gpt2.bin");
    XSA_FUZZ_EXPECT(m.params.size() == (size_t)param_arena_size(param_layout(m.cfg)));
  });
  return 0;
}

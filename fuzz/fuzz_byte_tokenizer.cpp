// The byte tokenizer (src/tokenizer/byte_tokenizer.*): decode(encode(x)) == x for any bytes, and
// any int32 ids decode or are refused.
#include <cstring>
#include <vector>

#include "fuzz_common.h"
#include "xsa/tokenizer/byte_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace xsa;
  const ByteTokenizer tok;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::vector<int32_t> ids = tok.encode(text);
  XSA_FUZZ_EXPECT(ids.size() == size);
  XSA_FUZZ_EXPECT(tok.decode(ids) == text);
  std::vector<int32_t> raw(size / 4);
  if (!raw.empty()) std::memcpy(raw.data(), data, raw.size() * 4);
  fuzz::accepts([&] { XSA_FUZZ_EXPECT(tok.decode(raw).size() == raw.size()); });
  return 0;
}

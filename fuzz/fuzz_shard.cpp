// Token shards in llm.c's format (src/data/shards.*): a header is accepted or refused, and an
// accepted shard's tokens encode back to the same bytes (with the header's unused ints zero).
#include <cstring>

#include "fuzz_common.h"
#include "xsa/data/shards.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace xsa;
  fuzz::accepts([&] {
    const size_t count = shard_token_count(data, size, "fuzz.bin");
    XSA_FUZZ_EXPECT(size == kShardHeaderInts * 4 + count * 2);
    std::vector<uint16_t> tokens(count);
    if (count) std::memcpy(tokens.data(), data + kShardHeaderInts * 4, count * 2);
    const std::string again = encode_shard(tokens.data(), count);
    XSA_FUZZ_EXPECT(again.size() == size);
    XSA_FUZZ_EXPECT(std::memcmp(again.data(), data, 12) == 0);  // magic, version, count
    XSA_FUZZ_EXPECT(std::memcmp(again.data() + 1024, data + 1024, size - 1024) == 0);
  });
  return 0;
}

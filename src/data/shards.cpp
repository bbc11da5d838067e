#include "xsa/data/shards.h"

#include <bit>
#include <cstring>

#include "xsa/util/error.h"

namespace xsa {

static_assert(std::endian::native == std::endian::little, "shards are little-endian");

std::string encode_shard(const uint16_t* tokens, size_t n) {
  int32_t header[kShardHeaderInts] = {};
  header[0] = kShardMagic, header[1] = kShardVersion;
  XSA_CHECK(n <= (size_t)INT32_MAX, "a shard holds at most 2^31 − 1 tokens, not {}", n);
  header[2] = (int32_t)n;
  std::string bytes(sizeof header + n * sizeof(uint16_t), '\0');
  std::memcpy(bytes.data(), header, sizeof header);
  if (n) std::memcpy(bytes.data() + sizeof header, tokens, n * sizeof(uint16_t));
  return bytes;
}

size_t shard_token_count(const unsigned char* data, size_t size, const std::string& name) {
  if (size < kShardHeaderInts * 4)
    fail("{}: {} bytes, too short for the 1024-byte shard header", name, size);
  int32_t header[3];
  std::memcpy(header, data, sizeof header);
  if (header[0] != kShardMagic)
    fail("{}: magic number {} is not a token shard's ({})", name, header[0], kShardMagic);
  if (header[1] != kShardVersion)
    fail("{}: shard version {} is not supported (only {})", name, header[1], kShardVersion);
  if (header[2] < 0) fail("{}: negative token count {} in the header", name, header[2]);
  const size_t count = (size_t)header[2];
  const size_t expected = kShardHeaderInts * 4 + count * 2;
  if (size != expected)
    fail("{}: {} bytes, but its header's {} tokens need {}", name, size, count, expected);
  return count;
}

Shard::Shard(const std::filesystem::path& path) : file_(path) {
  count_ = shard_token_count(file_.data(), file_.size(), path.string());
  tokens_ = reinterpret_cast<const uint16_t*>(file_.data() + kShardHeaderInts * 4);
}

}  // namespace xsa

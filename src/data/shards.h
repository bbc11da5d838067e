// Token shards in llm.c's format (docs/SPEC.md §3): a header of 256 little-endian int32 —
// [0] magic 20240520, [1] version 1, [2] token count — then the tokens as little-endian uint16.
// FineWeb and TinyStories shards made by llm.c's scripts load unchanged.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "xsa/util/files.h"

namespace xsa {

inline constexpr int32_t kShardMagic = 20240520;
inline constexpr int32_t kShardVersion = 1;
inline constexpr size_t kShardHeaderInts = 256;

// The bytes of a shard holding `tokens` (every id must fit in uint16).
std::string encode_shard(const uint16_t* tokens, size_t n);

// The token count of a shard's bytes after checking its header: magic, version, and a size that
// agrees with the count. Errors name `name`.
size_t shard_token_count(const unsigned char* data, size_t size, const std::string& name);

// A memory-mapped shard, its header checked: magic, version, and a size that agrees with the
// token count. Errors name the file.
class Shard {
 public:
  explicit Shard(const std::filesystem::path& path);
  const uint16_t* tokens() const { return tokens_; }
  size_t size() const { return count_; }
  const std::filesystem::path& path() const { return file_.path(); }

 private:
  MappedFile file_;
  const uint16_t* tokens_ = nullptr;
  size_t count_ = 0;
};

}  // namespace xsa

// The byte tokenizer: token = byte value. No end-of-text token.
#include "xsa/tokenizer/byte_tokenizer.h"

#include "xsa/util/error.h"

namespace xsa {

void ByteTokenizer::encode(std::string_view text, std::vector<int32_t>& out) const {
  for (unsigned char c : text) out.push_back(c);
}

std::string ByteTokenizer::decode(const int32_t* ids, size_t n) const {
  std::string s;
  s.reserve(n);
  for (size_t i = 0; i < n; i++) {
    if (ids[i] < 0 || ids[i] > 255) fail("token id {} is not a byte (0..255)", ids[i]);
    s.push_back((char)ids[i]);
  }
  return s;
}

}  // namespace xsa

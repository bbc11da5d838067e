// GPT-2's tokenizer (src/tokenizer/gpt2_tokenizer.*): decode(encode(x)) == x for any bytes, every
// id inside the vocabulary, and any int32 ids decode or are refused. Needs GPT-2's vocabulary
// (bash scripts/get_data.sh --vocab-only), found as the tool finds it: $XSA_VOCAB_DIR, ./data/gpt2,
// then this source tree's data/gpt2.
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "fuzz_common.h"
#include "xsa/tokenizer/tokenizer.h"

namespace {
std::unique_ptr<xsa::Tokenizer> g_tok;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("XSA_VOCAB_DIR", XSA_FUZZ_VOCAB_DIR, /*overwrite=*/0);
  try {
    g_tok = xsa::make_tokenizer(xsa::TokenizerKind::gpt2);
  } catch (const xsa::Error& e) {
    std::fprintf(stderr, "fuzz_gpt2_tokenizer: %s\n", e.what());
    std::exit(1);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace xsa;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::vector<int32_t> ids = g_tok->encode(text);
  XSA_FUZZ_EXPECT(ids.size() <= size);
  for (int32_t id : ids) XSA_FUZZ_EXPECT(id >= 0 && id < g_tok->vocab_size());
  XSA_FUZZ_EXPECT(g_tok->decode(ids) == text);
  std::vector<int32_t> raw(size / 4);
  if (!raw.empty()) std::memcpy(raw.data(), data, raw.size() * 4);
  fuzz::accepts([&] { (void)g_tok->decode(raw); });
  return 0;
}

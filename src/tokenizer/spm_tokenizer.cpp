#include "xsa/tokenizer/spm_tokenizer.h"

#include "xsa/util/error.h"
#include "xsa/util/files.h"
#include "xsa/util/fmt.h"
#ifdef XSA_WITH_SENTENCEPIECE
#include <sentencepiece_processor.h>
#endif

namespace xsa {

namespace fs = std::filesystem;

std::string fnv1a_hex(std::string_view bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return fmt::format("{:016x}", h);
}

std::vector<fs::path> spm_vocabulary_files(const fs::path& dir) {
  std::vector<fs::path> files = {dir / "tokenizer.model"};
  std::error_code ec;
  if (fs::exists(dir / "tokenizer.json", ec)) files.push_back(dir / "tokenizer.json");
  return files;
}

bool sentencepiece_available(std::string* why) {
#ifdef XSA_WITH_SENTENCEPIECE
  return true;
#else
  if (why)
    *why =
        "this build has no SentencePiece: install libsentencepiece-dev (bash scripts/setup.sh) "
        "and build again";
  return false;
#endif
}

#ifdef XSA_WITH_SENTENCEPIECE

namespace {

// The length of the valid UTF-8 sequence at s[i] (1 to 4), or 0 when it is not one (a stray
// continuation byte, a truncated or overlong sequence, a surrogate or a code point past U+10FFFF).
size_t utf8_length(std::string_view s, size_t i) {
  const unsigned char c = (unsigned char)s[i];
  if (c < 0x80) return 1;
  size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
  if (n == 0 || c > 0xF4 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; k++)
    if (((unsigned char)s[i + k] & 0xC0) != 0x80) return 0;
  const unsigned char d = (unsigned char)s[i + 1];
  if ((c == 0xE0 && d < 0xA0) || (c == 0xED && d > 0x9F) || (c == 0xF0 && d < 0x90) ||
      (c == 0xF4 && d > 0x8F))
    return 0;
  return n;
}

}  // namespace

std::string spm_vocabulary_checksum(const sentencepiece::SentencePieceProcessor& sp) {
  std::string all;
  for (int id = 0; id < sp.GetPieceSize(); id++)
    all +=
        fmt::format("{}\t{}\t{}{}{}\n", sp.IdToPiece(id), sp.GetScore(id), sp.IsByte(id) ? "b" : "",
                    sp.IsControl(id) ? "c" : "", sp.IsUnknown(id) ? "u" : "");
  return fnv1a_hex(all);
}

SpmTokenizer::SpmTokenizer(const fs::path& dir)
    : dir_(dir), sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  const fs::path model = dir / "tokenizer.model";
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    fail("--tokenizer spm:{}: no such folder (xsa tokenizer train makes one)", dir.string());
  if (!fs::exists(model, ec))
    fail("{}: no such file (a vocabulary folder holds tokenizer.model and tokenizer.json)",
         model.string());
  const std::string bytes = read_file(model);
  const auto status = sp_->LoadFromSerializedProto(bytes);
  if (!status.ok()) fail("{}: not a SentencePiece model ({})", model.string(), status.ToString());
  vocab_size_ = sp_->GetPieceSize();
  end_of_text_ = sp_->eos_id();
  byte_piece_.fill(-1);
  checksum_ = spm_vocabulary_checksum(*sp_);
  surface_.resize((size_t)vocab_size_);
  for (int id = 0; id < vocab_size_; id++) {
    if (sp_->IsControl(id)) continue;  // <s>, </s>: no text
    if (sp_->IsUnknown(id)) {
      surface_[(size_t)id] = " \xE2\x81\x87 ";  // SentencePiece's own text for <unk>
      continue;
    }
    std::string piece = sp_->IdToPiece(id);
    if (sp_->IsByte(id)) {  // <0xNN>
      const int b = std::stoi(piece.substr(3, 2), nullptr, 16);
      byte_piece_[(size_t)b] = id;
      surface_[(size_t)id] = std::string(1, (char)b);
      continue;
    }
    std::string text;  // ▁ (E2 96 81) is a space
    for (size_t i = 0; i < piece.size(); i++) {
      if (piece.compare(i, 3, "\xE2\x96\x81") == 0) {
        text += ' ';
        i += 2;
      } else {
        text += piece[i];
      }
    }
    surface_[(size_t)id] = text;
  }
  for (int b = 0; b < 256; b++)
    if (byte_piece_[(size_t)b] < 0)
      fail("{}: has no byte piece <0x{:02X}> (xsa tokenizer train turns byte fallback on)",
           model.string(), b);
}

// SentencePiece reads its input as UTF-8 and replaces what is not with U+FFFD, so each byte outside
// valid UTF-8 goes out here as its byte piece, and the valid runs between through SentencePiece:
// valid text gets SentencePiece's own ids (spm_encode's), and any bytes come back from decode.
// So does U+2581 (▁) written in the text, SentencePiece's own mark for a space, which it would
// give back as a space.
void SpmTokenizer::encode(std::string_view text, std::vector<int32_t>& out) const {
  std::vector<int> ids;
  auto encode_run = [&](size_t begin, size_t end) {
    if (end == begin) return;
    const auto status = sp_->Encode(absl::string_view(text.data() + begin, end - begin), &ids);
    if (!status.ok()) fail("{}: cannot encode: {}", dir_.string(), status.ToString());
    out.insert(out.end(), ids.begin(), ids.end());
  };
  size_t run = 0;
  for (size_t i = 0; i < text.size();) {
    const size_t n = utf8_length(text, i);
    const size_t as_bytes = n == 0 ? 1 : text.compare(i, 3, "\xE2\x96\x81") == 0 ? 3 : 0;
    if (as_bytes == 0) {
      i += n;
      continue;
    }
    encode_run(run, i);
    for (size_t k = 0; k < as_bytes; k++) out.push_back(byte_piece_[(unsigned char)text[i + k]]);
    run = i += as_bytes;
  }
  encode_run(run, text.size());
}

// Each piece's text (▁ as a space, byte pieces as their byte), as SentencePiece decodes valid
// text, but bytes that do not form UTF-8 stay as they are.
std::string SpmTokenizer::decode(const int32_t* ids, size_t n) const {
  std::string text;
  for (size_t i = 0; i < n; i++) {
    if (ids[i] < 0 || ids[i] >= vocab_size_)
      fail("token id {} is not in the vocabulary {} (0..{})", ids[i], dir_.string(),
           vocab_size_ - 1);
    text += surface_[(size_t)ids[i]];
  }
  return text;
}

#else

}  // namespace xsa
namespace sentencepiece {
class SentencePieceProcessor {};  // never made: the destructor of sp_ needs a complete type
}  // namespace sentencepiece
namespace xsa {

SpmTokenizer::SpmTokenizer(const fs::path& dir) : dir_(dir) {
  std::string why;
  sentencepiece_available(&why);
  fail("--tokenizer spm:{}: {}", dir.string(), why);
}
void SpmTokenizer::encode(std::string_view, std::vector<int32_t>&) const {}
std::string SpmTokenizer::decode(const int32_t*, size_t) const {
  return {};
}

#endif

SpmTokenizer::~SpmTokenizer() = default;

}  // namespace xsa

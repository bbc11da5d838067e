#include "xsa/data/corpus_reader.h"

#include <glob.h>
#include <simdjson.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>

#include "xsa/util/error.h"

#ifdef XSA_WITH_ZLIB
#include <zlib.h>
#endif
#ifdef XSA_WITH_ZSTD
#include <zstd.h>
#endif

namespace xsa {

namespace fs = std::filesystem;

BadInput parse_bad_input(const std::string& name) {
  if (name == "stop") return BadInput::stop;
  if (name == "skip") return BadInput::skip;
  fail("--on-bad-input {} is not known (expected stop or skip)", name);
}

// (outside the anonymous namespace: ByteSource::Codec, a member of a public class, holds one)
enum class Compression { none, gzip, zstd };

namespace {

Compression compression_of(const fs::path& path) {
  const std::string ext = path.extension().string();
  return ext == ".gz" ? Compression::gzip : ext == ".zst" ? Compression::zstd : Compression::none;
}

// The format an extension implies, after a compression suffix.
std::string format_of(const fs::path& path) {
  fs::path inner = path;
  if (compression_of(path) != Compression::none) inner = path.stem();
  const std::string ext = inner.extension().string();
  return ext == ".jsonl" ? "jsonl" : ext == ".json" ? "json" : "text";
}

bool has_glob_characters(const std::string& s) {
  return s.find_first_of("*?[") != std::string::npos;
}

}  // namespace

// One codec per kind of file: the raw file, and a decompressor's state where there is one.
struct ByteSource::Codec {
  Compression kind = Compression::none;
  std::FILE* file = nullptr;
  uint64_t raw_read = 0;
  // An error met after some bytes came out: those bytes go to the reader first, the error with
  // the next read (a truncated archive keeps every line before the cut).
  std::string deferred_error;
#ifdef XSA_WITH_ZLIB
  // gzip through inflate itself (not gzread, which drops the bytes it decoded with an error and
  // passes over whatever follows the last member): members one after another, anything else
  // after a member an error, as zstd's frames.
  z_stream gz{};
  bool gz_ready = false, gz_member_done = false, gz_file_done = false;
  std::vector<unsigned char> gz_in;
#endif
#ifdef XSA_WITH_ZSTD
  ZSTD_DStream* zstd = nullptr;
  std::vector<char> in;
  ZSTD_inBuffer in_buffer{nullptr, 0, 0};
  size_t frame_left = 0;  // ZSTD_decompressStream's last hint: 0 at the end of a whole frame
  bool file_done = false;
#endif
  ~Codec() {
#ifdef XSA_WITH_ZLIB
    if (gz_ready) inflateEnd(&gz);
#endif
#ifdef XSA_WITH_ZSTD
    if (zstd) ZSTD_freeDStream(zstd);
#endif
    if (file) std::fclose(file);
  }
};

ByteSource::ByteSource(const fs::path& path) : path_(path), codec_(std::make_unique<Codec>()) {
  codec_->kind = compression_of(path);
  switch (codec_->kind) {
    case Compression::gzip:
#ifdef XSA_WITH_ZLIB
      // 16 + MAX_WBITS: a gzip header and trailer around the deflate data.
      if (inflateInit2(&codec_->gz, 16 + MAX_WBITS) != Z_OK)
        fail("{}: cannot start zlib's inflate", path.string());
      codec_->gz_ready = true;
      codec_->gz_in.resize(1 << 18);
      break;
#else
      fail("{}: this build of xsa reads no gzip (rebuild with zlib: apt install zlib1g-dev)",
           path.string());
#endif
    case Compression::zstd:
#ifdef XSA_WITH_ZSTD
      codec_->zstd = ZSTD_createDStream();
      ZSTD_initDStream(codec_->zstd);
      codec_->in.resize(ZSTD_DStreamInSize());
      break;
#else
      fail("{}: this build of xsa reads no zstd (rebuild with libzstd: apt install libzstd-dev)",
           path.string());
#endif
    case Compression::none:
      break;
  }
  codec_->file = std::fopen(path.c_str(), "rb");
  if (!codec_->file) fail("{}: cannot open: {}", path.string(), std::strerror(errno));
}

ByteSource::~ByteSource() = default;

uint64_t ByteSource::consumed() const {
  return codec_->raw_read;
}

size_t ByteSource::read(char* out, size_t n) {
  Codec& c = *codec_;
  if (!c.deferred_error.empty()) {
    const std::string error = std::move(c.deferred_error);
    c.deferred_error.clear();
    throw Error(error);
  }
  // Bytes already out with an error behind them: they first, the error next time.
  const auto out_then = [&](size_t got, std::string error) {
    if (got == 0) throw Error(error);
    c.deferred_error = std::move(error);
    return got;
  };
  switch (c.kind) {
    case Compression::none: {
      const size_t got = std::fread(out, 1, n, c.file);
      if (got == 0 && std::ferror(c.file)) fail("{}: read error", path_.string());
      c.raw_read += got;
      return got;
    }
    case Compression::gzip: {
#ifdef XSA_WITH_ZLIB
      z_stream& z = c.gz;
      z.next_out = reinterpret_cast<Bytef*>(out);
      z.avail_out = (uInt)std::min<size_t>(n, 1u << 30);
      const size_t wanted = z.avail_out;
      while (z.avail_out == wanted) {
        if (z.avail_in == 0 && !c.gz_file_done) {
          const size_t got = std::fread(c.gz_in.data(), 1, c.gz_in.size(), c.file);
          if (got == 0 && std::ferror(c.file)) return out_then(0, path_.string() + ": read error");
          c.raw_read += got;
          z.next_in = c.gz_in.data(), z.avail_in = (uInt)got;
          c.gz_file_done = got == 0;
        }
        if (z.avail_in == 0 && c.gz_file_done) {
          if (c.raw_read > 0 && !c.gz_member_done)
            return out_then(wanted - z.avail_out,
                            fmt::format("{}: truncated gzip data after {} bytes (the last member "
                                        "is incomplete)",
                                        path_.string(), c.raw_read));
          break;
        }
        if (c.gz_member_done) {  // more after a whole member: another member, or not gzip
          if (z.next_in[0] != 0x1f) {
            return out_then(wanted - z.avail_out,
                            fmt::format("{}: data after the gzip data at byte {} (not another "
                                        "gzip member)",
                                        path_.string(), c.raw_read - z.avail_in));
          }
          inflateReset(&z);
          c.gz_member_done = false;
        }
        const int code = inflate(&z, Z_NO_FLUSH);
        if (code == Z_STREAM_END) {
          c.gz_member_done = true;
        } else if (code != Z_OK && code != Z_BUF_ERROR) {
          return out_then(wanted - z.avail_out,
                          fmt::format("{}: corrupt gzip data after {} bytes ({})", path_.string(),
                                      c.raw_read - z.avail_in, z.msg ? z.msg : zError(code)));
        }
      }
      return wanted - z.avail_out;
#else
      return 0;
#endif
    }
    case Compression::zstd: {
#ifdef XSA_WITH_ZSTD
      ZSTD_outBuffer out_buffer{out, n, 0};
      while (out_buffer.pos == 0) {
        if (c.in_buffer.pos == c.in_buffer.size && !c.file_done) {
          const size_t got = std::fread(c.in.data(), 1, c.in.size(), c.file);
          if (got == 0 && std::ferror(c.file)) fail("{}: read error", path_.string());
          c.raw_read += got;
          c.in_buffer = {c.in.data(), got, 0};
          c.file_done = got == 0;
        }
        if (c.file_done && c.in_buffer.pos == c.in_buffer.size) {
          if (c.frame_left != 0)
            fail("{}: truncated zstd data after {} bytes (the last frame is incomplete)",
                 path_.string(), c.raw_read);
          return 0;
        }
        const size_t hint = ZSTD_decompressStream(c.zstd, &out_buffer, &c.in_buffer);
        if (ZSTD_isError(hint))
          fail("{}: corrupt zstd data after {} bytes ({})", path_.string(), c.raw_read,
               ZSTD_getErrorName(hint));
        c.frame_left = hint;
      }
      return out_buffer.pos;
#else
      return 0;
#endif
    }
  }
  return 0;
}

std::vector<PrepareInput> list_input_files(const std::vector<PrepareInput>& inputs) {
  std::vector<PrepareInput> files;
  std::error_code ec;
  for (const PrepareInput& in : inputs) {
    std::vector<std::string> found;
    if (!fs::exists(in.path, ec) && has_glob_characters(in.path)) {
      glob_t matches{};
      if (::glob(in.path.c_str(), 0, nullptr, &matches) == 0)
        for (size_t i = 0; i < matches.gl_pathc; i++)
          if (fs::is_regular_file(matches.gl_pathv[i], ec)) found.push_back(matches.gl_pathv[i]);
      globfree(&matches);
      if (found.empty()) fail("{}: no file matches", in.path);
      std::sort(found.begin(), found.end());
    } else if (!fs::exists(in.path, ec)) {
      fail("{}: no such file or folder", in.path);
    } else if (fs::is_directory(in.path, ec)) {
      for (auto it = fs::recursive_directory_iterator(in.path, ec);
           it != fs::recursive_directory_iterator(); ++it) {
        const std::string name = it->path().filename().string();
        if (!name.empty() && name[0] == '.') {
          if (it->is_directory()) it.disable_recursion_pending();
          continue;
        }
        if (it->is_regular_file()) found.push_back(it->path().string());
      }
      std::sort(found.begin(), found.end());
    } else {
      found.push_back(in.path);
    }
    for (const std::string& f : found) {
      const std::string format = in.format == "auto" ? format_of(f) : in.format;
      if (format != "text" && format != "jsonl" && format != "json" && format != "brown")
        fail("--format {} is not known (expected auto, text, jsonl, json or brown)", format);
      files.push_back({f, format});
    }
  }
  return files;
}

bool valid_utf8(std::string_view text, size_t* bad_at) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    // ASCII runs eight bytes at a time.
    while (i + 8 <= n) {
      uint64_t word;
      std::memcpy(&word, s + i, 8);
      if (word & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= n) break;
    const unsigned char c = s[i];
    size_t len = 0;
    uint32_t min = 0, code = 0;
    if (c < 0x80) {
      i++;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2, min = 0x80, code = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, min = 0x800, code = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, min = 0x10000, code = c & 0x07;
    }
    bool ok = len > 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; k++) {
      ok = (s[i + k] & 0xC0) == 0x80;
      code = (code << 6) | (s[i + k] & 0x3F);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8.
    ok = ok && code >= min && code <= 0x10FFFF && !(code >= 0xD800 && code <= 0xDFFF);
    if (!ok) {
      if (bad_at) *bad_at = i;
      return false;
    }
    i += len;
  }
  return true;
}

std::string strip_brown_tags(const std::string& tagged) {
  // Each line is a sentence of word/tag tokens. Drop the tags, then undo the tokenization:
  // no space before closing punctuation, `` and '' become double quotes that hug their words.
  std::istringstream in(tagged);
  std::string line, out;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string sentence, word;
    bool hug_next = false;  // after an opening quote or parenthesis
    while (words >> word) {
      size_t slash = word.rfind('/');
      if (slash != std::string::npos && slash > 0) word.resize(slash);
      const bool closing = word == "''" || word == "," || word == "." || word == ";" ||
                           word == ":" || word == "?" || word == "!" || word == ")";
      if (!sentence.empty() && !closing && !hug_next) sentence += ' ';
      sentence += word == "``" || word == "''" ? "\"" : word;
      hug_next = word == "``" || word == "(";
    }
    if (!sentence.empty()) out += sentence + "\n";
  }
  return out;
}

DocumentReader::DocumentReader(const PrepareInput& file, std::string text_field, BadInput on_bad,
                               size_t max_record_bytes)
    : file_(file),
      text_field_(std::move(text_field)),
      on_bad_(on_bad),
      max_record_(std::max<size_t>(1, max_record_bytes)),
      source_(file.path) {
  buffer_.resize(1 << 18);
}

bool DocumentReader::bad(const std::string& what) {
  if (on_bad_ == BadInput::stop) throw Error(what);
  skipped_++;
  return true;
}

// The next line, its '\n' kept, at most max_bytes (a longer line comes in pieces), appended to
// `out`; false at the end. A corrupt or truncated archive ends the file here when skipping
// (counted once).
bool DocumentReader::next_line(std::string& out, size_t max_bytes) {
  const size_t start = out.size();
  while (out.size() - start < max_bytes) {
    if (buffer_pos_ == buffer_end_) {
      if (source_done_) break;
      try {
        buffer_end_ = source_.read(buffer_.data(), buffer_.size());
      } catch (const Error& e) {
        bad(fmt::format("{} (line {})", e.what(), line_ + 1));
        buffer_end_ = 0, out.resize(start);  // the broken line goes with the rest
      }
      buffer_pos_ = 0;
      if (buffer_end_ == 0) {
        source_done_ = true;
        break;
      }
    }
    const char* begin = buffer_.data() + buffer_pos_;
    const size_t available = std::min(buffer_end_ - buffer_pos_, max_bytes - (out.size() - start));
    const char* newline = (const char*)std::memchr(begin, '\n', available);
    const size_t take = newline ? (size_t)(newline - begin) + 1 : available;
    out.append(begin, take);
    buffer_pos_ += take;
    if (newline) {
      line_++;
      return true;
    }
  }
  if (out.size() == start) return false;
  if (out.back() != '\n' && source_done_) line_++;  // the last line, without its newline
  return true;
}

namespace {
std::string& line_cleared_piece(std::string& s) {
  s.clear();
  return s;
}
}  // namespace

// Reads on to the end of the line being read (its '\n' included), holding none of it.
void DocumentReader::skip_line() {
  std::string piece;
  while (next_line(line_cleared_piece(piece), buffer_.size()) && piece.back() != '\n') {
  }
}

bool DocumentReader::next_byte(char& c) {
  if (buffer_pos_ == buffer_end_) {
    if (source_done_) return false;
    try {
      buffer_end_ = source_.read(buffer_.data(), buffer_.size());
    } catch (const Error& e) {
      bad(e.what());
      buffer_end_ = 0;
    }
    buffer_pos_ = 0;
    if (buffer_end_ == 0) {
      source_done_ = true;
      return false;
    }
  }
  c = buffer_[buffer_pos_++];
  if (c == '\n') line_++;
  return true;
}

namespace {

bool blank(std::string_view line) {
  return line.find_first_not_of(" \t\r\n\f\v") == std::string_view::npos;
}

std::string& line_cleared(std::string& line) {
  line.clear();
  return line;
}

// The line (1-based, from `first_line`) of byte `offset` of `text`.
size_t line_of(const std::string& text, size_t offset, size_t first_line) {
  return first_line + (size_t)std::count(text.begin(), text.begin() + offset, '\n');
}

}  // namespace

bool DocumentReader::next_text(std::string& text) {
  // A document is ready (valid UTF-8, or left out) when it ends; returns whether one is queued.
  auto finish_document = [&] {
    if (document_.empty()) return;
    size_t at = 0;
    if (!valid_utf8(document_, &at))
      bad(fmt::format("{}:{}: not valid UTF-8 (byte {:#04x})", file_.path,
                      line_of(document_, at, document_line_), (unsigned char)document_[at]));
    else
      ready_.push_back(std::move(document_));
    document_.clear();
  };
  auto feed = [&](const std::string& line, size_t line_number) {
    if (blank(line)) return finish_document();
    // A line that would take the document past the limit opens the next one.
    if (!document_.empty() && document_.size() + line.size() > kTextDocumentMaxBytes)
      finish_document();
    if (document_.empty()) document_line_ = line_number;
    document_ += line;
    // A line longer than the limit (read in pieces of it): cut before the character that
    // crosses it (a cut inside a character would make both halves bad UTF-8).
    while (document_.size() > kTextDocumentMaxBytes) {
      size_t cut = kTextDocumentMaxBytes;
      while (cut > 0 && ((unsigned char)document_[cut] & 0xC0) == 0x80) cut--;
      if (cut == 0) cut = kTextDocumentMaxBytes;  // not UTF-8 at all: finish_document says so
      std::string rest = document_.substr(cut);
      document_.resize(cut);
      finish_document();
      document_ = std::move(rest), document_line_ = line_number;
    }
  };
  std::string line;
  if (!text_split_) {
    // The opening decides: the whole file within the limit is one document, as it is.
    std::vector<std::pair<std::string, size_t>> opening;
    size_t bytes = 0;
    while (bytes <= kTextDocumentMaxBytes &&
           next_line(line_cleared(line), kTextDocumentMaxBytes + 1)) {
      bytes += line.size();
      opening.emplace_back(std::move(line), line_);
    }
    text_split_ = true;
    if (bytes <= kTextDocumentMaxBytes) {
      for (auto& [l, number] : opening) document_ += l;
      document_line_ = 1;
      if (!blank(document_)) finish_document();
      document_.clear();
    } else {
      for (auto& [l, number] : opening) feed(l, number);
    }
  }
  while (ready_.empty() && next_line(line_cleared(line), kTextDocumentMaxBytes)) feed(line, line_);
  if (ready_.empty()) finish_document();
  if (ready_.empty()) return false;
  text = std::move(ready_.front());
  ready_.pop_front();
  return true;
}

namespace {
constexpr size_t kKeptParserBytes = 64 << 20;

std::string no_text_field(const std::string& path, size_t line_number,
                          const std::string& text_field) {
  return fmt::format("{}:{}: has no \"{}\" field holding a string", path, line_number, text_field);
}

// decode_json_line's slow path, for what simdjson refuses and JSON allows. `line` is valid UTF-8
// (simdjson checked that first).
bool decode_with_nlohmann(std::string_view line, size_t line_number, const std::string& path,
                          const std::string& text_field, std::string_view& text,
                          std::string& error) {
  thread_local std::string decoded;  // what `text` views
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded()) {
    error = fmt::format("{}:{}: not valid JSON", path, line_number);
    return false;
  }
  const auto field = j.is_object() ? j.find(text_field) : j.end();
  if (!j.is_object() || field == j.end() || !field->is_string()) {
    error = no_text_field(path, line_number, text_field);
    return false;
  }
  decoded = field->get<std::string>();
  text = decoded;
  return true;
}
}  // namespace

bool decode_json_line(std::string_view line, size_t line_number, const std::string& path,
                      const std::string& text_field, std::string_view& text, std::string& error) {
  static_assert(kJsonLinePadding >= simdjson::SIMDJSON_PADDING);
  text = {};
  // One parser per thread: its buffers grow to the longest line and stay (but see below).
  thread_local simdjson::dom::parser parser;
  // A rare huge line leaves the parser's buffers (several times its size) behind: let them go
  // before the next line.
  if (parser.capacity() > kKeptParserBytes && line.size() < kKeptParserBytes / 8)
    parser = simdjson::dom::parser();
  // A byte-order mark before the JSON (files saved by some editors open with one) is passed over.
  size_t start = 0;
  if (line.size() >= 3 && line.compare(0, 3, "\xEF\xBB\xBF") == 0) start = 3;
  simdjson::dom::element document;
  if (const auto code =
          parser.parse(line.data() + start, line.size() - start, false).get(document)) {
    // simdjson refuses numbers past 64 bits and nesting past 1 024 levels, which JSON allows and
    // nlohmann's parser (prepare's before simdjson) takes: such a line, rare, goes through it.
    if (code == simdjson::NUMBER_ERROR || code == simdjson::NUMBER_OUT_OF_RANGE ||
        code == simdjson::DEPTH_ERROR)
      return decode_with_nlohmann(line.substr(start), line_number, path, text_field, text, error);
    size_t at = 0;
    if (code == simdjson::UTF8_ERROR && !valid_utf8(line, &at))
      error = fmt::format("{}:{}: not valid UTF-8 (byte {:#04x} at column {})", path, line_number,
                          (unsigned char)line[at], at + 1);
    else
      error = fmt::format("{}:{}: not valid JSON ({})", path, line_number,
                          simdjson::error_message(code));
    return false;
  }
  // The field's last occurrence, as a parser that builds an object keeps it.
  bool found = false, is_string = false;
  simdjson::dom::object object;
  if (document.get(object) == simdjson::SUCCESS)
    for (const simdjson::dom::key_value_pair field : object)
      if (field.key == text_field) {
        found = true;
        is_string = field.value.get(text) == simdjson::SUCCESS;
      }
  if (!found || !is_string) {
    text = {};
    error = no_text_field(path, line_number, text_field);
    return false;
  }
  return true;
}

// A Brown file is one document (its tags stripped): read whole, up to the record limit.
void DocumentReader::read_brown() {
  whole_read_ = true;
  std::string bytes;
  while (bytes.size() <= max_record_ && next_line(bytes, max_record_ + 1 - bytes.size())) {
  }
  if (bytes.size() > max_record_)
    return (void)bad(
        fmt::format("{}: longer than {} bytes (--max-record-mb): a Brown file is one "
                    "document; not read",
                    file_.path, max_record_));
  std::string text = strip_brown_tags(bytes);
  if (!text.empty()) ready_.push_back(std::move(text));
}

// A JSON array's next document (an item that is a string, or an object with the text field), read
// as a stream: the file is never held whole, an item at most the record limit. False at the
// array's end (or at an error, when skipping).
bool DocumentReader::next_json_array_item(std::string& item) {
  char c = 0;
  auto next_significant = [&] {
    while (next_byte(c))
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return true;
    return false;
  };
  auto unended = [&] {
    array_ended_ = true;
    bad(fmt::format("{}: not valid JSON (the array does not end)", file_.path));
    return false;
  };
  while (!array_ended_) {
    item.clear();
    if (!array_started_) {
      array_started_ = true;
      if (!next_significant() || c != '[') {
        array_ended_ = true;
        bad(fmt::format("{}: not a JSON array of documents", file_.path));
        return false;
      }
      if (!next_significant()) return unended();
      if (c == ']') {
        array_ended_ = true;
        break;
      }
    } else if (!next_significant()) {
      return unended();
    }
    // The item from `c` on, to the ',' or ']' at its own depth; strings' brackets and escapes
    // passed over. An item longer than the limit is read on without being kept.
    int depth = 0;
    bool in_string = false, escaped = false, too_long = false;
    for (;;) {
      if (in_string) {
        if (escaped)
          escaped = false;
        else if (c == '\\')
          escaped = true;
        else if (c == '"')
          in_string = false;
      } else if (c == '"') {
        in_string = true;
      } else if (c == '[' || c == '{') {
        depth++;
      } else if ((c == ']' || c == '}') && depth > 0) {
        depth--;
      } else if (depth == 0 && (c == ',' || c == ']')) {
        break;
      }
      if (!too_long) {
        item += c;
        too_long = item.size() > max_record_;
        if (too_long) std::string().swap(item);
      }
      if (!next_byte(c)) return unended();
    }
    const size_t index = array_item_++;
    if (c == ']') {
      array_ended_ = true;
      if (next_significant())
        bad(fmt::format("{}: not valid JSON (data after the array's end)", file_.path));
    }
    if (too_long) {
      bad(fmt::format("{}: item {} is longer than {} bytes (--max-record-mb); not read", file_.path,
                      index, max_record_));
      continue;
    }
    nlohmann::json j = nlohmann::json::parse(item, nullptr, false);
    const auto field = j.is_object() ? j.find(text_field_) : j.end();
    if (j.is_string()) {
      item = std::move(j.get_ref<std::string&>());
    } else if (j.is_object() && field != j.end() && field->is_string()) {
      item = std::move(field->get_ref<std::string&>());
    } else {
      bad(j.is_discarded()
              ? fmt::format("{}: item {} is not valid JSON", file_.path, index)
              : fmt::format("{}: item {} is neither a string nor an object with a \"{}\" string",
                            file_.path, index, text_field_));
      continue;
    }
    if (!item.empty()) return true;
  }
  return false;
}

bool DocumentReader::next_item(std::string& buffer, InputItem& item) {
  item.json_line = file_.format == "jsonl", item.line = 0, item.offset = buffer.size();
  auto take = [&](std::string& document) {
    buffer += document;
    item.size = document.size();
    return true;
  };
  if (file_.format == "text") {
    std::string document;
    return next_text(document) && take(document);
  }
  if (file_.format == "jsonl") {
    // A line of at most the record limit (its '\n' besides); a longer one is refused and passed
    // over without being held.
    while (next_line(buffer, max_record_ + 1)) {
      const size_t size = buffer.size() - item.offset;
      if (buffer.back() != '\n' && size > max_record_) {
        buffer.resize(item.offset);
        bad(fmt::format("{}:{}: a line longer than {} bytes (--max-record-mb); not read",
                        file_.path, line_ + 1, max_record_));  // (stop: throws here)
        skip_line();
        continue;
      }
      item.line = line_, item.size = size;
      if (!blank(std::string_view(buffer).substr(item.offset))) return true;
      buffer.resize(item.offset);
    }
    return false;
  }
  if (file_.format == "json") {
    std::string document;
    return next_json_array_item(document) && take(document);
  }
  if (!whole_read_) read_brown();
  if (ready_.empty()) return false;
  take(ready_.front());
  ready_.pop_front();
  return true;
}

bool DocumentReader::next(std::string& text) {
  InputItem item;
  std::string buffer, error;
  std::string_view decoded;
  while (next_item(buffer, item)) {
    if (!item.json_line) {
      text = std::move(buffer);
      return true;
    }
    buffer.reserve(buffer.size() + kJsonLinePadding);
    if (!decode_json_line(buffer, item.line, file_.path, text_field_, decoded, error))
      bad(error);
    else if (!decoded.empty())
      return text.assign(decoded), true;
    buffer.clear();
  }
  return false;
}

}  // namespace xsa

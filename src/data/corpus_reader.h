// Corpora as they ship, read one document at a time in bounded memory: plain, gzip (.gz) and
// zstd (.zst) files holding text, JSON lines, a JSON array or the POS-tagged Brown corpus.
// xsa prepare's input side (data/prepare.h).
#pragma once

#include <cstdint>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace xsa {

struct PrepareInput {
  std::string path;  // a file, a folder (searched recursively, hidden files skipped) or a glob
  // auto (by extension, after .gz or .zst: .jsonl, .json, else text), text, jsonl, json, brown
  std::string format = "auto";
};

// What a bad line, document or archive does: stop the prepare with one line naming the file and
// line, or leave it out and count it (in meta.json's "sources" and the summary).
enum class BadInput { stop, skip };
BadInput parse_bad_input(const std::string& name);  // "stop" or "skip"; throws Error otherwise

// A text file larger than this is a collection of documents separated by blank lines; a smaller
// one is one document. No document of a text file grows past it: a run of lines that would is cut
// before the line that crosses it, and a line longer than it before the character that crosses.
inline constexpr size_t kTextDocumentMaxBytes = 1 << 20;

// No record of an input is held past this many bytes (prepare's --max-record-mb): a JSON line, an
// item of a JSON array, a Brown file. A longer one is refused as bad input, naming its file and
// line (or item), and passed over without being held, so that a decompression bomb or a runaway
// line costs no more memory than this.
inline constexpr size_t kMaxRecordBytes = 16 << 20;

// The bytes of one file, decompressed by its extension (.gz: zlib, .zst: libzstd, else as they
// are). Errors (unreadable, corrupt or truncated archive) name the file.
class ByteSource {
 public:
  explicit ByteSource(const std::filesystem::path& path);
  ~ByteSource();
  ByteSource(const ByteSource&) = delete;
  ByteSource& operator=(const ByteSource&) = delete;
  // Up to n bytes into out; 0 at the end.
  size_t read(char* out, size_t n);
  uint64_t consumed() const;  // bytes of the file itself (compressed) read so far

 private:
  struct Codec;
  std::filesystem::path path_;
  std::unique_ptr<Codec> codec_;
};

// Every file of the inputs, folders walked in sorted order and globs expanded (sorted), each with
// its format resolved; throws Error naming an input that does not exist or matches nothing.
std::vector<PrepareInput> list_input_files(const std::vector<PrepareInput>& inputs);

// One item of an input file, its bytes at [offset, offset + size) of a buffer the reader appended
// them to: a document's text, or a JSON line holding one, decoded by decode_json_line where that
// is wanted (prepare gathers a batch's items into one buffer and decodes its lines in parallel).
struct InputItem {
  size_t offset = 0, size = 0;
  bool json_line = false;
  size_t line = 0;  // a JSON line's number in its file
};

// What decode_json_line may read past a line's end (simdjson's padding): a buffer holds this many
// bytes after its last item (the next item's bytes, or capacity reserved).
inline constexpr size_t kJsonLinePadding = 64;

// A JSON line's document: `text` views it, valid until this thread decodes another line (empty
// when its text is empty); when the line is bad (not UTF-8, not JSON, no such string field),
// false and one line naming file and line in `error`. A field given twice counts by its last
// value. kJsonLinePadding bytes after the line must be readable.
bool decode_json_line(std::string_view line, size_t line_number, const std::string& path,
                      const std::string& text_field, std::string_view& text, std::string& error);

// The documents of one input file, in order, never empty.
class DocumentReader {
 public:
  DocumentReader(const PrepareInput& file, std::string text_field, BadInput on_bad,
                 size_t max_record_bytes = kMaxRecordBytes);
  // The next document into `text`; false at the end of the file. A bad one stops with an Error
  // naming file and line, or (skip) is counted and passed over; a corrupt or truncated archive
  // ends the file there (skip) or stops.
  bool next(std::string& text);
  // The next item, a JSON line undecoded (its blank lines passed over), its bytes appended to
  // `buffer`; false at the end. Bad input the reader itself meets (an archive's end, a text
  // document's UTF-8) as next().
  bool next_item(std::string& buffer, InputItem& item);
  size_t skipped() const { return skipped_; }  // what the reader itself left out
  uint64_t consumed() const { return source_.consumed(); }

 private:
  bool next_line(std::string& out, size_t max_bytes);  // appends one line to out
  void skip_line();                                    // passes over the rest of this line
  bool next_byte(char& c);
  bool next_text(std::string& text);
  bool next_json_array_item(std::string& item);  // an array's next item, unparsed
  void read_brown();                             // the file, one document
  bool bad(const std::string& what);             // skip: counts and returns true; stop: throws

  PrepareInput file_;
  std::string text_field_;
  BadInput on_bad_;
  size_t max_record_;
  ByteSource source_;
  std::vector<char> buffer_;
  size_t buffer_pos_ = 0, buffer_end_ = 0;
  bool source_done_ = false;
  size_t line_ = 0;  // lines read so far (the last line's number)
  size_t skipped_ = 0;
  std::deque<std::string> ready_;  // documents read ahead
  bool whole_read_ = false;
  // A JSON array: started (its '[' read), ended (its ']'), and its next item's index.
  bool array_started_ = false, array_ended_ = false;
  size_t array_item_ = 0;
  // text: the file's opening, up to kTextDocumentMaxBytes, until it shows whether the file is
  // one document or a collection; then the document being gathered and its first line.
  bool text_split_ = false;
  std::string document_;
  size_t document_line_ = 0;
};

// Whether `text` is valid UTF-8; otherwise the offset of the first bad byte in `bad_at`.
bool valid_utf8(std::string_view text, size_t* bad_at = nullptr);

// The Brown corpus's "word/tag word/tag" lines back to plain text.
std::string strip_brown_tags(const std::string& tagged);

}  // namespace xsa

// safetensors: 8-byte little-endian header length, a JSON header
// {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}, then raw
// little-endian data. xsa writes F32; it reads F32, and F16 and BF16 (other programs' files, e.g.
// Hugging Face checkpoints), widened to float.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace xsa {

struct TensorRef {
  std::string name;
  std::vector<int64_t> shape;
  const float* data;  // numel floats
};

// Serialises the tensors (in the given order) with optional string metadata.
std::string encode_safetensors(const std::vector<TensorRef>& tensors,
                               const std::map<std::string, std::string>& metadata = {});

// A parsed file. Validates the header, every offset and size; errors name `path`.
class SafetensorsFile {
 public:
  SafetensorsFile(std::string path, std::string bytes);
  bool contains(const std::string& name) const { return entries_.count(name) != 0; }
  // Copies tensor `name` into out (numel floats) after checking it exists with this shape.
  void read(const std::string& name, const std::vector<int64_t>& shape, float* out) const;
  const std::vector<int64_t>& shape(const std::string& name) const;  // throws Error if absent
  std::vector<std::string> names() const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  struct Entry {
    std::vector<int64_t> shape;
    size_t begin, end;        // byte offsets into the data section
    int bytes_per_value = 4;  // 4: F32; 2: F16 or BF16 (bf16 set)
    bool bf16 = false;
  };
  std::string path_;
  std::string bytes_;
  size_t data_start_ = 0;
  std::map<std::string, Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

std::string shape_string(const std::vector<int64_t>& shape);  // "[3, 4]"

}  // namespace xsa

#include "xsa/io/safetensors.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "xsa/util/error.h"

namespace xsa {
namespace {

float bf16_to_float(uint16_t h) {
  const uint32_t u = (uint32_t)h << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// IEEE half to float, exactly (subnormals, infinities and NaN included).
float half_to_float(uint16_t h) {
  const uint32_t sign = (uint32_t)(h >> 15) << 31, exponent = (h >> 10) & 0x1f,
                 mantissa = h & 0x3ff;
  float magnitude;
  if (exponent == 0)
    magnitude = std::ldexp((float)mantissa, -24);
  else if (exponent == 31)
    magnitude = mantissa ? NAN : INFINITY;
  else
    magnitude = std::ldexp((float)(mantissa | 0x400), (int)exponent - 25);
  uint32_t u;
  std::memcpy(&u, &magnitude, 4);
  u |= sign;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

static_assert(std::endian::native == std::endian::little,
              "safetensors I/O assumes a little-endian host");

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); i++) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

static size_t numel_of(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t d : shape) n *= (size_t)d;
  return n;
}

std::string encode_safetensors(const std::vector<TensorRef>& tensors,
                               const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header;
  if (!metadata.empty()) header["__metadata__"] = metadata;
  size_t offset = 0;
  for (const TensorRef& t : tensors) {
    size_t bytes = numel_of(t.shape) * sizeof(float);
    header[t.name] = {
        {"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');  // align the data section to 8 bytes
  uint64_t header_len = json.size();
  std::string out(8, '\0');
  std::memcpy(out.data(), &header_len, 8);
  out += json;
  out.reserve(out.size() + offset);
  for (const TensorRef& t : tensors)
    out.append(reinterpret_cast<const char*>(t.data), numel_of(t.shape) * sizeof(float));
  return out;
}

SafetensorsFile::SafetensorsFile(std::string path, std::string bytes)
    : path_(std::move(path)), bytes_(std::move(bytes)) {
  if (bytes_.size() < 8)
    fail("{}: truncated: {} bytes, too short for a safetensors header", path_, bytes_.size());
  uint64_t header_len;
  std::memcpy(&header_len, bytes_.data(), 8);
  if (header_len > bytes_.size() - 8)
    fail("{}: truncated: header claims {} bytes but the file has {}", path_, header_len,
         bytes_.size());
  data_start_ = 8 + header_len;
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes_.begin() + 8, bytes_.begin() + data_start_);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: header is not valid JSON ({})", path_, e.what());
  }
  if (!header.is_object()) fail("{}: header is not a JSON object", path_);
  const size_t data_size = bytes_.size() - data_start_;
  for (auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      if (info.is_object())
        for (auto& [k, v] : info.items())
          if (v.is_string()) metadata_[k] = v.get<std::string>();
      continue;
    }
    if (!info.is_object() || !info.contains("dtype") || !info.contains("shape") ||
        !info.contains("data_offsets"))
      fail("{}: tensor '{}' lacks dtype, shape or data_offsets", path_, name);
    const std::string dtype = info["dtype"].is_string() ? info["dtype"].get<std::string>() : "";
    if (dtype != "F32" && dtype != "F16" && dtype != "BF16")
      fail("{}: tensor '{}' has dtype {}; F32, F16 and BF16 are supported", path_, name,
           info["dtype"].dump());
    Entry e;
    e.bytes_per_value = dtype == "F32" ? 4 : 2;
    e.bf16 = dtype == "BF16";
    // get<>() would cast a float (1e145) to an integer: undefined past its range.
    auto integers = [](const nlohmann::json& a) {
      return a.is_array() && std::all_of(a.begin(), a.end(), [](const nlohmann::json& x) {
               return x.is_number_integer();
             });
    };
    if (!integers(info["shape"]) || !integers(info["data_offsets"]))
      fail("{}: tensor '{}' has a malformed shape or data_offsets", path_, name);
    try {
      e.shape = info["shape"].get<std::vector<int64_t>>();
      auto offsets = info["data_offsets"].get<std::vector<uint64_t>>();
      if (offsets.size() != 2) throw std::runtime_error("data_offsets");
      e.begin = offsets[0], e.end = offsets[1];
    } catch (const std::exception&) {
      fail("{}: tensor '{}' has a malformed shape or data_offsets", path_, name);
    }
    // The shape's bytes, checked for overflow: a product that wrapped around could match a small
    // data range (e.g. [2^62, 4] of F32 as 0 bytes), and a reader would then allocate the shape.
    size_t bytes = e.bytes_per_value;
    bool overflow = false, empty = false;
    for (int64_t d : e.shape) {
      if (d < 0) fail("{}: tensor '{}' has a negative dimension", path_, name);
      overflow |= d != 0 && bytes > SIZE_MAX / (size_t)d;
      empty |= d == 0;
      bytes *= (size_t)d;
    }
    if (overflow && !empty)
      fail("{}: tensor '{}' has shape {}, too large for any file", path_, name,
           shape_string(e.shape));
    if (e.end < e.begin || e.end - e.begin != bytes)
      fail("{}: tensor '{}' has {} data bytes, its shape {} needs {}", path_, name, e.end - e.begin,
           shape_string(e.shape), bytes);
    if (e.end > data_size)
      fail("{}: truncated: tensor '{}' ends at data byte {} but the file holds only {}", path_,
           name, e.end, data_size);
    entries_[name] = std::move(e);
  }
}

void SafetensorsFile::read(const std::string& name, const std::vector<int64_t>& shape,
                           float* out) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) fail("{}: tensor '{}' is missing", path_, name);
  if (it->second.shape != shape)
    fail("{}: tensor '{}' has shape {}, the model needs {}", path_, name,
         shape_string(it->second.shape), shape_string(shape));
  const Entry& e = it->second;
  const char* data = bytes_.data() + data_start_ + e.begin;
  if (e.bytes_per_value == 4) {
    if (e.end > e.begin)
      std::memcpy(out, data, e.end - e.begin);  // an empty tensor's out may be null
    return;
  }
  const size_t n = (e.end - e.begin) / 2;
  for (size_t i = 0; i < n; i++) {
    uint16_t h;
    std::memcpy(&h, data + 2 * i, 2);
    out[i] = e.bf16 ? bf16_to_float(h) : half_to_float(h);
  }
}

const std::vector<int64_t>& SafetensorsFile::shape(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) fail("{}: tensor '{}' is missing", path_, name);
  return it->second.shape;
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  for (const auto& [name, _] : entries_) out.push_back(name);
  return out;
}

}  // namespace xsa

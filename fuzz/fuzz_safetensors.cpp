// safetensors headers and tensors (src/io/safetensors.*): any bytes are read or refused; every
// tensor of an accepted file reads whole, and F32 files survive encode → parse unchanged.
#include <cstring>
#include <vector>

#include "fuzz_common.h"
#include "xsa/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace xsa;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  fuzz::accepts([&] {
    const SafetensorsFile file("fuzz.safetensors", bytes);
    std::vector<TensorRef> refs;
    std::vector<std::vector<float>> values;
    for (const std::string& name : file.names()) {
      const std::vector<int64_t>& shape = file.shape(name);
      size_t numel = 1;
      for (int64_t d : shape) numel *= (size_t)d;
      // The header was checked against the file: no tensor holds more values than its bytes.
      XSA_FUZZ_EXPECT(numel <= size / 2);
      values.emplace_back(numel);
      file.read(name, shape, values.back().data());
      refs.push_back({name, shape, values.back().data()});
    }
    for (const auto& [key, value] : file.metadata()) (void)value.size();
    // Written again (as F32) and read back: the same names, shapes and values, bit for bit.
    const SafetensorsFile again("again.safetensors", encode_safetensors(refs, file.metadata()));
    XSA_FUZZ_EXPECT(again.names() == file.names());
    XSA_FUZZ_EXPECT(again.metadata() == file.metadata());
    for (const TensorRef& t : refs) {
      XSA_FUZZ_EXPECT(again.shape(t.name) == t.shape);
      size_t numel = 1;
      for (int64_t d : t.shape) numel *= (size_t)d;
      std::vector<float> back(numel);
      again.read(t.name, t.shape, back.data());
      XSA_FUZZ_EXPECT(numel == 0 || std::memcmp(back.data(), t.data, numel * 4) == 0);
    }
  });
  return 0;
}

// libFuzzer target: ng::io::safetensors_parse (the parser behind load_safetensors) on arbitrary bytes.
//
// Contract under test (io/safetensors.h): any byte string either parses or throws ng::Error; never a crash,
// an out-of-bounds read, a leak, or an allocation larger than the input (scripts/fuzz.sh runs this with
// -malloc_limit_mb). When it parses, serializing the result and parsing that again gives the same names,
// dtypes, shapes, bytes and metadata.
#include <cstdint>
#include <cstring>
#include <string>

#include "io/safetensors.h"
#include "tensor/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  ng::io::SafetensorsData d;
  try {
    d = ng::io::safetensors_parse(bytes, "fuzz input");
  } catch (const ng::Error&) {
    return 0;  // rejected with a message: fine
  }

  ng::io::SafetensorsData back =
      ng::io::safetensors_parse(ng::io::safetensors_serialize(d.tensors, d.metadata), "round trip");
  if (back.tensors.size() != d.tensors.size() || back.metadata != d.metadata) __builtin_trap();
  for (size_t i = 0; i < d.tensors.size(); ++i) {
    const auto& [name, t] = d.tensors[i];
    const auto& [name2, t2] = back.tensors[i];
    const size_t nbytes = size_t(t.numel()) * ng::dtype_size(t.dtype());
    if (name != name2 || t.dtype() != t2.dtype() || t.shape() != t2.shape()) __builtin_trap();
    if (nbytes > 0 && std::memcmp(t.raw_data(), t2.raw_data(), nbytes) != 0) __builtin_trap();
  }
  return 0;
}

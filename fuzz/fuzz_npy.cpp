// libFuzzer target: ng::load_npy on arbitrary bytes.
//
// Contract under test (tensor/npy.h): any file either loads or throws ng::Error; never a crash, an
// out-of-bounds read, a leak, or an allocation larger than the file (scripts/fuzz.sh runs this with
// -malloc_limit_mb, so a header that lies about its size and is believed makes the fuzzer report it).
// When a file loads, saving the tensor and loading it back gives the same dtype, shape and bytes.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "tensor/error.h"
#include "tensor/npy.h"

namespace {
std::string scratch(const char* what) {
  return "/tmp/normgrad_fuzz_npy_" + std::to_string(getpid()) + "_" + what + ".npy";
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // load_npy reads a path, so the input goes through a per-process scratch file.
  const std::string in = scratch("in");
  {
    std::ofstream f(in, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data), std::streamsize(size));
  }
  ng::Tensor t;
  try {
    t = ng::load_npy(in);
  } catch (const ng::Error&) {
    std::remove(in.c_str());
    return 0;  // rejected with a message: fine
  }
  std::remove(in.c_str());

  // It loaded: the round trip must be exact (bf16 cannot load from npy, so every loaded dtype can save).
  const std::string out = scratch("out");
  ng::save_npy(out, t);
  ng::Tensor back = ng::load_npy(out);
  std::remove(out.c_str());
  const size_t bytes = size_t(t.numel()) * ng::dtype_size(t.dtype());
  if (back.dtype() != t.dtype() || back.shape() != t.shape() ||
      (bytes > 0 && std::memcmp(back.raw_data(), t.raw_data(), bytes) != 0))
    __builtin_trap();
  return 0;
}

#include "tensor/storage.h"

#include <cstdlib>
#include <new>

#include "tensor/error.h"

namespace ng {

Storage::Storage(size_t nbytes) : nbytes_(nbytes), device_(Device::cpu()) {
  // Round up to a multiple of 64 so aligned_alloc accepts it, and so SIMD loads never cross a page
  // we do not own. Zero-byte tensors still get a valid pointer.
  size_t padded = (nbytes + 63) / 64 * 64;
  if (padded == 0) padded = 64;
  data_ = std::aligned_alloc(64, padded);
  if (!data_) fail("Storage", "out of memory allocating ", nbytes, " bytes");
  deleter_ = [](void* p) { std::free(p); };
}

Storage::Storage(void* data, size_t nbytes, Device device, std::function<void(void*)> deleter)
    : data_(data), nbytes_(nbytes), device_(device), deleter_(std::move(deleter)) {}

Storage::~Storage() {
  if (data_ && deleter_) deleter_(data_);
}

}  // namespace ng

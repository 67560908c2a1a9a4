// Storage: one owned, 64-byte aligned block of memory. Many tensors (views) may share it. Blocks of 8 MiB and
// more come from tensor/huge_blocks.h (huge pages, kept for reuse), the rest from malloc.
//
// The version counter lives here because views share memory: writing through any view changes what
// every other view sees, so autograd's "was this saved tensor modified in place?" check must see it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "tensor/device.h"

namespace ng {

class Storage {
 public:
  // Allocate `nbytes` on the CPU (uninitialised).
  explicit Storage(size_t nbytes);
  // Adopt memory owned elsewhere (a CUDA allocation, say); `deleter` frees it.
  Storage(void* data, size_t nbytes, Device device, std::function<void(void*)> deleter);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() { return data_; }
  const void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

  uint64_t version() const { return version_; }
  void bump_version() { ++version_; }

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  std::function<void(void*)> deleter_;
  uint64_t version_ = 0;
};

}  // namespace ng

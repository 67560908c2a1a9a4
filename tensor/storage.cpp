#include "tensor/storage.h"

#include <cstdlib>
#include <new>

#include "tensor/error.h"
#include "tensor/huge_blocks.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace ng {

namespace {
// Allocator churn (performance issue). A training step frees and re-allocates the same few-MiB tensors
// every step. glibc's defaults hand such blocks back to the OS (munmap, or trimming the heap top) and take
// them again on the next step, and every first touch of a page is then a page fault plus a page of zeros:
// about 6000 faults per exp2 step. Keeping freed memory in the process (blocks up to 32 MiB come from
// the heap, the heap is not trimmed) removes ~90% of them, at the cost of not returning memory to the OS
// between steps. Runs once, before main.
#if defined(__GLIBC__)
const bool g_malloc_tuned = [] {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  return true;
}();
#endif
}  // namespace

Storage::Storage(size_t nbytes) : nbytes_(nbytes), device_(Device::cpu()) {
  // Round up to a multiple of 64 so aligned_alloc accepts it, and so SIMD loads never cross a page
  // we do not own. Zero-byte tensors still get a valid pointer.
  size_t padded = (nbytes + 63) / 64 * 64;
  if (padded == 0) padded = 64;
  if (padded >= kHugeBlockMin && huge_blocks_enabled()) {
    // Big blocks: their own mapping on huge pages, kept for reuse (tensor/huge_blocks.h).
    data_ = huge_block_take(padded);
    if (!data_) fail("Storage", "out of memory allocating ", nbytes, " bytes");
    deleter_ = [padded](void* p) { huge_block_give(p, padded); };
    return;
  }
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

#include "tensor/storage.h"

#include <cstdint>
#include <cstdlib>
#include <new>

#include "tensor/error.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif
#if defined(__linux__)
#include <sys/mman.h>
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

// Blocks of 32 MiB and more. glibc would mmap them afresh on every allocation (32 MiB is the largest
// M_MMAP_THRESHOLD it accepts), and every 4 KiB page then faults on first touch: measured (AMD Zen 4 VM, one
// thread) 54 ms to allocate, fill and free 64 MiB, against 3.4 ms to copy 64 MiB into an existing tensor.
// So such a block is mapped here, aligned to 2 MiB, and asked for as transparent huge pages (where the
// kernel offers them: /sys/kernel/mm/transparent_hugepage/enabled "madvise" or "always"): 512 times fewer
// faults, 6.4 ms for the same test. A failed madvise (no THP) leaves ordinary pages, which is no error.
// The mapping is our own, not glibc's: glibc serves even a large request from its heap when the heap has a
// free chunk big enough (freed 16 MiB tensors coalesce into one), and a madvised range of the heap would go
// on faulting in whole zeroed 2 MiB pages under the small tensors that reuse it later. Seen in an experiment
// that madvised aligned_alloc blocks from 2 MiB up: 14% of a 1-thread exp2 step in the kernel's clear_page,
// and some LayerNorm forward calls at 19 ms instead of 0.4 ms.
constexpr size_t kHugeThreshold = size_t(32) << 20, kHugePage = size_t(2) << 20;

#if defined(__linux__) && defined(MADV_HUGEPAGE)
// `bytes` (a multiple of kHugePage) of fresh zeroed memory at a 2 MiB boundary, or null.
void* map_huge(size_t bytes) {
  const size_t len = bytes + kHugePage;  // room to slide to a 2 MiB boundary
  void* base = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) return nullptr;
  const uintptr_t b = reinterpret_cast<uintptr_t>(base);
  const uintptr_t a = (b + kHugePage - 1) / kHugePage * kHugePage;
  if (a > b) munmap(base, a - b);  // the unaligned head
  if (b + len > a + bytes) munmap(reinterpret_cast<void*>(a + bytes), b + len - (a + bytes));  // the tail
  void* p = reinterpret_cast<void*>(a);
  madvise(p, bytes, MADV_HUGEPAGE);
  return p;
}
#endif
}  // namespace

Storage::Storage(size_t nbytes) : nbytes_(nbytes), device_(Device::cpu()) {
  // Round up to a multiple of 64 so aligned_alloc accepts it, and so SIMD loads never cross a page
  // we do not own. Zero-byte tensors still get a valid pointer.
  size_t padded = (nbytes + 63) / 64 * 64;
  if (padded == 0) padded = 64;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (padded >= kHugeThreshold && padded < (size_t(1) << 62)) {
    const size_t mapped = (padded + kHugePage - 1) / kHugePage * kHugePage;
    data_ = map_huge(mapped);
    if (!data_) fail("Storage", "out of memory allocating ", nbytes, " bytes");
    deleter_ = [mapped](void* p) { munmap(p, mapped); };
    return;
  }
#endif
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

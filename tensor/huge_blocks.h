// Big tensor blocks: their own mappings, on transparent huge pages, kept for reuse.
//
// Storage (tensor/storage.h) takes every block of kHugeBlockMin bytes and more from here instead of malloc.
// Why, measured on the AMD Zen 4 VM of docs/performance.md ("stop 17"):
//   - Page faults. glibc maps a block of 32 MiB and more afresh for every allocation, and each 4 KiB page
//     faults on first touch: allocating, filling and freeing 64 MiB took 54 ms on one thread, against
//     3.4 ms to copy 64 MiB into a tensor that already exists.
//   - TLB reach. A kernel streaming 16 MiB in and 16 MiB out crosses 8192 pages of 4 KiB, more than the
//     core's second-level TLB holds; on 2 MiB pages it crosses 16. A 16 MiB copy ran 15% faster.
// So a big block is
//   1. mapped here (mmap), aligned to 2 MiB and madvised MADV_HUGEPAGE: where the kernel offers
//      transparent huge pages (/sys/kernel/mm/transparent_hugepage/enabled "always" or "madvise") it gets
//      2 MiB pages, 512 times fewer faults; elsewhere ordinary pages, as before;
//   2. started a "colour" (a multiple of 64 bytes below 4 KiB, changing from request to request) after the
//      boundary, so that the arrays of one kernel do not all fall into the same cache sets;
//   3. kept when freed, up to kHugeCacheCap bytes in all, and handed out again for a request of the same
//      rounded size: a training loop allocates the same shapes step after step, and a kept block is
//      already faulted in. The oldest kept blocks go back to the OS first when the cap is reached.
// Not with AddressSanitizer: there every block comes from malloc, so that ASan still sees overflows.
#pragma once

#include <cstddef>

namespace ng {

inline constexpr size_t kHugePageBytes = size_t(2) << 20;
inline constexpr size_t kHugeBlockMin = size_t(8) << 20;    // smaller blocks: malloc (the heap)
inline constexpr size_t kHugeCacheCap = size_t(256) << 20;  // freed big blocks kept, in all

// A block of `bytes` (rounded up to 2 MiB), starting a colour after a 2 MiB boundary; null when the OS has no
// memory for it.
// Its contents are undefined (a reused block holds what its last tensor wrote).
void* huge_block_take(size_t bytes);
// Returns a block from huge_block_take (the same `bytes`) for reuse. Never throws.
void huge_block_give(void* block, size_t bytes) noexcept;

// Whether Storage uses these blocks in this build (false under AddressSanitizer).
bool huge_blocks_enabled();

struct HugeBlockStats {
  size_t cached_bytes = 0;  // freed blocks kept for reuse
  size_t maps = 0;          // blocks mapped from the OS
  size_t reuses = 0;        // requests served from the kept blocks
};
HugeBlockStats huge_block_stats();

// Hands every kept block back to the OS (memory a process wants back between phases, say).
void release_huge_blocks();

// Asks for 2 MiB pages for the whole 2 MiB pages inside [p, p + bytes) (madvise MADV_HUGEPAGE), for a
// buffer that is not a Storage block, before its first touch. A hint: nothing happens where the OS has no
// transparent huge pages (or in an AddressSanitizer build).
void advise_huge_pages(void* p, size_t bytes) noexcept;

}  // namespace ng

// A simple caching allocator for device memory.
//
// cudaMalloc and cudaFree are slow (cudaFree synchronises the whole device), and a training step frees
// and re-allocates the same sizes every iteration. So a freed block is not returned to CUDA: it goes into
// a per-device cache keyed by size, and the next request of a similar size takes it back.
//
//   - sizes are rounded up to a multiple of 512 bytes (so 128-bit loads never run off the end, and
//     similar sizes share blocks);
//   - a request takes the smallest cached block that is at least as large and at most twice as large;
//   - when cudaMalloc runs out of memory, the cache is emptied (cudaFree) and the request retried once.
//
// All of normgrad's work runs on the default stream, in order, so a block freed by one op can be handed to
// the next op at once: the earlier kernels that used it are queued before any kernel that reuses it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "tensor/device.h"
#include "tensor/storage.h"

namespace ng::cuda {

// Device memory of at least `nbytes`, as a Storage whose deleter hands the block back to the cache.
std::shared_ptr<Storage> allocate(size_t nbytes, Device device);

struct AllocatorStats {
  size_t in_use_bytes = 0;   // held by live Storages
  size_t cached_bytes = 0;   // freed by normgrad, kept for reuse
  int64_t cache_hits = 0;    // requests served from the cache
  int64_t cuda_mallocs = 0;  // requests that called cudaMalloc
};
AllocatorStats allocator_stats(Device device);
// Return every cached block to CUDA (cudaFree).
void empty_cache();

// The rounding rule, exposed for tests: nbytes rounded up to a multiple of 512 (at least 512).
size_t round_allocation(size_t nbytes);

}  // namespace ng::cuda

// The caching allocator: see allocator.h.
#include "cuda/allocator.h"

#include <map>
#include <mutex>
#include <vector>

#include "cuda/runtime.h"
#include "tensor/error.h"

namespace ng::cuda {

size_t round_allocation(size_t nbytes) {
  const size_t kGranule = 512;
  size_t rounded = (nbytes + kGranule - 1) / kGranule * kGranule;
  return rounded == 0 ? kGranule : rounded;
}

namespace {

struct DeviceCache {
  std::multimap<size_t, void*> free_blocks;  // size -> block, smallest first
  AllocatorStats stats;
};

class CachingAllocator {
 public:
  void* take(size_t size, int device) {
    std::lock_guard<std::mutex> lock(mutex_);
    DeviceCache& cache = cache_for(device);
    // The smallest cached block that fits, if it is not more than twice the request.
    auto it = cache.free_blocks.lower_bound(size);
    if (it != cache.free_blocks.end() && it->first <= 2 * size) {
      void* block = it->second;
      size_t block_size = it->first;
      cache.free_blocks.erase(it);
      cache.stats.cached_bytes -= block_size;
      cache.stats.in_use_bytes += block_size;
      ++cache.stats.cache_hits;
      sizes_[block] = block_size;
      return block;
    }
    void* block = nullptr;
    cudaError_t status = cudaMalloc(&block, size);
    if (status == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      release_all_locked();
      status = cudaMalloc(&block, size);
    }
    check_status(status, "cudaMalloc(&block, size)");
    ++cache.stats.cuda_mallocs;
    cache.stats.in_use_bytes += size;
    sizes_[block] = size;
    return block;
  }

  // Called from Storage's destructor: must not throw.
  void give_back(void* block, int device) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    DeviceCache& cache = cache_for(device);
    auto it = sizes_.find(block);
    if (it == sizes_.end()) return;
    size_t size = it->second;
    sizes_.erase(it);
    cache.free_blocks.emplace(size, block);
    cache.stats.in_use_bytes -= size;
    cache.stats.cached_bytes += size;
  }

  void release_all() {
    std::lock_guard<std::mutex> lock(mutex_);
    release_all_locked();
  }

  AllocatorStats stats(int device) {
    std::lock_guard<std::mutex> lock(mutex_);
    return cache_for(device).stats;
  }

 private:
  DeviceCache& cache_for(int device) {
    if (size_t(device) >= caches_.size()) caches_.resize(size_t(device) + 1);
    return caches_[size_t(device)];
  }

  void release_all_locked() {
    int current = 0;
    (void)cudaGetDevice(&current);
    for (size_t d = 0; d < caches_.size(); ++d) {
      if (caches_[d].free_blocks.empty()) continue;
      (void)cudaSetDevice(int(d));
      for (auto& [size, block] : caches_[d].free_blocks) (void)cudaFree(block);
      caches_[d].free_blocks.clear();
      caches_[d].stats.cached_bytes = 0;
    }
    (void)cudaSetDevice(current);
  }

  std::mutex mutex_;
  std::vector<DeviceCache> caches_;
  std::map<void*, size_t> sizes_;  // live block -> its rounded size
};

// Never destroyed: Storages freed during static destruction must still find it.
CachingAllocator& the_allocator() {
  static CachingAllocator* allocator = new CachingAllocator;
  return *allocator;
}

}  // namespace

std::shared_ptr<Storage> allocate(size_t nbytes, Device device) {
  set_device(device, "cuda::allocate");
  const size_t size = round_allocation(nbytes);
  void* block = the_allocator().take(size, device.index);
  const int index = device.index;
  return std::make_shared<Storage>(block, nbytes, device,
                                   [index](void* p) { the_allocator().give_back(p, index); });
}

AllocatorStats allocator_stats(Device device) {
  return the_allocator().stats(device.index);
}

void empty_cache() {
  the_allocator().release_all();
}

}  // namespace ng::cuda

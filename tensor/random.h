// Random numbers: ng::Generator, a counter-based Philox4x32-10 generator.
//
// Counter-based means: the n-th random block is a pure function philox(key = seed, counter = n). Nothing
// is carried from one draw to the next except the counter. Element i of a tensor always uses block
// (offset + i / per_block), whichever thread computes it, so streams are reproducible at any thread count,
// and the whole state is two integers (seed, offset), easy to checkpoint.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "tensor/tensor.h"

namespace ng {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}
  Generator(const Generator& o) : seed_(o.seed_), offset_(o.offset()) {}
  Generator& operator=(const Generator& o) {
    set_state(o.seed_, o.offset());
    return *this;
  }

  // The 4 x 32 random bits of block `counter` (Philox4x32 with 10 rounds).
  std::array<uint32_t, 4> block(uint64_t counter) const;
  // Reserve n blocks: returns the first counter, and moves the offset past them. Atomic, so that threads
  // drawing from one generator (default_generator() is shared by the whole process) each get blocks of
  // their own; with a plain read and add, two threads could reserve the same blocks and draw the same
  // "random" numbers (2026-11-28: two threads of 100000 randn({4}) each lost 2,348 to 63,004 of the
  // 800,000 blocks in three runs; test Random.ThreadsDrawingFromOneGeneratorGetBlocksOfTheirOwn).
  // Which thread gets which blocks then depends on timing, as in PyTorch; one thread's draws stay
  // reproducible.
  uint64_t advance(uint64_t n_blocks) { return offset_.fetch_add(n_blocks, std::memory_order_relaxed); }

  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_.load(std::memory_order_relaxed); }
  // (not atomic with respect to advance: set the state while no other thread draws)
  void set_state(uint64_t seed, uint64_t offset) {
    seed_ = seed;
    offset_.store(offset, std::memory_order_relaxed);
  }
  void manual_seed(uint64_t seed) { set_state(seed, 0); }

 private:
  uint64_t seed_ = 0;
  std::atomic<uint64_t> offset_{0};
};

// The process-wide generator used when none is passed.
Generator& default_generator();
void manual_seed(uint64_t seed);

// U[0, 1)
Tensor rand(const Shape& shape, Generator& gen = default_generator(), DType dtype = DType::f32);
// U[lo, hi)
Tensor uniform(const Shape& shape, double lo, double hi, Generator& gen = default_generator(),
               DType dtype = DType::f32);
// N(mean, std^2), Box-Muller
Tensor randn(const Shape& shape, Generator& gen = default_generator(), DType dtype = DType::f32, double mean = 0.0,
             double std = 1.0);
// Integers uniform in [lo, hi), i64
Tensor randint(int64_t lo, int64_t hi, const Shape& shape, Generator& gen = default_generator());

// Fill an existing tensor in place (for parameter init). Bumps the version.
void uniform_(Tensor& t, double lo, double hi, Generator& gen = default_generator());
void normal_(Tensor& t, double mean, double std, Generator& gen = default_generator());

}  // namespace ng

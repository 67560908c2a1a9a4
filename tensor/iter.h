// Walking strided tensors.
//
// for_each_strided visits every element of `shape` for K operands, each with its own strides (in
// elements; 0 where an operand is broadcast). It first merges dims that are laid out back to back in every
// operand ("coalescing"), so a contiguous tensor of any shape becomes one flat run. It then calls
//
//     fn(offsets, n, inner_strides)
//
// once per run of the innermost dim: operand k's elements are at offsets[k] + i * inner_strides[k] for
// i in [0, n). Runs are handed out in parallel; how they are cut never depends on the thread count.
#pragma once

#include <array>

#include "tensor/parallel.h"
#include "tensor/shape.h"

namespace ng {

template <size_t K, typename Fn>
void for_each_strided(const Shape& shape_in, const std::array<Strides, K>& strides_in, Fn&& fn) {
  // 1. Drop size-1 dims, then merge neighbours that are contiguous with each other in all operands.
  Shape shape;
  std::array<Strides, K> st;
  for (size_t d = 0; d < shape_in.size(); ++d) {
    if (shape_in[d] == 0) return;  // empty tensor: nothing to do
    if (shape_in[d] == 1) continue;
    bool merge = !shape.empty();
    for (size_t k = 0; k < K && merge; ++k)
      merge = st[k].back() == strides_in[k][d] * shape_in[d];
    if (merge) {
      shape.back() *= shape_in[d];
      for (size_t k = 0; k < K; ++k) st[k].back() = strides_in[k][d];
    } else {
      shape.push_back(shape_in[d]);
      for (size_t k = 0; k < K; ++k) st[k].push_back(strides_in[k][d]);
    }
  }
  std::array<int64_t, K> offs{}, inner{};
  if (shape.empty()) {  // a single element
    fn(offs, int64_t(1), inner);
    return;
  }
  const int64_t nd = int64_t(shape.size());
  const int64_t n_inner = shape.back();
  for (size_t k = 0; k < K; ++k) inner[k] = st[k].back();
  const int64_t rows = numel(shape) / n_inner;

  if (rows == 1) {
    // One long run: cut it into fixed chunks so two threads can share it.
    constexpr int64_t kChunk = 1 << 15;
    parallel_for(n_inner, kChunk, [&](int64_t b, int64_t e) {
      std::array<int64_t, K> o;
      for (size_t k = 0; k < K; ++k) o[k] = b * inner[k];
      fn(o, e - b, inner);
    });
    return;
  }
  const int64_t grain = std::max<int64_t>(1, (1 << 14) / n_inner);
  parallel_for(rows, grain, [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      // Decode row r into an index over dims [0, nd-1) and sum the strides.
      std::array<int64_t, K> o{};
      int64_t rem = r;
      for (int64_t d = nd - 2; d >= 0; --d) {
        int64_t i = rem % shape[d];
        rem /= shape[d];
        for (size_t k = 0; k < K; ++k) o[k] += i * st[k][d];
      }
      fn(o, n_inner, inner);
    }
  });
}

}  // namespace ng

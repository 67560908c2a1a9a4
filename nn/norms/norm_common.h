// What the four norm files share: the input checks, dtype helpers, and the deterministic reduction of
// per-chunk partial sums (dweight, dbias, BatchNorm statistics).
//
// Determinism. A reduction over rows (dweight_j = sum_r dy_rj * xhat_rj) is cut into a FIXED number of row
// chunks that depends only on the sizes (row_chunks below), never on the thread count, and the chunks go in
// fixed groups of consecutive chunks (chunk_groups). Each group adds its chunks, in order, into its own
// partial row (no atomics, no sharing); the partial rows are then added in group order 0, 1, 2, ... So
// whether one thread runs every group or two threads share them, every addition happens in the same order
// and the result is bitwise the same.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "nn/norms/norm_math.h"
#include "tensor/parallel.h"
#include "tensor/tensor.h"

namespace ng::norms {

// Which implementation to run: the scalar reference loop (the readable one, also the tests' reference) or
// the fast Highway + OpenMP kernel.
enum class Impl { reference, fast };

// What a norm's forward returns: the output and the statistics saved for backward.
struct NormStats {
  Tensor y;     // like x
  Tensor mean;  // (groups), compute dtype; undefined for RMSNorm; BatchNorm: (C) in f64
  Tensor rstd;  // (groups), compute dtype
  Tensor var;   // BatchNorm only: the biased variance (C) in f64, for the running-stats update
};

// What a norm's backward returns; an entry is undefined where it was not asked for.
struct NormGrads {
  Tensor dx, dweight, dbias;
};

// Load a storage element into the compute type A, and store back (round to nearest even for f16/bf16).
template <typename A, typename T>
inline A load_acc(T v) {
  if constexpr (std::is_same_v<T, double>)
    return A(v);
  else
    return A(load_f32(v));
}
template <typename T, typename A>
inline T store_acc(A v) {
  if constexpr (std::is_same_v<T, double>)
    return T(v);
  else
    return store_f32<T>(float(v));
}

// The fixed chunking of `rows` rows of length `row_len` for reductions: at most 64 chunks, about 32 K
// elements each. Depends only on the sizes.
struct RowChunks {
  int64_t grain = 1;  // rows per chunk (the last may be shorter)
  int64_t count = 1;  // number of chunks
};
RowChunks row_chunks(int64_t rows, int64_t row_len);

// LayerNorm's bf16 forward tries the unshifted row sums in blocks of this many rows (UnshiftedGate,
// norm_simd-inl.h); its row chunks are whole blocks (layer_norm_forward_fast).
constexpr int64_t kUnshiftedGateRows = 16;

// Groups of consecutive chunks, at most kChunkGroups of them. One thread takes a whole group and adds its
// chunks, in chunk order, into ONE partial row (or, for BatchNorm's statistics, merges them into one row of
// moments); the final sum then reads one row per group. Why: a partial row is written by one core and read
// by another, and on a machine whose cores sit far apart every such cache line is a slow trip between them.
// Measured (AMD EPYC VM, 2 threads, BatchNorm forward at 4096 x 1024): one partial row per chunk (64 rows
// of 1024 doubles, zero-filled on the calling thread) 0.92-1.0 ms; 16 groups 0.62-0.66 ms. Like the chunks,
// the groups depend on the sizes only, so the bits do not depend on the thread count. 16 groups keep up to
// 16 threads busy.
constexpr int64_t kChunkGroups = 16;
struct ChunkGroups {
  int64_t per = 1;                                    // chunks per group (the last may have fewer)
  int64_t count = 1;                                  // number of groups
  int64_t first(int64_t g) const { return g * per; }  // first chunk of group g
  int64_t end(int64_t g, const RowChunks& c) const { return std::min(c.count, (g + 1) * per); }  // one past
};
ChunkGroups chunk_groups(const RowChunks& chunks);

// out[j] = part[0][j] + part[1][j] + ... + part[count-1][j], added in that order (part is count x n).
template <typename A>
void reduce_partials(const A* part, int64_t count, int64_t n, A* out) {
  parallel_for(n, 4096, [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j) out[j] = 0;
    for (int64_t c = 0; c < count; ++c) {
      const A* p = part + c * n;
      for (int64_t j = j0; j < j1; ++j) out[j] += p[j];
    }
  });
}

// A backward's sums over rows (dweight, dbias): out_a[j] and out_b[j] (n each; either may be null, then it
// is not computed). add(r0, r1, pa, pb) ADDS the sums of rows [r0, r1) into pa and pb (null where the output
// is). Every group's partial rows are zeroed by the thread that fills them, its chunks are added in chunk
// order, and the groups' rows are summed in group order.
template <typename A, typename Fn>
void sum_over_chunks(const RowChunks& chunks, int64_t rows, int64_t n, A* out_a, A* out_b, const Fn& add) {
  const ChunkGroups groups = chunk_groups(chunks);
  const auto part_a = std::make_unique_for_overwrite<A[]>(out_a ? size_t(groups.count * n) : 0);
  const auto part_b = std::make_unique_for_overwrite<A[]>(out_b ? size_t(groups.count * n) : 0);
  parallel_for(groups.count, 1, [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g) {
      A* pa = out_a ? part_a.get() + g * n : nullptr;
      A* pb = out_b ? part_b.get() + g * n : nullptr;
      if (pa) std::fill_n(pa, n, A(0));
      if (pb) std::fill_n(pb, n, A(0));
      for (int64_t k = groups.first(g); k < groups.end(g, chunks); ++k)
        add(k * chunks.grain, std::min(rows, (k + 1) * chunks.grain), pa, pb);
    }
  });
  if (out_a) reduce_partials(part_a.get(), groups.count, n, out_a);
  if (out_b) reduce_partials(part_b.get(), groups.count, n, out_b);
}

// ---- checks shared by the F:: functions (each throws ng::Error naming `op`) ----
void check_float_input(const Tensor& x, const char* op);
void check_eps(double eps, const char* op);
// The same, and eps must not round to 0 in x's compute dtype (f32 for f32, f16 and bf16 inputs).
void check_eps(double eps, const Tensor& x, const char* op);
// momentum (when set: BatchNorm's and InstanceNorm's running statistics) in [0, 1]; NaN is refused.
void check_momentum(std::optional<double> momentum, const char* op);
// weight/bias (either may be undefined) must have exactly `shape`; `what` describes where it comes from,
// e.g. "normalized_shape" or "the channel dimension of x".
void check_affine(const Tensor& t, const char* name, const Shape& shape, const Tensor& x, const char* what,
                  const char* op);

// The dtype rule for weight and bias (either may be undefined). Mixed float dtypes are never converted
// silently (an f32 x with an f64 weight would get its weight rounded): weight and bias must have x's dtype,
// with one exception, f16/bf16 x with f32 weight and bias, which is how MiniMind keeps its norm weights
// (the kernels compute in f32 anyway). Anything else is an ng::Error naming `op`, the dtype given and the
// dtype(s) expected. (BatchNorm's running stats are buffers, read and written in f64 whatever their dtype.)
void check_affine_dtype(const Tensor& t, const char* name, const Tensor& x, const char* op);

// Every argument check of a LayerNorm call (x, normalized_shape, weight, bias, eps), for F::layer_norm, the
// fused F::add_layer_norm and the CUDA op alike. Returns the row length, the product of normalized_shape.
int64_t check_layer_norm_args(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                              const Tensor& bias, double eps, const char* op);
// The same for RMSNorm over the last dim. Returns the row length C = x.size(-1).
int64_t check_rms_norm_args(const Tensor& x, const Tensor& weight, double eps, const char* op);

// A detached, contiguous copy-or-view of t in dtype `dt` (undefined in, undefined out).
Tensor contiguous_as(const Tensor& t, DType dt);

// A gradient computed in the compute dtype, returned in the dtype and shape of the tensor it belongs to.
Tensor grad_like(const Tensor& g, DType dt, const Shape& shape);

}  // namespace ng::norms

// What every CUDA kernel file shares: element types, 128-bit packs, deterministic reductions, indexing.
//
// Element types. normgrad's f16/bf16 are 16-bit structs; on the device they are CUDA's __half and
// __nv_bfloat16 (same bits). Every kernel computes in acc_t<T>: float for f32/f16/bf16, double for f64.
//
// Determinism. Reductions here never use floating-point atomics. A warp sums with a butterfly of
// __shfl_xor_sync (a fixed pattern), a block sums its warps' results in warp order, and a reduction that
// spans blocks writes one partial per block and adds them in a second pass, in block order. The result
// is therefore the same bits on every run.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/runtime.h"
#include "tensor/dtype.h"
#include "tensor/tensor.h"

namespace ng::cuda {

// ---- element types -------------------------------------------------------------------------------------
template <typename T>
struct acc_type {
  using type = float;
};
template <>
struct acc_type<double> {
  using type = double;
};
template <typename T>
using acc_t = typename acc_type<T>::type;

template <typename T>
__device__ __forceinline__ acc_t<T> to_acc(T v) {
  if constexpr (std::is_same_v<T, __half>)
    return __half2float(v);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __bfloat162float(v);
  else
    return acc_t<T>(v);
}
// A double goes to f16/bf16 in one rounding, as the CPU's from_double does: through float first it was
// rounded twice (1.0004882812509095 -> f16 1.0 here, 1.0009765625 on the CPU; stop 44's review).
template <typename T, typename A>
__device__ __forceinline__ T from_acc(A v) {
  if constexpr (std::is_same_v<T, __half>) {
    if constexpr (std::is_same_v<A, double>)
      return __double2half(v);
    else
      return __float2half_rn(float(v));
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    if constexpr (std::is_same_v<A, double>)
      return __double2bfloat16(v);
    else
      return __float2bfloat16_rn(float(v));
  } else {
    return T(v);
  }
}

// A host-side double (a fill value) as the device type T, with the CPU's rounding (ng::from_double: one
// rounding), so that fill_ and masked_fill write the bits the CPU writes.
template <typename T>
inline T device_value(double value) {
  if constexpr (std::is_same_v<T, __half>) {
    __half_raw raw;
    raw.x = ng::from_double<ng::f16>(value).bits;
    return __half(raw);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    __nv_bfloat16_raw raw;
    raw.x = ng::from_double<ng::bf16>(value).bits;
    return __nv_bfloat16(raw);
  } else {
    return T(value);
  }
}

// Call a templated lambda with the DEVICE type of a floating dtype:
//   NG_CUDA_DISPATCH_FLOAT(x.dtype(), "layer_norm", [&]<typename T>() { kernel<T><<<...>>>(...); });
#define NG_CUDA_DISPATCH_FLOAT(dtype, op, ...)                                                            \
  do {                                                                                                    \
    switch (dtype) {                                                                                      \
      NG_DISPATCH_CASE(::ng::DType::f32, float, __VA_ARGS__)                                              \
      NG_DISPATCH_CASE(::ng::DType::f64, double, __VA_ARGS__)                                             \
      NG_DISPATCH_CASE(::ng::DType::f16, __half, __VA_ARGS__)                                             \
      NG_DISPATCH_CASE(::ng::DType::bf16, __nv_bfloat16, __VA_ARGS__)                                     \
      default:                                                                                            \
        ::ng::fail(op, "expected a floating dtype (f32, f64, f16, bf16), got ", ::ng::dtype_name(dtype)); \
    }                                                                                                     \
  } while (0)

// Device pointer of a tensor's first element, as the device type T.
template <typename T>
T* dptr(const Tensor& t) {
  return static_cast<T*>(t.raw_data());
}

// ---- 128-bit packs -------------------------------------------------------------------------------------
// V consecutive elements. When V * sizeof(T) == 16 a pack moves as one 128-bit load/store (the pointer must
// be 16-byte aligned: callers check that with is_aligned16 and fall back to V = 1 otherwise).
template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};
template <typename T>
constexpr int kPack = 16 / int(sizeof(T));  // f32: 4, f64: 2, f16/bf16: 8

template <typename T, int V>
__device__ __forceinline__ Pack<T, V> load_pack(const T* p) {
  return *reinterpret_cast<const Pack<T, V>*>(p);
}
template <typename T, int V>
__device__ __forceinline__ void store_pack(T* p, const Pack<T, V>& pack) {
  *reinterpret_cast<Pack<T, V>*>(p) = pack;
}
inline bool is_aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

// ---- deterministic reductions ----------------------------------------------------------------------------
// Sum over the 32 lanes of a warp; every lane gets the result. The butterfly pattern is fixed.
template <typename A>
__device__ __forceinline__ A warp_sum(A v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}
template <typename A>
__device__ __forceinline__ A warp_max(A v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Sum over a 1-D block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
// `scratch` holds 32 values in shared memory. Warps are added in warp order: deterministic.
template <typename A>
__device__ __forceinline__ A block_sum(A v, A* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  A total = 0;
  for (int w = 0; w < warps; ++w) total += scratch[w];
  return total;
}
template <typename A>
__device__ __forceinline__ A block_max(A v, A* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  A best = scratch[0];
  for (int w = 1; w < warps; ++w) best = fmax(best, scratch[w]);
  return best;
}

// The threads that share one row. Warp-per-row: 32 lanes of a warp (blockDim = (32, rows per block)).
// Block-per-row: the whole 1-D block. Row kernels are written once against this.
template <bool kBlockPerRow>
struct RowTeam {
  __device__ static int64_t row() {
    return kBlockPerRow ? int64_t(blockIdx.x) : int64_t(blockIdx.x) * blockDim.y + threadIdx.y;
  }
  __device__ static int rank() { return threadIdx.x; }
  __device__ static int size() { return kBlockPerRow ? int(blockDim.x) : 32; }
  template <typename A>
  __device__ static A sum(A v, A* scratch) {
    if constexpr (kBlockPerRow)
      return block_sum(v, scratch);
    else
      return warp_sum(v);
  }
  template <typename A>
  __device__ static A max(A v, A* scratch) {
    if constexpr (kBlockPerRow)
      return block_max(v, scratch);
    else
      return warp_max(v);
  }
};

// Rows up to this length run warp-per-row, longer ones block-per-row.
constexpr int64_t kWarpPerRowMax = 4096;
constexpr int kRowsPerBlock = 4;          // warps (rows) per block in warp-per-row mode
constexpr int kBlockPerRowThreads = 512;  // threads per block in block-per-row mode

inline int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// A grid of `blocks` blocks along x, or an ng::Error naming `op` past CUDA's limit of 2^31 - 1: an
// unsigned(blocks) of more would launch a truncated grid that leaves rows unwritten, silently, and one
// between 2^31 and 2^32 fails with "invalid configuration argument".
inline unsigned grid_x(int64_t blocks, const char* op) {
  NG_CHECK(blocks <= 2147483647, op, "needs ", blocks, " blocks of rows, past CUDA's grid limit of 2^31 - 1");
  return unsigned(blocks);
}

// Launch a row kernel (the norms', softmax's and cross-entropy's): warp-per-row up to kWarpPerRowMax
// values, block-per-row beyond.
template <typename LaunchWarp, typename LaunchBlock>
void launch_rows(int64_t rows, int64_t L, LaunchWarp&& warp, LaunchBlock&& block, const char* op) {
  if (rows == 0) return;
  if (L <= kWarpPerRowMax)
    warp(dim3(grid_x(ceil_div(rows, kRowsPerBlock), op)), dim3(32, kRowsPerBlock));
  else
    block(dim3(grid_x(rows, op)), dim3(kBlockPerRowThreads));
  NG_CUDA_CHECK_LAUNCH();
}

// ---- strided indexing (elementwise ops with broadcasting) -----------------------------------------------
constexpr int kMaxDims = 8;
// Maps a row-major linear index over `sizes` to element offsets in up to K operands with their own strides
// (0 where an operand is broadcast).
template <int K>
struct StridedIndexer {
  int ndim = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[K][kMaxDims] = {};

  __device__ __forceinline__ void offsets(int64_t linear, int64_t (&out)[K]) const {
    for (int k = 0; k < K; ++k) out[k] = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      const int64_t i = linear % sizes[d];
      linear /= sizes[d];
      for (int k = 0; k < K; ++k) out[k] += i * strides[k][d];
    }
  }
};

}  // namespace ng::cuda

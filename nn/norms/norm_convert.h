// The conversions the norm kernels read and write half-precision tensors with, on a whole array, on the
// best SIMD target (nn/norms/norm_convert.cpp says why they are exported: so the tests can check them bit
// by bit on every target).
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace ng::norms {

// out[i] = the f16 / bf16 nearest to in[i] (ties to even; NaN stays NaN), the same bits as ng::f32_to_f16 /
// ng::f32_to_bf16, for i in [0, n).
void store_rounded(const float* in, f16* out, int64_t n);
void store_rounded(const float* in, bf16* out, int64_t n);

// out[i] = in[i] as a float (exact), the same bits as ng::f16_to_f32 / ng::bf16_to_f32, for i in [0, n).
void load_widened(const f16* in, float* out, int64_t n);
void load_widened(const bf16* in, float* out, int64_t n);

}  // namespace ng::norms

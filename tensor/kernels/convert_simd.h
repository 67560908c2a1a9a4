// Highway kernels for float <-> f16 / bf16 on contiguous arrays, with dynamic dispatch, exact on every
// target: the same bits as the scalar ng::f32_to_f16, ng::f32_to_bf16, ng::f16_to_f32 and ng::bf16_to_f32
// (tensor/dtype.h), except that F16C's load makes a signalling f16 NaN quiet. Tensor::to and every copy
// between those dtypes use them on contiguous runs; the vector conversions themselves
// (tensor/kernels/half-inl.h) are also what the norm kernels read and write half precision with.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace ng::simd {

// out[i] = in[i] rounded to nearest even (NaN stays NaN), for i in [0, n). On the calling thread.
void convert(const float* in, f16* out, int64_t n);
void convert(const float* in, bf16* out, int64_t n);
// out[i] = in[i] as a float (exact), for i in [0, n). On the calling thread.
void convert(const f16* in, float* out, int64_t n);
void convert(const bf16* in, float* out, int64_t n);

}  // namespace ng::simd

// Highway kernels for contiguous elementwise ops. See elementwise_simd.h.
//
// How Highway's dynamic dispatch works: this file is compiled once per SIMD target (foreach_target.h
// re-includes it with HWY_NAMESPACE = N_SSE4, N_AVX2, N_AVX3, ...). HWY_EXPORT builds a table of the
// per-target versions, and HWY_DYNAMIC_DISPATCH calls the best one the CPU supports.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tensor/kernels/elementwise_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"
#include "tensor/kernels/tail-inl.h"

HWY_BEFORE_NAMESPACE();
namespace ng::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <typename T>
void BinaryT(int op, const T* HWY_RESTRICT a, const T* HWY_RESTRICT b, T* HWY_RESTRICT y, int64_t n) {
  const hn::ScalableTag<T> d;
  const int64_t L = int64_t(hn::Lanes(d));
  int64_t i = 0;
  // The switch is outside the loop: one tight loop per op.
#define NG_BINARY_LOOP(EXPR)                                                   \
  for (; i + L <= n; i += L) {                                                 \
    const auto va = hn::LoadU(d, a + i);                                       \
    const auto vb = hn::LoadU(d, b + i);                                       \
    hn::StoreU(EXPR, d, y + i);                                                \
  }                                                                            \
  if (i < n) {                                                                 \
    const size_t rest = size_t(n - i); /* tail via a buffer: see tail-inl.h */ \
    const auto va = LoadTail(d, a + i, rest);                                  \
    const auto vb = LoadTail(d, b + i, rest, T(1)); /* 1: no 0/0 in div */     \
    StoreTail(EXPR, d, y + i, rest);                                           \
  }
  switch (op) {
    case 0: NG_BINARY_LOOP(hn::Add(va, vb)); break;
    case 1: NG_BINARY_LOOP(hn::Sub(va, vb)); break;
    case 2: NG_BINARY_LOOP(hn::Mul(va, vb)); break;
    case 3: NG_BINARY_LOOP(hn::Div(va, vb)); break;
  }
#undef NG_BINARY_LOOP
}

template <typename T>
bool UnaryT(int op, const T* HWY_RESTRICT x, T* HWY_RESTRICT y, int64_t n) {
  const hn::ScalableTag<T> d;
  const int64_t L = int64_t(hn::Lanes(d));
  const auto zero = hn::Zero(d);
  const auto one = hn::Set(d, T(1));
  int64_t i = 0;
#define NG_UNARY_LOOP(EXPR)                                                    \
  for (; i + L <= n; i += L) {                                                 \
    const auto v = hn::LoadU(d, x + i);                                        \
    hn::StoreU(EXPR, d, y + i);                                                \
  }                                                                            \
  if (i < n) {                                                                 \
    const size_t rest = size_t(n - i);                                         \
    const auto v = LoadTail(d, x + i, rest, T(1));                             \
    StoreTail(EXPR, d, y + i, rest);                                           \
  }
  switch (op) {
    case 0: NG_UNARY_LOOP(hn::Neg(v)); return true;                          // neg
    case 1: NG_UNARY_LOOP(hn::Exp(d, v)); return true;                       // exp
    case 3: NG_UNARY_LOOP(hn::Sqrt(v)); return true;                         // sqrt
    case 4: NG_UNARY_LOOP(hn::Div(one, hn::Sqrt(v))); return true;           // rsqrt (exact, not the estimate)
    case 5: NG_UNARY_LOOP(hn::Abs(v)); return true;                          // abs
    case 8: NG_UNARY_LOOP(hn::Mul(v, v)); return true;                       // square
    case 9: NG_UNARY_LOOP(hn::IfThenElse(hn::Gt(v, zero), v, zero)); return true;  // relu
    case 12: NG_UNARY_LOOP(hn::Div(one, hn::Add(one, hn::Exp(d, hn::Neg(v))))); return true;  // sigmoid
    case 11: NG_UNARY_LOOP(hn::Div(v, hn::Add(one, hn::Exp(d, hn::Neg(v))))); return true;    // silu
    case 13: NG_UNARY_LOOP(hn::Tanh(d, v)); return true;                     // tanh
    default: return false;
  }
#undef NG_UNARY_LOOP
}

void BinaryF32(int op, const float* a, const float* b, float* y, int64_t n) { BinaryT(op, a, b, y, n); }
void BinaryF64(int op, const double* a, const double* b, double* y, int64_t n) { BinaryT(op, a, b, y, n); }
bool UnaryF32(int op, const float* x, float* y, int64_t n) { return UnaryT(op, x, y, n); }
bool UnaryF64(int op, const double* x, double* y, int64_t n) { return UnaryT(op, x, y, n); }

}  // namespace HWY_NAMESPACE
}  // namespace ng::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "tensor/kernels/elementwise_simd.h"
namespace ng::simd {
HWY_EXPORT(BinaryF32);
HWY_EXPORT(BinaryF64);
HWY_EXPORT(UnaryF32);
HWY_EXPORT(UnaryF64);

void binary(int op, const float* a, const float* b, float* y, int64_t n) {
  HWY_DYNAMIC_DISPATCH(BinaryF32)(op, a, b, y, n);
}
void binary(int op, const double* a, const double* b, double* y, int64_t n) {
  HWY_DYNAMIC_DISPATCH(BinaryF64)(op, a, b, y, n);
}
bool unary(int op, const float* x, float* y, int64_t n) { return HWY_DYNAMIC_DISPATCH(UnaryF32)(op, x, y, n); }
bool unary(int op, const double* x, double* y, int64_t n) { return HWY_DYNAMIC_DISPATCH(UnaryF64)(op, x, y, n); }
}  // namespace ng::simd
#endif

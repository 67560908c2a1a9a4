// Highway kernels for contiguous elementwise ops. See elementwise_simd.h.
//
// How Highway's dynamic dispatch works: this file is compiled once per SIMD target (foreach_target.h
// re-includes it with HWY_NAMESPACE = N_SSE4, N_AVX2, N_AVX3, ...). HWY_EXPORT builds a table of the
// per-target versions, and HWY_DYNAMIC_DISPATCH calls the best one the CPU supports.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tensor/kernels/elementwise_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <limits>

#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"
#include "tensor/kernels/tail-inl.h"

HWY_BEFORE_NAMESPACE();
namespace ng::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// kScalarA / kScalarB: that operand is one value repeated over the run (a broadcast scalar, stride 0: e.g.
// attention's att * (1 / sqrt(head size)) or 1 - x), loaded once into every lane.
template <typename T, bool kScalarA, bool kScalarB>
void BinaryT(int op, const T* HWY_RESTRICT a, const T* HWY_RESTRICT b, T* HWY_RESTRICT y, int64_t n) {
  const hn::ScalableTag<T> d;
  const int64_t L = int64_t(hn::Lanes(d));
  int64_t i = 0;
  if (n <= 0) return;  // a scalar operand is read below, and an empty call may point past its buffer
  [[maybe_unused]] const auto sa = hn::Set(d, kScalarA ? a[0] : T(0));
  [[maybe_unused]] const auto sb = hn::Set(d, kScalarB ? b[0] : T(0));
  // The switch is outside the loop: one tight loop per op.
#define NG_BINARY_LOOP(EXPR)                                                               \
  for (; i + L <= n; i += L) {                                                             \
    const auto va = kScalarA ? sa : hn::LoadU(d, a + i);                                   \
    const auto vb = kScalarB ? sb : hn::LoadU(d, b + i);                                   \
    hn::StoreU(EXPR, d, y + i);                                                            \
  }                                                                                        \
  if (i < n) {                                                                             \
    const size_t rest = size_t(n - i); /* tail via a buffer: see tail-inl.h */             \
    const auto va = kScalarA ? sa : LoadTail(d, a + i, rest);                              \
    const auto vb = kScalarB ? sb : LoadTail(d, b + i, rest, T(1)); /* 1: no 0/0 in div */ \
    StoreTail(EXPR, d, y + i, rest);                                                       \
  }
  // clang-format off
  switch (op) {
    case 0: NG_BINARY_LOOP(hn::Add(va, vb)); break;
    case 1: NG_BINARY_LOOP(hn::Sub(va, vb)); break;
    case 2: NG_BINARY_LOOP(hn::Mul(va, vb)); break;
    case 3: NG_BINARY_LOOP(hn::Div(va, vb)); break;
  }
    // clang-format on
#undef NG_BINARY_LOOP
}

// e^v for every input, as std::exp gives it. Highway 1.0.3's Exp is valid for v <= 104 (f32) and v <= 706
// (f64) only, and gives 0 for NaN: past its range it returned garbage (f32: exp(200) = 0, exp(710) = 1.24,
// exp(1000) = 8e-29; f64: exp(1e10) = 1.5e110), so sigmoid(-200) was 1 and silu(-200) was -200 instead of
// ~0, and exp(NaN) = 0, sigmoid(NaN) = 1 hid a NaN. In f32 the bound is above log(max) = 88.7, so past it
// e^v is inf. In f64 it is below log(max) = 709.78, and (706, 709.78] has finite results (exp(707) =
// 1.1e307, which was inf until stop 44): there e^v = (e^(v/2))^2, v/2 being exact, and the square overflows
// to inf by itself past 709.78. A NaN goes through.
template <class D, class V>
HWY_INLINE V ExpAll(D d, V v) {
  using T = hn::TFromD<D>;
  const V bound = hn::Set(d, T(sizeof(T) == 4 ? 104.0 : 706.0));
  const V e = hn::Exp(d, hn::Min(v, bound));  // keep Exp in its range; the lanes past it are replaced below
  const V inf = hn::Set(d, std::numeric_limits<T>::infinity());
  const auto past = hn::Gt(v, bound);
  V above = inf;
  if constexpr (sizeof(T) == 8) {
    if (!hn::AllFalse(d, past)) {
      // Min(v, 1411): half of it, 705.5, stays in Exp's range; e^705.5 squared is inf already.
      const V h = hn::Exp(d, hn::Mul(hn::Min(v, hn::Set(d, T(1411))), hn::Set(d, T(0.5))));
      above = hn::Mul(h, h);
    }
  }
  return hn::IfThenElse(hn::IsNaN(v), v, hn::IfThenElse(past, above, e));
}

template <typename T>
bool UnaryT(int op, const T* HWY_RESTRICT x, T* HWY_RESTRICT y, int64_t n) {
  const hn::ScalableTag<T> d;
  const int64_t L = int64_t(hn::Lanes(d));
  const auto zero = hn::Zero(d);
  const auto one = hn::Set(d, T(1));
  int64_t i = 0;
#define NG_UNARY_LOOP(EXPR)                        \
  for (; i + L <= n; i += L) {                     \
    const auto v = hn::LoadU(d, x + i);            \
    hn::StoreU(EXPR, d, y + i);                    \
  }                                                \
  if (i < n) {                                     \
    const size_t rest = size_t(n - i);             \
    const auto v = LoadTail(d, x + i, rest, T(1)); \
    StoreTail(EXPR, d, y + i, rest);               \
  }
  // clang-format off
  switch (op) {
    case 0: NG_UNARY_LOOP(hn::Neg(v)); return true;                          // neg
    case 1: NG_UNARY_LOOP(ExpAll(d, v)); return true;                        // exp
    case 3: NG_UNARY_LOOP(hn::Sqrt(v)); return true;                         // sqrt
    case 4: NG_UNARY_LOOP(hn::Div(one, hn::Sqrt(v))); return true;           // rsqrt (exact, not the estimate)
    case 5: NG_UNARY_LOOP(hn::Abs(v)); return true;                          // abs
    case 8: NG_UNARY_LOOP(hn::Mul(v, v)); return true;                       // square
    case 9: NG_UNARY_LOOP(hn::IfThenZeroElse(hn::Le(v, zero), v)); return true;  // relu (NaN stays NaN)
    case 12: NG_UNARY_LOOP(hn::Div(one, hn::Add(one, ExpAll(d, hn::Neg(v))))); return true;  // sigmoid
    case 11: NG_UNARY_LOOP(hn::Div(v, hn::Add(one, ExpAll(d, hn::Neg(v))))); return true;    // silu
    case 13: NG_UNARY_LOOP(hn::Tanh(d, v)); return true;                     // tanh
    default: return false;
  }
    // clang-format on
#undef NG_UNARY_LOOP
}

// dx[i] = dout[i] * op'(x[i]), with y = op(x) from the forward. The derivatives are those of un_derivative in
// ops/elementwise.cpp (the scalar reference), written with the same operations in the same order, and the
// product with dout last, as there: so relu, exp, neg, sqrt, rsqrt, abs, square, sigmoid and tanh give the
// reference's bits, and gelu and silu differ only where Highway's tanh / exp differ from the C library's
// (a few ulp). Note relu: dout * (x <= 0 ? 0 : 1), not a select of dout, so a NaN or inf dout still gives
// NaN where x <= 0, as the reference does (anomaly detection relies on it).
template <typename T>
bool UnaryBackwardT(int op, const T* HWY_RESTRICT x, const T* HWY_RESTRICT y, const T* HWY_RESTRICT dout,
                    T* HWY_RESTRICT dx, int64_t n) {
  const hn::ScalableTag<T> d;
  const int64_t L = int64_t(hn::Lanes(d));
  const auto zero = hn::Zero(d);
  const auto one = hn::Set(d, T(1));
  const auto half = hn::Set(d, T(0.5));
  int64_t i = 0;
  // DERIV: the derivative from vx = x and vy = y; dx = dout * DERIV.
#define NG_UNARY_BACKWARD_LOOP(DERIV)                                        \
  for (; i + L <= n; i += L) {                                               \
    const auto vx = hn::LoadU(d, x + i);                                     \
    const auto vy = hn::LoadU(d, y + i);                                     \
    (void)vx, (void)vy; /* a derivative may use one, or neither */           \
    hn::StoreU(hn::Mul(hn::LoadU(d, dout + i), DERIV), d, dx + i);           \
  }                                                                          \
  if (i < n) {                                                               \
    const size_t rest = size_t(n - i); /* padded with 1: no log(0) or 1/0 */ \
    const auto vx = LoadTail(d, x + i, rest, T(1));                          \
    const auto vy = LoadTail(d, y + i, rest, T(1));                          \
    (void)vx, (void)vy;                                                      \
    StoreTail(hn::Mul(LoadTail(d, dout + i, rest), DERIV), d, dx + i, rest); \
  }
  // clang-format off
  switch (op) {
    case 0: NG_UNARY_BACKWARD_LOOP(hn::Set(d, T(-1))); return true;  // neg
    case 1: NG_UNARY_BACKWARD_LOOP(vy); return true;                 // exp: e^x
    case 2: NG_UNARY_BACKWARD_LOOP(hn::Div(one, vx)); return true;   // log: 1/x
    case 3: NG_UNARY_BACKWARD_LOOP(hn::Div(half, vy)); return true;  // sqrt: 1 / (2 sqrt x)
    case 4:                                                          // rsqrt: -y^3 / 2
      NG_UNARY_BACKWARD_LOOP(hn::Mul(hn::Mul(hn::Mul(hn::Set(d, T(-0.5)), vy), vy), vy));
      return true;
    case 5:  // abs: sign(x), 0 at 0
      NG_UNARY_BACKWARD_LOOP(hn::IfThenElse(hn::Gt(vx, zero), one, hn::IfThenElseZero(hn::Lt(vx, zero), hn::Neg(one))));
      return true;
    case 8: NG_UNARY_BACKWARD_LOOP(hn::Mul(hn::Set(d, T(2)), vx)); return true;   // square: 2x
    case 9: NG_UNARY_BACKWARD_LOOP(hn::IfThenZeroElse(hn::Le(vx, zero), one)); return true;  // relu
    case 10: {  // gelu: 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2), t = tanh(k (x + c x^3))
      const auto k = hn::Set(d, T(0.7978845608028654)), c = hn::Set(d, T(0.044715));
      const auto c3 = hn::Set(d, T(3 * 0.044715));
      NG_UNARY_BACKWARD_LOOP(([&] {
        const auto x3 = hn::Mul(hn::Mul(vx, vx), vx);
        const auto t = hn::Tanh(d, hn::Mul(k, hn::Add(vx, hn::Mul(c, x3))));
        const auto left = hn::Mul(half, hn::Add(one, t));
        const auto right = hn::Mul(hn::Mul(hn::Mul(hn::Mul(half, vx), hn::Sub(one, hn::Mul(t, t))), k),
                                   hn::Add(one, hn::Mul(hn::Mul(c3, vx), vx)));
        return hn::Add(left, right);
      }()));
      return true;
    }
    case 11:  // silu: s (1 + x (1 - s)), s = sigmoid(x)
      NG_UNARY_BACKWARD_LOOP(([&] {
        const auto sg = hn::Div(one, hn::Add(one, ExpAll(d, hn::Neg(vx))));
        return hn::Mul(sg, hn::Add(one, hn::Mul(vx, hn::Sub(one, sg))));
      }()));
      return true;
    case 12: NG_UNARY_BACKWARD_LOOP(hn::Mul(vy, hn::Sub(one, vy))); return true;  // sigmoid: y (1 - y)
    case 13: NG_UNARY_BACKWARD_LOOP(hn::Sub(one, hn::Mul(vy, vy))); return true;  // tanh: 1 - y^2
    default: return false;  // pow, clamp: the scalar loop
  }
    // clang-format on
#undef NG_UNARY_BACKWARD_LOOP
}

// clang-format off
// scalar: 0 both operands are runs, 1 a is a broadcast scalar, 2 b is.
template <typename T>
void BinaryAnyT(int op, int scalar, const T* a, const T* b, T* y, int64_t n) {
  if (scalar == 1) BinaryT<T, true, false>(op, a, b, y, n);
  else if (scalar == 2) BinaryT<T, false, true>(op, a, b, y, n);
  else BinaryT<T, false, false>(op, a, b, y, n);
}
void BinaryF32(int op, int scalar, const float* a, const float* b, float* y, int64_t n) { BinaryAnyT(op, scalar, a, b, y, n); }
void BinaryF64(int op, int scalar, const double* a, const double* b, double* y, int64_t n) { BinaryAnyT(op, scalar, a, b, y, n); }
bool UnaryF32(int op, const float* x, float* y, int64_t n) { return UnaryT(op, x, y, n); }
bool UnaryF64(int op, const double* x, double* y, int64_t n) { return UnaryT(op, x, y, n); }
// clang-format on
bool UnaryBackwardF32(int op, const float* x, const float* y, const float* dout, float* dx, int64_t n) {
  return UnaryBackwardT(op, x, y, dout, dx, n);
}
bool UnaryBackwardF64(int op, const double* x, const double* y, const double* dout, double* dx, int64_t n) {
  return UnaryBackwardT(op, x, y, dout, dx, n);
}

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
  HWY_DYNAMIC_DISPATCH(BinaryF32)(op, 0, a, b, y, n);
}
void binary(int op, const double* a, const double* b, double* y, int64_t n) {
  HWY_DYNAMIC_DISPATCH(BinaryF64)(op, 0, a, b, y, n);
}
void binary_scalar_a(int op, const float* a, const float* b, float* y, int64_t n) {
  HWY_DYNAMIC_DISPATCH(BinaryF32)(op, 1, a, b, y, n);
}
void binary_scalar_a(int op, const double* a, const double* b, double* y, int64_t n) {
  HWY_DYNAMIC_DISPATCH(BinaryF64)(op, 1, a, b, y, n);
}
void binary_scalar_b(int op, const float* a, const float* b, float* y, int64_t n) {
  HWY_DYNAMIC_DISPATCH(BinaryF32)(op, 2, a, b, y, n);
}
void binary_scalar_b(int op, const double* a, const double* b, double* y, int64_t n) {
  HWY_DYNAMIC_DISPATCH(BinaryF64)(op, 2, a, b, y, n);
}
// clang-format off
bool unary(int op, const float* x, float* y, int64_t n) { return HWY_DYNAMIC_DISPATCH(UnaryF32)(op, x, y, n); }
bool unary(int op, const double* x, double* y, int64_t n) { return HWY_DYNAMIC_DISPATCH(UnaryF64)(op, x, y, n); }
// clang-format on
HWY_EXPORT(UnaryBackwardF32);
HWY_EXPORT(UnaryBackwardF64);
bool unary_backward(int op, const float* x, const float* y, const float* dout, float* dx, int64_t n) {
  return HWY_DYNAMIC_DISPATCH(UnaryBackwardF32)(op, x, y, dout, dx, n);
}
bool unary_backward(int op, const double* x, const double* y, const double* dout, double* dx, int64_t n) {
  return HWY_DYNAMIC_DISPATCH(UnaryBackwardF64)(op, x, y, dout, dx, n);
}
}  // namespace ng::simd
#endif

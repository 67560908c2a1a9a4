// Highway kernels for softmax rows. See softmax_simd.h; the dispatch pattern is explained in
// elementwise_simd.cpp.
//
// The scalar math each loop vectorises (ops/softmax.cpp has it as the reference):
//   m = max_j x_j;   s = sum_j exp(x_j - m);   y_j = exp(x_j - m) / s   or   y_j = (x_j - m) - log s
// Tails (L not a multiple of the vector length) go through LoadTail / StoreTail (kernels/tail-inl.h).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tensor/kernels/softmax_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"
#include "tensor/kernels/tail-inl.h"

#include <cmath>
#include <limits>

HWY_BEFORE_NAMESPACE();
namespace ng::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// m = max_j x_j (tail lanes padded with -inf so they never win).
template <typename T>
T RowMax(const T* HWY_RESTRICT x, int64_t n) {
  const hn::ScalableTag<T> d;
  const int64_t N = int64_t(hn::Lanes(d));
  const auto neg_inf = hn::Set(d, -std::numeric_limits<T>::infinity());
  auto vmax = neg_inf;
  int64_t i = 0;
  for (; i + N <= n; i += N) vmax = hn::Max(vmax, hn::LoadU(d, x + i));
  if (i < n) vmax = hn::Max(vmax, LoadTail(d, x + i, size_t(n - i), -std::numeric_limits<T>::infinity()));
  return hn::GetLane(hn::MaxOfLanes(d, vmax));
}

// s = sum_j exp(x_j - m), for a finite m. Returns false if some x_j is nan.
template <typename T>
bool SumExp(const T* HWY_RESTRICT x, int64_t n, T m, T* s_out) {
  const hn::ScalableTag<T> d;
  const int64_t N = int64_t(hn::Lanes(d));
  const auto vm = hn::Set(d, m);
  auto sum = hn::Zero(d);
  auto bad = hn::Zero(d);  // all-ones bits in the lanes that met a nan
  int64_t i = 0;
  for (; i + N <= n; i += N) {
    const auto t = hn::Sub(hn::LoadU(d, x + i), vm);
    sum = hn::Add(sum, hn::Exp(d, t));
    bad = hn::Or(bad, hn::VecFromMask(d, hn::IsNaN(t)));
  }
  if (i < n) {
    const auto mask = hn::FirstN(d, size_t(n - i));
    const auto t = hn::IfThenElseZero(mask, hn::Sub(LoadTail(d, x + i, size_t(n - i)), vm));
    sum = hn::Add(sum, hn::IfThenElseZero(mask, hn::Exp(d, t)));
    bad = hn::Or(bad, hn::VecFromMask(d, hn::IsNaN(t)));
  }
  *s_out = hn::GetLane(hn::SumOfLanes(d, sum));
  return hn::AllFalse(d, hn::MaskFromVec(bad));
}

template <typename T>
bool SoftmaxRowT(const T* HWY_RESTRICT x, T* HWY_RESTRICT y, int64_t n, bool log) {
  const hn::ScalableTag<T> d;
  const int64_t N = int64_t(hn::Lanes(d));
  const T m = RowMax(x, n);
  if (!(m > -std::numeric_limits<T>::infinity() && m < std::numeric_limits<T>::infinity())) return false;
  T s;
  if (!SumExp(x, n, m, &s)) return false;
  const auto vm = hn::Set(d, m);
  int64_t i = 0;
  if (log) {
    // y_j = (x_j - m) - log s
    const auto log_s = hn::Set(d, std::log(s));
    for (; i + N <= n; i += N) hn::StoreU(hn::Sub(hn::Sub(hn::LoadU(d, x + i), vm), log_s), d, y + i);
    if (i < n)
      StoreTail(hn::Sub(hn::Sub(LoadTail(d, x + i, size_t(n - i)), vm), log_s), d, y + i, size_t(n - i));
  } else {
    // y_j = exp(x_j - m) * (1 / s)
    const auto inv_s = hn::Set(d, T(1) / s);
    for (; i + N <= n; i += N)
      hn::StoreU(hn::Mul(hn::Exp(d, hn::Sub(hn::LoadU(d, x + i), vm)), inv_s), d, y + i);
    if (i < n) {
      const auto e = hn::Exp(d, hn::Sub(LoadTail(d, x + i, size_t(n - i)), vm));
      StoreTail(hn::Mul(e, inv_s), d, y + i, size_t(n - i));
    }
  }
  return true;
}

// s = sum_k dy_k y_k (softmax) or sum_k dy_k (log_softmax), then the elementwise formula.
// Returns false for a log_softmax row holding a nan in y (Exp would turn it into 0).
template <typename T>
bool SoftmaxBackwardRowT(const T* HWY_RESTRICT y, const T* HWY_RESTRICT dy, T* HWY_RESTRICT dx, int64_t n,
                         bool log) {
  const hn::ScalableTag<T> d;
  const int64_t N = int64_t(hn::Lanes(d));
  // 1. the row sum, with two accumulators
  auto a0 = hn::Zero(d), a1 = hn::Zero(d);
  auto bad = hn::Zero(d);
  int64_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    const auto g0 = hn::LoadU(d, dy + i), g1 = hn::LoadU(d, dy + i + N);
    if (log) {
      a0 = hn::Add(a0, g0);
      a1 = hn::Add(a1, g1);
    } else {
      a0 = hn::MulAdd(g0, hn::LoadU(d, y + i), a0);
      a1 = hn::MulAdd(g1, hn::LoadU(d, y + i + N), a1);
    }
  }
  for (; i < n; i += N) {
    const size_t rest = size_t(std::min<int64_t>(N, n - i));
    const auto g = rest == size_t(N) ? hn::LoadU(d, dy + i) : LoadTail(d, dy + i, rest);
    if (log) {
      a0 = hn::Add(a0, g);
    } else {
      const auto yv = rest == size_t(N) ? hn::LoadU(d, y + i) : LoadTail(d, y + i, rest);
      a0 = hn::MulAdd(g, yv, a0);
    }
  }
  const auto vs = hn::Set(d, hn::GetLane(hn::SumOfLanes(d, hn::Add(a0, a1))));

  // 2. dx
  i = 0;
  for (; i < n; i += N) {
    const size_t rest = size_t(std::min<int64_t>(N, n - i));
    const bool full = rest == size_t(N);
    const auto yv = full ? hn::LoadU(d, y + i) : LoadTail(d, y + i, rest);
    const auto g = full ? hn::LoadU(d, dy + i) : LoadTail(d, dy + i, rest);
    hn::Vec<decltype(d)> r;
    if (log) {
      bad = hn::Or(bad, hn::VecFromMask(d, hn::IsNaN(yv)));
      r = hn::NegMulAdd(hn::Exp(d, yv), vs, g);  // dy - exp(y) s
    } else {
      r = hn::Mul(yv, hn::Sub(g, vs));  // y (dy - s)
    }
    if (full)
      hn::StoreU(r, d, dx + i);
    else
      StoreTail(r, d, dx + i, rest);
  }
  return hn::AllFalse(d, hn::MaskFromVec(bad));
}

template <typename T>
bool LogSumExpRowT(const T* HWY_RESTRICT x, int64_t n, T* lse) {
  const T m = RowMax(x, n);
  if (!(m > -std::numeric_limits<T>::infinity() && m < std::numeric_limits<T>::infinity())) return false;
  T s;
  if (!SumExp(x, n, m, &s)) return false;
  *lse = m + std::log(s);
  return true;
}

template <typename T>
void ScaledSoftmaxFromLseRowT(const T* HWY_RESTRICT x, T lse, T scale, T* HWY_RESTRICT dx, int64_t n) {
  const hn::ScalableTag<T> d;
  const int64_t N = int64_t(hn::Lanes(d));
  const auto vl = hn::Set(d, lse), vs = hn::Set(d, scale);
  int64_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::Mul(hn::Exp(d, hn::Sub(hn::LoadU(d, x + i), vl)), vs), d, dx + i);
  if (i < n) {
    const auto e = hn::Exp(d, hn::Sub(LoadTail(d, x + i, size_t(n - i)), vl));
    StoreTail(hn::Mul(e, vs), d, dx + i, size_t(n - i));
  }
}

bool SoftmaxRowF32(const float* x, float* y, int64_t n, bool log) {
  return SoftmaxRowT(x, y, n, log);
}
bool SoftmaxRowF64(const double* x, double* y, int64_t n, bool log) {
  return SoftmaxRowT(x, y, n, log);
}
bool SoftmaxBackwardRowF32(const float* y, const float* dy, float* dx, int64_t n, bool log) {
  return SoftmaxBackwardRowT(y, dy, dx, n, log);
}
bool SoftmaxBackwardRowF64(const double* y, const double* dy, double* dx, int64_t n, bool log) {
  return SoftmaxBackwardRowT(y, dy, dx, n, log);
}
bool LogSumExpRowF32(const float* x, int64_t n, float* lse) {
  return LogSumExpRowT(x, n, lse);
}
bool LogSumExpRowF64(const double* x, int64_t n, double* lse) {
  return LogSumExpRowT(x, n, lse);
}
void ScaledSoftmaxF32(const float* x, float lse, float s, float* dx, int64_t n) {
  ScaledSoftmaxFromLseRowT(x, lse, s, dx, n);
}
void ScaledSoftmaxF64(const double* x, double lse, double s, double* dx, int64_t n) {
  ScaledSoftmaxFromLseRowT(x, lse, s, dx, n);
}

}  // namespace HWY_NAMESPACE
}  // namespace ng::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "tensor/kernels/softmax_simd.h"
namespace ng::simd {
HWY_EXPORT(SoftmaxRowF32);
HWY_EXPORT(SoftmaxRowF64);
HWY_EXPORT(SoftmaxBackwardRowF32);
HWY_EXPORT(SoftmaxBackwardRowF64);
HWY_EXPORT(LogSumExpRowF32);
HWY_EXPORT(LogSumExpRowF64);
HWY_EXPORT(ScaledSoftmaxF32);
HWY_EXPORT(ScaledSoftmaxF64);

bool softmax_row(const float* x, float* y, int64_t L, bool log) {
  return HWY_DYNAMIC_DISPATCH(SoftmaxRowF32)(x, y, L, log);
}
bool softmax_row(const double* x, double* y, int64_t L, bool log) {
  return HWY_DYNAMIC_DISPATCH(SoftmaxRowF64)(x, y, L, log);
}
bool softmax_backward_row(const float* y, const float* dy, float* dx, int64_t L, bool log) {
  return HWY_DYNAMIC_DISPATCH(SoftmaxBackwardRowF32)(y, dy, dx, L, log);
}
bool softmax_backward_row(const double* y, const double* dy, double* dx, int64_t L, bool log) {
  return HWY_DYNAMIC_DISPATCH(SoftmaxBackwardRowF64)(y, dy, dx, L, log);
}
bool logsumexp_row(const float* x, int64_t L, float* lse) {
  return HWY_DYNAMIC_DISPATCH(LogSumExpRowF32)(x, L, lse);
}
bool logsumexp_row(const double* x, int64_t L, double* lse) {
  return HWY_DYNAMIC_DISPATCH(LogSumExpRowF64)(x, L, lse);
}
void scaled_softmax_from_lse_row(const float* x, float lse, float scale, float* dx, int64_t L) {
  HWY_DYNAMIC_DISPATCH(ScaledSoftmaxF32)(x, lse, scale, dx, L);
}
void scaled_softmax_from_lse_row(const double* x, double lse, double scale, double* dx, int64_t L) {
  HWY_DYNAMIC_DISPATCH(ScaledSoftmaxF64)(x, lse, scale, dx, L);
}
}  // namespace ng::simd
#endif

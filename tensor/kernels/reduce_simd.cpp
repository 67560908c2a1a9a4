// Highway kernels for row and column sums. See reduce_simd.h; the dispatch pattern is explained in
// elementwise_simd.cpp.
//
// f32 input is widened to f64 lanes (PromoteTo) and summed in f64, like the reference. Four independent
// vector accumulators hide the latency of the adds; they are combined in a fixed order at the end.
//
// Tails: the last n % lanes elements go through LoadTail / StoreTail (kernels/tail-inl.h explains why).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tensor/kernels/reduce_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"
#include "tensor/kernels/tail-inl.h"

HWY_BEFORE_NAMESPACE();
namespace ng::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using D64 = hn::ScalableTag<double>;

// The next lanes of x as f64: f64 loads directly, f32 loads half a vector and widens it.
template <typename T>
HWY_INLINE hn::Vec<D64> Load64(const T* HWY_RESTRICT p) {
  const D64 d;
  if constexpr (sizeof(T) == 8) {
    return hn::LoadU(d, p);
  } else {
    const hn::Rebind<float, D64> df;
    return hn::PromoteTo(d, hn::LoadU(df, p));
  }
}
template <typename T>
HWY_INLINE hn::Vec<D64> LoadTail64(const T* HWY_RESTRICT p, size_t n) {
  const D64 d;
  if constexpr (sizeof(T) == 8) {
    return LoadTail(d, p, n);
  } else {
    const hn::Rebind<float, D64> df;
    return hn::PromoteTo(d, LoadTail(df, p, n));
  }
}

// sum_j f(x_j), f(x) = x or (x - mu)^2, in f64 lanes with 4 accumulators.
template <typename T, bool kSquaredDeviation>
double SumT(const T* HWY_RESTRICT x, int64_t n, double mu) {
  const D64 d;
  const int64_t N = int64_t(hn::Lanes(d));
  const auto vmu = hn::Set(d, mu);
  auto f = [&](hn::Vec<D64> v) HWY_ATTR {
    if constexpr (kSquaredDeviation) {
      const auto c = hn::Sub(v, vmu);
      return hn::Mul(c, c);
    } else {
      return v;
    }
  };
  auto a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
  int64_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    a0 = hn::Add(a0, f(Load64(x + i)));
    a1 = hn::Add(a1, f(Load64(x + i + N)));
    a2 = hn::Add(a2, f(Load64(x + i + 2 * N)));
    a3 = hn::Add(a3, f(Load64(x + i + 3 * N)));
  }
  for (; i + N <= n; i += N) a0 = hn::Add(a0, f(Load64(x + i)));
  if (i < n) {
    // Padded lanes are 0; for the squared deviation they would add mu^2, so mask them out.
    const auto m = hn::FirstN(d, size_t(n - i));
    a1 = hn::Add(a1, hn::IfThenElseZero(m, f(LoadTail64(x + i, size_t(n - i)))));
  }
  const auto total = hn::Add(hn::Add(a0, a1), hn::Add(a2, a3));
  return hn::GetLane(hn::SumOfLanes(d, total));
}

// acc_c += sum_r x_{r,c}: stream the rows in order and add each one into acc (which stays in L1 cache:
// the caller passes at most a few hundred columns). Each column's sum runs over r = 0, 1, ... in order.
template <typename T>
void AddRowsToT(const T* HWY_RESTRICT x, int64_t R, int64_t C, int64_t ld, double* HWY_RESTRICT acc) {
  const D64 d;
  const int64_t N = int64_t(hn::Lanes(d));
  for (int64_t r = 0; r < R; ++r) {
    const T* HWY_RESTRICT row = x + r * ld;
    int64_t c = 0;
    for (; c + N <= C; c += N) hn::StoreU(hn::Add(hn::LoadU(d, acc + c), Load64(row + c)), d, acc + c);
    if (c < C) {
      const size_t rest = size_t(C - c);
      StoreTail(hn::Add(LoadTail(d, acc + c, rest), LoadTail64(row + c, rest)), d, acc + c, rest);
    }
  }
}

double SumRowF32(const float* x, int64_t n) {
  return SumT<float, false>(x, n, 0.0);
}
double SumRowF64(const double* x, int64_t n) {
  return SumT<double, false>(x, n, 0.0);
}
double SumSqDevF32(const float* x, int64_t n, double mu) {
  return SumT<float, true>(x, n, mu);
}
double SumSqDevF64(const double* x, int64_t n, double mu) {
  return SumT<double, true>(x, n, mu);
}
void AddRowsF32(const float* x, int64_t R, int64_t C, int64_t ld, double* acc) {
  AddRowsToT(x, R, C, ld, acc);
}
void AddRowsF64(const double* x, int64_t R, int64_t C, int64_t ld, double* acc) {
  AddRowsToT(x, R, C, ld, acc);
}

}  // namespace HWY_NAMESPACE
}  // namespace ng::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "tensor/kernels/reduce_simd.h"
namespace ng::simd {
HWY_EXPORT(SumRowF32);
HWY_EXPORT(SumRowF64);
HWY_EXPORT(SumSqDevF32);
HWY_EXPORT(SumSqDevF64);
HWY_EXPORT(AddRowsF32);
HWY_EXPORT(AddRowsF64);

double sum_row(const float* x, int64_t n) {
  return HWY_DYNAMIC_DISPATCH(SumRowF32)(x, n);
}
double sum_row(const double* x, int64_t n) {
  return HWY_DYNAMIC_DISPATCH(SumRowF64)(x, n);
}
double sum_sq_dev_row(const float* x, int64_t n, double mu) {
  return HWY_DYNAMIC_DISPATCH(SumSqDevF32)(x, n, mu);
}
double sum_sq_dev_row(const double* x, int64_t n, double mu) {
  return HWY_DYNAMIC_DISPATCH(SumSqDevF64)(x, n, mu);
}
void add_rows_to(const float* x, int64_t R, int64_t C, int64_t ld, double* acc) {
  HWY_DYNAMIC_DISPATCH(AddRowsF32)(x, R, C, ld, acc);
}
void add_rows_to(const double* x, int64_t R, int64_t C, int64_t ld, double* acc) {
  HWY_DYNAMIC_DISPATCH(AddRowsF64)(x, R, C, ld, acc);
}
}  // namespace ng::simd
#endif

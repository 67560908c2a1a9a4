// Highway kernels for softmax rows. See softmax_simd.h; the dispatch pattern is explained in
// elementwise_simd.cpp.
//
// The scalar math each loop vectorises (ops/softmax.cpp has it as the reference):
//   m = max_j x_j;   s = sum_j exp(x_j - m);   y_j = exp(x_j - m) / s   or   y_j = (x_j - m) - log s
// Tails (L not a multiple of the vector length) go through LoadTail / StoreTail (kernels/tail-inl.h).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tensor/kernels/softmax_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "tensor/kernels/fast_exp-inl.h"
#include "tensor/kernels/tail-inl.h"

#include <cmath>
#include <limits>

HWY_BEFORE_NAMESPACE();
namespace ng::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Pass 1: m = max_j x_j (tail lanes padded with -inf so they never win). This pass is the one that brings
// the row in from memory; the passes after it find it in L1 (a row of 4096 floats is 16 KiB).
// Returns false if the row holds a nan: the nan check is a running sum of x, which a nan turns into nan
// (so does +inf next to -inf, or an overflow; those rows go to the reference too, which is merely slower).
//
// The prefetch: the memory stream stops at the end of each row (passes 2 and 3 work in L1), so the hardware
// prefetcher starts over on every row. For rows of 4 KiB and more, this pass asks for the line 8 KiB ahead,
// into the rows after this one, up to `end` (the end of the caller's rows; nullptr: no prefetch). Measured
// on an Intel Xeon VM (AVX-512, 48 KiB L1d and 2 MiB L2 per core, the copy from DRAM; 2026-11-25, stop 21),
// where perf put this pass level with the exp pass at 4096 x 1024 (1 thread). A/B
// (`scripts/bench_ab.py --filter softmax,cross_entropy --rounds 4`, best / median), 4096 x 1024, 2 threads:
// softmax 0.709 / 0.746 -> 0.642 / 0.673 ms, cross-entropy 0.735 / 0.768 -> 0.646 / 0.661 ms; 1 thread
// 1.39 / 1.50 -> 1.22 / 1.25 ms (softmax); at 1024 x 4096 (16 KiB rows) 3-4%. 4 KiB ahead gained less, 16
// and 32 KiB nothing. `end` must reach past the caller's chunk of rows: bounded by each parallel_for chunk
// (4 rows here) it gained nothing. (Tried on Zen 5 before, as a prefetch of the next row during pass 2: 12%
// slower; not measured on Zen 4, where LayerNorm's page-ahead prefetch slowed short rows.) Results are
// unchanged; rows shorter than 4 KiB (attention's, the trainers' logits) never prefetch.
template <typename T>
inline constexpr int64_t kRowPrefetchAhead = 8192 / int64_t(sizeof(T));

template <typename T>
bool RowMax(const T* HWY_RESTRICT x, int64_t n, T* m_out, const T* end) {
  const hn::ScalableTag<T> d;
  const int64_t N = int64_t(hn::Lanes(d));
  const T neg_inf = -std::numeric_limits<T>::infinity();
  auto max0 = hn::Set(d, neg_inf), max1 = max0;
  auto sum0 = hn::Zero(d), sum1 = hn::Zero(d);
  // Prefetch while x + i + ahead + 2N stays within [x, end): no address past the caller's memory.
  const int64_t ahead = kRowPrefetchAhead<T>;
  const int64_t pf_last = end && n * int64_t(sizeof(T)) >= 4096 ? (end - x) - ahead - 2 * N : -1;
  int64_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    if (i <= pf_last) {
      hwy::Prefetch(x + i + ahead);
      hwy::Prefetch(x + i + ahead + N);
    }
    const auto a = hn::LoadU(d, x + i), b = hn::LoadU(d, x + i + N);
    max0 = hn::Max(max0, a);
    max1 = hn::Max(max1, b);
    sum0 = hn::Add(sum0, a);
    sum1 = hn::Add(sum1, b);
  }
  for (; i < n; i += N) {
    const size_t rest = size_t(std::min<int64_t>(N, n - i));
    const auto a = rest == size_t(N) ? hn::LoadU(d, x + i) : LoadTail(d, x + i, rest, neg_inf);
    max0 = hn::Max(max0, a);
    sum0 = hn::Add(sum0, a);
  }
  *m_out = hn::GetLane(hn::MaxOfLanes(d, hn::Max(max0, max1)));
  return !std::isnan(hn::GetLane(hn::SumOfLanes(d, hn::Add(sum0, sum1))));
}

// Pass 2: s = sum_j exp(x_j - m), for a finite m; also stores e_j = exp(x_j - m) into y when y != nullptr
// (softmax then only rescales y in L1, instead of computing every exp a second time).
// Tail lanes are padded with -inf, whose exp is exactly 0.
// The prefetch (rows of 8 KiB and more, `end` given, up to `end`): this pass computes while the row sits in
// L1, so memory would idle until the next row's pass 1; it asks for the same position one row ahead.
// Measured on the Xeon of stop 24 (model 207, 2 threads, `scripts/bench_ab.py --filter
// softmax,cross_entropy --rounds 6`, best / median): 1024 x 4096 softmax 0.828 / 0.852 -> 0.773 / 0.805 ms,
// cross-entropy 0.831 / 0.862 -> 0.785 / 0.790 ms. Shorter rows (pass 1 already asks two rows ahead) keep
// the old loop. Not re-measured on AMD, where a next-row prefetch in this pass was once 12% slower (below).
//
// The sum: 2 N lanes of T, emptied into a double every kBlockPairs steps. Summed in T to the end, a row of
// a vocabulary's length lost bits with its length (stop 44's review: 10^6 values, 307 FLT_EPSILON on the
// portable target, 8 on AVX-512); now each lane adds at most 64 values in T. A row shorter than a block
// gives the same bits as before: its one block's sum goes through the double exactly.
template <typename T>
T SumExp(const T* HWY_RESTRICT x, int64_t n, T m, T* HWY_RESTRICT y, const T* end = nullptr) {
  const hn::ScalableTag<T> d;
  const int64_t N = int64_t(hn::Lanes(d));
  const auto vm = hn::Set(d, m);
  auto sum0 = hn::Zero(d), sum1 = hn::Zero(d);
  constexpr int kBlockPairs = 64;
  double blocks = 0;  // the sums of the blocks emptied so far
  int pairs = 0;
  const int64_t pf_last = end && n * int64_t(sizeof(T)) >= 8192 ? (end - x) - n - 2 * N : -1;
  int64_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    if (pairs == kBlockPairs) {
      blocks += double(hn::GetLane(hn::SumOfLanes(d, hn::Add(sum0, sum1))));
      sum0 = hn::Zero(d);
      sum1 = hn::Zero(d);
      pairs = 0;
    }
    ++pairs;
    if (i <= pf_last) {
      hwy::Prefetch(x + i + n);
      hwy::Prefetch(x + i + n + N);
    }
    const auto e0 = FastExp(d, hn::Sub(hn::LoadU(d, x + i), vm));
    const auto e1 = FastExp(d, hn::Sub(hn::LoadU(d, x + i + N), vm));
    if (y) {
      hn::StoreU(e0, d, y + i);
      hn::StoreU(e1, d, y + i + N);
    }
    sum0 = hn::Add(sum0, e0);
    sum1 = hn::Add(sum1, e1);
  }
  for (; i < n; i += N) {
    const size_t rest = size_t(std::min<int64_t>(N, n - i));
    const bool full = rest == size_t(N);
    const auto xv =
        full ? hn::LoadU(d, x + i) : LoadTail(d, x + i, rest, -std::numeric_limits<T>::infinity());
    const auto e = FastExp(d, hn::Sub(xv, vm));
    if (y) {
      if (full)
        hn::StoreU(e, d, y + i);
      else
        StoreTail(e, d, y + i, rest);
    }
    sum0 = hn::Add(sum0, e);
  }
  return T(blocks + double(hn::GetLane(hn::SumOfLanes(d, hn::Add(sum0, sum1)))));
}

// y_j = scale * softmax(x)_j and lse = log sum_j exp(x_j), in three passes over one row:
//   1. m = max_j x_j (the pass that reads x from memory),
//   2. s = sum_j e_j, storing e_j = exp(x_j - m) into y,
//   3. y_j = e_j * (scale / s), on the row already in L1 (a row of 4096 floats is 16 KiB).
// Only pass 2 computes exp, once per element. softmax is scale = 1; cross-entropy's forward uses it
// to write its gradient, scale * softmax (ops/loss.cpp).
// (Tried: prefetching the next row during pass 2, so that its pass 1 would not wait on memory. It was
// 12% slower on the AMD EPYC (Zen 5) box: the hardware prefetcher already streams the contiguous rows. On
// the Xeon of stop 24 it gained 6-7% for 16 KiB rows, so SumExp does it for rows of 8 KiB and more.)
template <typename T>
bool ScaledSoftmaxRowT(const T* HWY_RESTRICT x, T scale, T* HWY_RESTRICT y, int64_t n, T* lse, const T* end) {
  const hn::ScalableTag<T> d;
  const int64_t N = int64_t(hn::Lanes(d));
  T m;
  if (!RowMax(x, n, &m, end)) return false;
  if (!(m > -std::numeric_limits<T>::infinity() && m < std::numeric_limits<T>::infinity())) return false;
  const T s = SumExp(x, n, m, y, end);
  *lse = m + std::log(s);
  const auto k = hn::Set(d, scale / s);
  int64_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::Mul(hn::LoadU(d, y + i), k), d, y + i);
  if (i < n) StoreTail(hn::Mul(LoadTail(d, y + i, size_t(n - i)), k), d, y + i, size_t(n - i));
  return true;
}

// softmax: the above with scale 1. log_softmax: passes 1 and 2 without storing, then
// y_j = (x_j - m) - log s.
template <typename T>
bool SoftmaxRowT(const T* HWY_RESTRICT x, T* HWY_RESTRICT y, int64_t n, bool log, const T* end) {
  if (!log) {
    T lse;
    return ScaledSoftmaxRowT(x, T(1), y, n, &lse, end);
  }
  const hn::ScalableTag<T> d;
  const int64_t N = int64_t(hn::Lanes(d));
  T m;
  if (!RowMax(x, n, &m, end)) return false;
  if (!(m > -std::numeric_limits<T>::infinity() && m < std::numeric_limits<T>::infinity())) return false;
  const T s = SumExp(x, n, m, static_cast<T*>(nullptr));
  const auto vm = hn::Set(d, m);
  const auto log_s = hn::Set(d, std::log(s));
  int64_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::Sub(hn::Sub(hn::LoadU(d, x + i), vm), log_s), d, y + i);
  if (i < n)
    StoreTail(hn::Sub(hn::Sub(LoadTail(d, x + i, size_t(n - i)), vm), log_s), d, y + i, size_t(n - i));
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
      r = hn::NegMulAdd(FastExp(d, yv), vs, g);  // dy - exp(y) s
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
bool LogSumExpRowT(const T* HWY_RESTRICT x, int64_t n, T* lse, const T* end) {
  T m;
  if (!RowMax(x, n, &m, end)) return false;
  if (!(m > -std::numeric_limits<T>::infinity() && m < std::numeric_limits<T>::infinity())) return false;
  *lse = m + std::log(SumExp(x, n, m, static_cast<T*>(nullptr)));
  return true;
}

void ExpRowF32(const float* HWY_RESTRICT x, float* HWY_RESTRICT y, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t N = int64_t(hn::Lanes(d));
  int64_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(FastExp(d, hn::LoadU(d, x + i)), d, y + i);
  if (i < n) StoreTail(FastExp(d, LoadTail(d, x + i, size_t(n - i))), d, y + i, size_t(n - i));
}

bool SoftmaxRowF32(const float* x, float* y, int64_t n, bool log, const float* end) {
  return SoftmaxRowT(x, y, n, log, end);
}
bool SoftmaxRowF64(const double* x, double* y, int64_t n, bool log, const double* end) {
  return SoftmaxRowT(x, y, n, log, end);
}
bool SoftmaxBackwardRowF32(const float* y, const float* dy, float* dx, int64_t n, bool log) {
  return SoftmaxBackwardRowT(y, dy, dx, n, log);
}
bool SoftmaxBackwardRowF64(const double* y, const double* dy, double* dx, int64_t n, bool log) {
  return SoftmaxBackwardRowT(y, dy, dx, n, log);
}
bool LogSumExpRowF32(const float* x, int64_t n, float* lse, const float* end) {
  return LogSumExpRowT(x, n, lse, end);
}
bool LogSumExpRowF64(const double* x, int64_t n, double* lse, const double* end) {
  return LogSumExpRowT(x, n, lse, end);
}
bool ScaledSoftmaxRowF32(const float* x, float scale, float* y, int64_t n, float* lse, const float* end) {
  return ScaledSoftmaxRowT(x, scale, y, n, lse, end);
}
bool ScaledSoftmaxRowF64(const double* x, double scale, double* y, int64_t n, double* lse,
                         const double* end) {
  return ScaledSoftmaxRowT(x, scale, y, n, lse, end);
}

}  // namespace HWY_NAMESPACE
}  // namespace ng::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "tensor/kernels/softmax_simd.h"
namespace ng::simd {
HWY_EXPORT(ExpRowF32);
HWY_EXPORT(SoftmaxRowF32);
HWY_EXPORT(SoftmaxRowF64);
HWY_EXPORT(SoftmaxBackwardRowF32);
HWY_EXPORT(SoftmaxBackwardRowF64);
HWY_EXPORT(LogSumExpRowF32);
HWY_EXPORT(LogSumExpRowF64);
HWY_EXPORT(ScaledSoftmaxRowF32);
HWY_EXPORT(ScaledSoftmaxRowF64);

void fast_exp_row(const float* x, float* y, int64_t n) {
  HWY_DYNAMIC_DISPATCH(ExpRowF32)(x, y, n);
}
bool softmax_row(const float* x, float* y, int64_t L, bool log, const float* end) {
  return HWY_DYNAMIC_DISPATCH(SoftmaxRowF32)(x, y, L, log, end);
}
bool softmax_row(const double* x, double* y, int64_t L, bool log, const double* end) {
  return HWY_DYNAMIC_DISPATCH(SoftmaxRowF64)(x, y, L, log, end);
}
bool softmax_backward_row(const float* y, const float* dy, float* dx, int64_t L, bool log) {
  return HWY_DYNAMIC_DISPATCH(SoftmaxBackwardRowF32)(y, dy, dx, L, log);
}
bool softmax_backward_row(const double* y, const double* dy, double* dx, int64_t L, bool log) {
  return HWY_DYNAMIC_DISPATCH(SoftmaxBackwardRowF64)(y, dy, dx, L, log);
}
bool logsumexp_row(const float* x, int64_t L, float* lse, const float* end) {
  return HWY_DYNAMIC_DISPATCH(LogSumExpRowF32)(x, L, lse, end);
}
bool logsumexp_row(const double* x, int64_t L, double* lse, const double* end) {
  return HWY_DYNAMIC_DISPATCH(LogSumExpRowF64)(x, L, lse, end);
}
bool scaled_softmax_row(const float* x, float scale, float* y, int64_t L, float* lse, const float* end) {
  return HWY_DYNAMIC_DISPATCH(ScaledSoftmaxRowF32)(x, scale, y, L, lse, end);
}
bool scaled_softmax_row(const double* x, double scale, double* y, int64_t L, double* lse, const double* end) {
  return HWY_DYNAMIC_DISPATCH(ScaledSoftmaxRowF64)(x, scale, y, L, lse, end);
}
}  // namespace ng::simd
#endif

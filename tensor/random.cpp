#include "tensor/random.h"

#include <cmath>
#include <limits>

#include "autograd/grad_mode.h"
#include "tensor/parallel.h"

namespace ng {

// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11).
std::array<uint32_t, 4> Generator::block(uint64_t counter) const {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // round multipliers
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;  // key schedule (golden ratio, sqrt(3) - 1)
  uint32_t c0 = uint32_t(counter), c1 = uint32_t(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = uint32_t(seed_), k1 = uint32_t(seed_ >> 32);
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = uint64_t(kM0) * c0, p1 = uint64_t(kM1) * c2;
    uint32_t n0 = uint32_t(p1 >> 32) ^ c1 ^ k0;
    uint32_t n1 = uint32_t(p1);
    uint32_t n2 = uint32_t(p0 >> 32) ^ c3 ^ k1;
    uint32_t n3 = uint32_t(p0);
    c0 = n0, c1 = n1, c2 = n2, c3 = n3;
    k0 += kW0;
    k1 += kW1;
  }
  return {c0, c1, c2, c3};
}

Generator& default_generator() {
  static Generator g(0);
  return g;
}
void manual_seed(uint64_t seed) {
  default_generator().manual_seed(seed);
}

namespace {
// 24 or 53 random bits -> [0, 1)
inline double to_unit(uint32_t lo, uint32_t hi) {
  uint64_t bits = (uint64_t(hi) << 32 | lo) >> 11;  // 53 bits
  return double(bits) * (1.0 / 9007199254740992.0);
}

// The next value of T toward -inf (f16/bf16: by their bits, sign and magnitude).
template <typename T>
T step_down(T v) {
  if constexpr (std::is_same_v<T, f16> || std::is_same_v<T, bf16>) {
    if (v.bits == 0) return T{0x8001};  // +0 -> the negative smallest
    return (v.bits & 0x8000) ? T{uint16_t(v.bits + 1)} : T{uint16_t(v.bits - 1)};  // away from / toward 0
  } else {
    return std::nextafter(v, -std::numeric_limits<T>::infinity());
  }
}
// The next value of T toward +inf.
template <typename T>
T step_up(T v) {
  if constexpr (std::is_same_v<T, f16> || std::is_same_v<T, bf16>) {
    if (v.bits == 0x8000) return T{0x0001};  // -0 -> the positive smallest
    return (v.bits & 0x8000) ? T{uint16_t(v.bits - 1)} : T{uint16_t(v.bits + 1)};  // toward / away from 0
  } else {
    return std::nextafter(v, std::numeric_limits<T>::infinity());
  }
}

// The largest T below hi, or, where no T lies in [lo, hi), lo rounded to T (rounding cannot do better).
template <typename T>
T largest_below(double hi, double lo) {
  T v = from_double<T>(hi);
  while (to_double(v) >= hi) v = step_down(v);
  return to_double(v) >= lo ? v : from_double<T>(lo);
}

// The smallest T at or above lo, or, where no T lies in [lo, hi), lo rounded to T.
template <typename T>
T smallest_from(double lo, double hi) {
  T v = from_double<T>(lo);
  while (to_double(v) < lo) v = step_up(v);
  return to_double(v) < hi ? v : from_double<T>(lo);
}

// Fill a contiguous buffer: value i = f(block(first + i / per_block), i % per_block).
template <typename F>
Tensor fill_random(const Shape& shape, DType dtype, Generator& gen, int64_t per_block, F&& f) {
  Tensor t = empty(shape, dtype);
  const int64_t n = t.numel();
  const uint64_t first = gen.advance(uint64_t((n + per_block - 1) / per_block));
  NG_DISPATCH_ALL(dtype, "random", [&]<typename scalar_t>() {
    scalar_t* p = t.data<scalar_t>();
    parallel_for(n, 1 << 14, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        std::array<uint32_t, 4> r = gen.block(first + uint64_t(i / per_block));
        p[i] = f.template operator()<scalar_t>(r, int(i % per_block));
      }
    });
  });
  return t;
}
}  // namespace

Tensor uniform(const Shape& shape, double lo, double hi, Generator& gen, DType dtype) {
  NG_CHECK(is_floating(dtype), "uniform", "expected a floating dtype, got ", dtype_name(dtype));
  NG_CHECK(lo <= hi, "uniform", "expected lo <= hi, got ", lo, " and ", hi);  // NaN fails it too
  // an infinite bound, or a span past the largest double, would give inf or NaN values (PyTorch refuses both)
  NG_CHECK(std::isfinite(hi - lo), "uniform", "expected finite bounds less than ",
           std::numeric_limits<double>::max(), " apart, got ", lo, " and ", hi);
  // Two values per block, 53 bits each. u < 1, but lo + (hi - lo) * u rounded to T can still be hi: for u
  // within T's half ulp of 1 (bf16: 1 in 512 draws of rand, f32: 1 in 2^25; in double, lo = 1, hi = 2 and
  // u = 1 - 2^-53 round to 2). Such a draw becomes the largest T below hi, so that the range stays
  // [lo, hi) as documented (stop 42: 386 of 200000 bf16 rand values were 1). The same at the other end: a
  // lo that T cannot hold rounds down for draws near 0 (stop 44: uniform(-0.1, 0.1) in bf16 gave 712 of 10^6
  // values of -0.10010, below lo, so a symmetric init was not), and those become the smallest T from lo.
  return fill_random(shape, dtype, gen, 2, [lo, hi]<typename T>(const std::array<uint32_t, 4>& r, int lane) {
    double u = to_unit(r[2 * lane], r[2 * lane + 1]);
    const T v = from_double<T>(lo + (hi - lo) * u);
    if (lo < hi && to_double(v) >= hi) return largest_below<T>(hi, lo);
    if (to_double(v) < lo) return smallest_from<T>(lo, hi);
    return v;
  });
}

Tensor rand(const Shape& shape, Generator& gen, DType dtype) {
  return uniform(shape, 0.0, 1.0, gen, dtype);
}

Tensor randn(const Shape& shape, Generator& gen, DType dtype, double mean, double std) {
  NG_CHECK(is_floating(dtype), "randn", "expected a floating dtype, got ", dtype_name(dtype));
  // a negative std is a sign error, a NaN or inf one (or mean) fills the tensor with NaN or inf (PyTorch
  // refuses std < 0 and NaN)
  NG_CHECK(std >= 0 && std::isfinite(std) && std::isfinite(mean), "randn",
           "expected a finite mean and a finite std >= 0, got mean ", mean, " and std ", std);
  // Box-Muller: one normal per block from two uniforms u1 in (0, 1], u2 in [0, 1).
  return fill_random(shape, dtype, gen, 1, [mean, std]<typename T>(const std::array<uint32_t, 4>& r, int) {
    double u1 = 1.0 - to_unit(r[0], r[1]);
    double u2 = to_unit(r[2], r[3]);
    double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
    return from_double<T>(mean + std * z);
  });
}

Tensor randint(int64_t lo, int64_t hi, const Shape& shape, Generator& gen) {
  NG_CHECK(lo < hi, "randint", "expected lo < hi, got ", lo, " and ", hi);
  // hi - lo in uint64_t: as int64_t it overflows (undefined) for a range wider than 2^63, e.g. the whole i64
  const uint64_t range = uint64_t(hi) - uint64_t(lo);
  return fill_random(shape, DType::i64, gen, 2,
                     [lo, range]<typename T>(const std::array<uint32_t, 4>& r, int lane) {
                       // 64 random bits reduced by multiply-high (bias < range / 2^64, negligible).
                       uint64_t bits = uint64_t(r[2 * lane + 1]) << 32 | r[2 * lane];
                       unsigned __int128 m = (unsigned __int128)bits * range;
                       // lo + offset, in [lo, hi), added unsigned so that it cannot overflow
                       const int64_t v = int64_t(uint64_t(lo) + uint64_t(m >> 64));
                       if constexpr (std::is_same_v<T, int64_t>)
                         return v;
                       else
                         return from_double<T>(double(v));
                     });
}

// Initialisers: they set values, so they take a parameter that requires grad (as PyTorch's nn.init does,
// under no_grad), which copy_ alone refuses while grad mode is on.
void uniform_(Tensor& t, double lo, double hi, Generator& gen) {
  check_defined("uniform_", "t", t);
  check_no_internal_overlap(t, "uniform_");
  NoGradGuard no_grad;
  t.copy_(uniform(t.shape(), lo, hi, gen, t.dtype()));
}
void normal_(Tensor& t, double mean, double std, Generator& gen) {
  check_defined("normal_", "t", t);
  check_no_internal_overlap(t, "normal_");
  NoGradGuard no_grad;
  t.copy_(randn(t.shape(), gen, t.dtype(), mean, std));
}

}  // namespace ng

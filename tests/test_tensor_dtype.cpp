// Dtype conversions: f16/bf16 round-to-nearest-even, inf, nan, subnormals, overflow; to(dtype) between every
// pair; i64 conversions; kernels on half types computing in f32.
#include <bit>
#include <random>

#include "ops_test_util.h"

using namespace ng;
using namespace ng::testing;

static float from_bits(uint32_t u) {
  return std::bit_cast<float>(u);
}

TEST(Dtype, NamesAndSizes) {
  EXPECT_STREQ(dtype_name(DType::f32), "f32");
  EXPECT_STREQ(dtype_name(DType::bf16), "bf16");
  EXPECT_EQ(dtype_size(DType::f16), 2u);
  EXPECT_EQ(dtype_size(DType::i64), 8u);
  EXPECT_EQ(compute_dtype(DType::bf16), DType::f32);
  EXPECT_EQ(compute_dtype(DType::f64), DType::f64);
  EXPECT_FALSE(is_floating(DType::i64));
}

TEST(Dtype, F16RoundsToNearestEven) {
  // Spacing of f16 at 1.0 is 2^-10. 1 + 2^-11 is exactly halfway between 1 and 1 + 2^-10: ties to even (1.0).
  EXPECT_EQ(f32_to_f16(1.0f + 0x1p-11f).bits, 0x3c00);
  // 1 + 3 * 2^-11 is halfway between 1 + 2^-10 (odd mantissa) and 1 + 2^-9 (even): rounds up to even.
  EXPECT_EQ(f32_to_f16(1.0f + 3 * 0x1p-11f).bits, 0x3c02);
  // Just above halfway rounds up.
  EXPECT_EQ(f32_to_f16(std::nextafter(1.0f + 0x1p-11f, 2.0f)).bits, 0x3c01);
  EXPECT_EQ(f32_to_f16(-2.0f).bits, 0xc000);
  EXPECT_EQ(f32_to_f16(65504.0f).bits, 0x7bff);   // largest finite
  EXPECT_EQ(f32_to_f16(65519.99f).bits, 0x7bff);  // below the rounding boundary
  EXPECT_EQ(f32_to_f16(65520.0f).bits, 0x7c00);   // rounds to inf
  EXPECT_EQ(f32_to_f16(1e10f).bits, 0x7c00);
  EXPECT_EQ(f32_to_f16(-INFINITY).bits, 0xfc00);
  EXPECT_EQ(f32_to_f16(-0.0f).bits, 0x8000);
  EXPECT_EQ(f32_to_f16(0x1p-14f).bits, 0x0400);      // smallest normal
  EXPECT_EQ(f32_to_f16(0x1p-24f).bits, 0x0001);      // smallest subnormal
  EXPECT_EQ(f32_to_f16(0x1p-25f).bits, 0x0000);      // halfway to the smallest subnormal: ties to even (0)
  EXPECT_EQ(f32_to_f16(0x1.8p-25f).bits, 0x0001);    // above halfway
  EXPECT_EQ(f32_to_f16(3 * 0x1p-25f).bits, 0x0002);  // 1.5 * 2^-24: tie between 1 and 2 -> 2 (even)
  EXPECT_EQ(f32_to_f16(1e-10f).bits, 0x0000);
  uint16_t nan_bits = f32_to_f16(NAN).bits;
  EXPECT_EQ(nan_bits & 0x7c00, 0x7c00);
  EXPECT_NE(nan_bits & 0x03ff, 0);  // still a nan, not inf
}

TEST(Dtype, F16ToF32IsExact) {
  EXPECT_EQ(f16_to_f32(f16{0x3c00}), 1.0f);
  EXPECT_EQ(f16_to_f32(f16{0x7bff}), 65504.0f);
  EXPECT_EQ(f16_to_f32(f16{0x0001}), 0x1p-24f);
  EXPECT_EQ(f16_to_f32(f16{0x03ff}), 1023 * 0x1p-24f);  // largest subnormal
  EXPECT_EQ(f16_to_f32(f16{0x7c00}), INFINITY);
  EXPECT_EQ(f16_to_f32(f16{0xfc00}), -INFINITY);
  EXPECT_TRUE(std::isnan(f16_to_f32(f16{0x7e00})));
  EXPECT_TRUE(std::signbit(f16_to_f32(f16{0x8000})));
  // Every finite f16 survives f16 -> f32 -> f16 unchanged.
  for (uint32_t b = 0; b < 0x10000; ++b) {
    f16 h{uint16_t(b)};
    if ((b & 0x7c00) == 0x7c00 && (b & 0x3ff)) continue;  // nan payloads
    ASSERT_EQ(f32_to_f16(f16_to_f32(h)).bits, h.bits) << b;
  }
}

TEST(Dtype, Bf16RoundsToNearestEven) {
  // bf16 keeps the top 16 bits of an f32: spacing at 1.0 is 2^-7.
  EXPECT_EQ(f32_to_bf16(1.0f).bits, 0x3f80);
  EXPECT_EQ(f32_to_bf16(1.0f + 0x1p-8f).bits, 0x3f80);         // tie -> even (down)
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * 0x1p-8f).bits, 0x3f82);     // tie -> even (up)
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f808001)).bits, 0x3f81);  // just above halfway
  EXPECT_EQ(f32_to_bf16(from_bits(0x7f7fffff)).bits, 0x7f80);  // max f32 rounds to inf
  EXPECT_EQ(f32_to_bf16(INFINITY).bits, 0x7f80);
  EXPECT_EQ(f32_to_bf16(-INFINITY).bits, 0xff80);
  EXPECT_EQ(f32_to_bf16(-0.0f).bits, 0x8000);
  EXPECT_EQ(f32_to_bf16(from_bits(0x00010000)).bits, 0x0001);  // subnormal kept
  EXPECT_EQ(f32_to_bf16(from_bits(0x00008000)).bits, 0x0000);  // subnormal tie -> even (0)
  EXPECT_EQ(f32_to_bf16(from_bits(0x00018000)).bits, 0x0002);  // subnormal tie -> even (2)
  // nan stays nan, even one whose payload lives only in the low bits (truncation would make it inf).
  bf16 n = f32_to_bf16(from_bits(0x7f800001));
  EXPECT_TRUE(std::isnan(bf16_to_f32(n)));
  EXPECT_EQ(bf16_to_f32(bf16{0x4049}), 3.140625f);
}

// f64 -> f16 / bf16 rounds once (tensor/dtype.h, f64_to_f32_odd). Going through f32 to nearest rounded
// twice: a value just above a tie of the half grid, within f32's precision of it, became the tie in f32 and
// then went to even, down instead of up. Here: values a little above and below every kind of tie, and the
// ties themselves, against the neighbour the one-step rounding picks.
template <typename H>
void expect_f64_rounds_once(DType dt) {
  SCOPED_TRACE(dtype_name(dt));
  std::mt19937_64 rng(7);
  auto value_of = [](uint16_t bits) { return to_double(H{bits}); };
  int checked = 0;
  for (int i = 0; i < 20000; ++i) {
    // a finite, positive or negative half h and the next one away from zero, h2
    uint16_t bits = uint16_t(rng() & 0x7fff);
    if (!std::isfinite(value_of(bits)) || !std::isfinite(value_of(uint16_t(bits + 1)))) continue;
    const uint16_t sign = (rng() & 1) ? 0x8000 : 0;
    const double h = value_of(uint16_t(bits | sign)), h2 = value_of(uint16_t((bits + 1) | sign));
    const double tie = (h + h2) / 2;                          // exact in double
    const double nudge = std::ldexp(std::fabs(h2 - h), -30);  // far below f32's last bit at the tie
    const uint16_t even = (bits & 1) ? uint16_t((bits + 1) | sign) : uint16_t(bits | sign);
    const std::pair<double, uint16_t> cases[] = {
        {tie + (h2 > h ? nudge : -nudge), uint16_t((bits + 1) | sign)},
        {tie - (h2 > h ? nudge : -nudge), uint16_t(bits | sign)},
        {tie, even}};
    for (const auto& [v, want] : cases) {
      const Tensor t = full({1}, v, DType::f64).to(dt);
      ASSERT_EQ(t.data<H>()[0].bits, want) << std::hexfloat << v << " from half bits " << bits;
      ++checked;
    }
  }
  EXPECT_GT(checked, 50000);
}

TEST(Dtype, F64ToHalfRoundsOnceNotTwiceThroughF32) {
  // The examples: 1 + 2^-11 + 2^-40 is above f16's tie between 1 and 1 + 2^-10 (it was 1); bf16 the same at 1
  // + 2^-8.
  EXPECT_EQ(tensor({1 + 0x1p-11 + 0x1p-40}, DType::f64).to(DType::f16).item(), 1 + 0x1p-10);
  EXPECT_EQ(tensor({1 + 0x1p-8 + 0x1p-40}, DType::f64).to(DType::bf16).item(), 1 + 0x1p-7);
  EXPECT_EQ(full({1}, 1 + 0x1p-11 + 0x1p-40, DType::f16).item(), 1 + 0x1p-10);  // fill values too
  expect_f64_rounds_once<f16>(DType::f16);
  expect_f64_rounds_once<bf16>(DType::bf16);
  // Past the largest f32: inf, as one rounding gives; NaN stays NaN; tiny values keep their sign.
  EXPECT_EQ(tensor({1e39, -1e39}, DType::f64).to(DType::bf16).to_vector<double>(),
            (std::vector<double>{INFINITY, -INFINITY}));
  EXPECT_TRUE(std::isnan(tensor({NAN}, DType::f64).to(DType::f16).item()));
  EXPECT_TRUE(std::signbit(tensor({-1e-300}, DType::f64).to(DType::f16).item()));
}

TEST(Dtype, ToConvertsBetweenEveryPair) {
  Tensor base = tensor({0.0, -1.5, 2.25, 1000.0}, DType::f64);
  for (DType a : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i64}) {
    for (DType b : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i64}) {
      Tensor y = base.to(a).to(b);
      EXPECT_EQ(y.dtype(), b);
      auto v = y.to_vector<double>();
      bool integral = a == DType::i64 || b == DType::i64;
      EXPECT_EQ(v[0], 0.0);
      EXPECT_EQ(v[1], integral ? -1.0 : -1.5) << dtype_name(a) << "->" << dtype_name(b);  // i64 truncates
      EXPECT_EQ(v[2], integral ? 2.0 : 2.25);
      EXPECT_EQ(v[3], 1000.0);
    }
  }
  // Rounding happens at the conversion: 1000.5 is 1000 in bf16 (8 bits of mantissa: spacing 4 here).
  EXPECT_EQ(tensor({1001.0}).to(DType::bf16).item(), 1000.0);
  EXPECT_EQ(tensor({1003.0}).to(DType::bf16).item(), 1004.0);
  EXPECT_EQ(tensor({2049.0}).to(DType::f16).item(), 2048.0);  // tie -> even
  EXPECT_EQ(tensor({2051.0}).to(DType::f16).item(), 2052.0);
  EXPECT_EQ(tensor({1e6}).to(DType::f16).item(), INFINITY);
  // Large i64 values survive i64 -> i64 exactly (no trip through double).
  Tensor big = from_vector(std::vector<int64_t>{(int64_t(1) << 62) + 1}, {1});
  EXPECT_EQ(big.to(DType::i64).to_vector<int64_t>()[0], (int64_t(1) << 62) + 1);
  EXPECT_EQ(big.clone().to_vector<int64_t>()[0], (int64_t(1) << 62) + 1);
}

TEST(Dtype, FloatToI64RefusesWhatHasNoI64) {
  // NaN, inf and values outside [-2^63, 2^63) have no i64; the C++ conversion is undefined there (x86 gave
  // -2^63 for every one of them, silently). Refused, naming the value, before anything is written.
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dt));
    expect_error([&] { tensor({1.0, NAN}).to(dt).to(DType::i64); }, {"to: cannot convert nan", "to i64"});
    expect_error([&] { tensor({-INFINITY}).to(dt).to(DType::i64); }, {"to: cannot convert -inf"});
    Tensor dst = zeros({2}, DType::i64);
    // copy_'s own name (it said "to:", the name of the conversion inside it)
    expect_error([&] { dst.copy_(tensor({3.0, INFINITY}).to(dt)); }, {"copy_: cannot convert inf", "to i64"});
    EXPECT_EQ(dst.to_vector<int64_t>(), (std::vector<int64_t>{0, 0}));  // untouched
  }
  expect_error([] { tensor({1e19}, DType::f64).to(DType::i64); }, {"to: cannot convert 1e+19 (f64)"});
  // The edges: -2^63 converts, the largest double below 2^63 converts, 2^63 does not.
  EXPECT_EQ(tensor({-0x1p63}, DType::f64).to(DType::i64).to_vector<int64_t>()[0], INT64_MIN);
  EXPECT_EQ(tensor({0x1.fffffffffffffp62}, DType::f64).to(DType::i64).to_vector<int64_t>()[0],
            int64_t(0x1.fffffffffffffp62));
  expect_error([] { tensor({0x1p63}, DType::f64).to(DType::i64); }, {"to: cannot convert"});
  // to_vector<int64_t> of a float tensor converts the same way.
  EXPECT_EQ(tensor({-2.7, 3.9}).to_vector<int64_t>(), (std::vector<int64_t>{-2, 3}));
  expect_error([] { tensor({NAN}).to_vector<int64_t>(); }, {"to_vector: cannot convert nan (f32) to i64"});
  // And so does a fill value (full, fill_).
  expect_error([] { full({2}, NAN, DType::i64); }, {"fill_: cannot convert nan (f64) to i64"});
  EXPECT_EQ(full({2}, -3.5, DType::i64).to_vector<int64_t>(), (std::vector<int64_t>{-3, -3}));
}

TEST(Dtype, FloatToI64RefusesInAParallelCopyToo) {
  // A tensor big enough that the conversion runs on several threads: the check throws inside the parallel
  // loop. That aborted the process (an exception leaving an OpenMP region is std::terminate) until
  // parallel_for carried it out (tensor/parallel.h); with two bad values the error names the first.
  for (int threads : {1, 2, 4}) {
    ThreadsGuard guard(threads);
    Tensor x = zeros({300000});
    x.data<float>()[299999] = NAN;
    x.data<float>()[150001] = -INFINITY;
    expect_error([&] { x.to(DType::i64); }, {"to: cannot convert -inf (f32) to i64"});
  }
}

TEST(Dtype, EveryFloatToI64PathRefusesWhatHasNoI64) {
  // from_vector, masked_fill and mul_ converted without the check (NaN and 1e30 became INT64_MIN).
  expect_error(
      [] {
        from_vector(std::vector<double>{1.0, NAN}, {2}, DType::i64);
      },
      {"from_vector: cannot convert nan (f64) to i64"});
  expect_error([] { from_vector(std::vector<float>{1e30f}, {1}, DType::i64); },
               {"from_vector: cannot convert 1e+30 (f32) to i64"});
  EXPECT_EQ(from_vector(std::vector<double>{-2.5, 7.9}, {2}, DType::i64).to_vector<int64_t>(),
            (std::vector<int64_t>{-2, 7}));
  const Tensor ids = arange(4), mask = tensor({0.0, 1.0, 0.0, 1.0});
  expect_error([&] { masked_fill(ids, mask, NAN); }, {"masked_fill: cannot convert nan (f64) to i64"});
  EXPECT_EQ(masked_fill(ids, mask, -1.0).to_vector<int64_t>(), (std::vector<int64_t>{0, -1, 2, -1}));
  // mul_ on integers went through double: 2^53 + 1 lost its last bit. Refused, as add_ is.
  Tensor big = from_vector(std::vector<int64_t>{(int64_t(1) << 53) + 1}, {1});
  expect_error([&] { mul_(big, 1.0); }, {"mul_: expected a floating tensor, got i64"});
  EXPECT_EQ(big.to_vector<int64_t>()[0], (int64_t(1) << 53) + 1);
}

TEST(Parallel, AnExceptionInAChunkReachesTheCallerAsTheSerialLoopsWould) {
  for (int threads : {1, 2, 3}) {
    ThreadsGuard guard(threads);
    std::vector<int> ran(10, 0);
    try {
      parallel_for(10, 1, [&](int64_t b, int64_t) {  // ten chunks of one item; chunks 3 and 7 throw
        ran[size_t(b)] = 1;
        if (b == 3 || b == 7) fail("chunk", b);
      });
      ADD_FAILURE() << "no exception on " << threads << " threads";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).find("chunk: 3"), 0u) << e.what();
    }
    if (threads > 1) {
      EXPECT_EQ(std::count(ran.begin(), ran.end(), 1), 10);  // every chunk ran
    }
    try {
      parallel_for_runs(10, 1, [&](int64_t b, int64_t e) {
        if (b <= 8 && 8 < e) fail("run", "the one with item 8");
      });
      ADD_FAILURE() << "no exception from parallel_for_runs on " << threads << " threads";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).find("run"), 0u) << e.what();
    }
  }
}

TEST(Dtype, SpecialValuesThroughTensors) {
  Tensor s = tensor({INFINITY, -INFINITY, NAN, 0x1p-20, -0.0});
  for (DType h : {DType::f16, DType::bf16}) {
    auto v = s.to(h).to_vector<double>();
    EXPECT_EQ(v[0], INFINITY);
    EXPECT_EQ(v[1], -INFINITY);
    EXPECT_TRUE(std::isnan(v[2]));
    EXPECT_EQ(v[3], 0x1p-20);  // subnormal in f16 (exactly representable), normal in bf16
    EXPECT_TRUE(std::signbit(v[4]));
  }
}

TEST(Dtype, HalfKernelsComputeInF32) {
  // f16 max is 65504. The mean of (60000, 60000) sums to 120000 inside the kernel: in f32 that is fine, and
  // only the result (60000) is rounded to f16.
  Tensor x = tensor({60000.0, 60000.0}).to(DType::f16);
  EXPECT_EQ(mean(x).item(), 60000.0);
  EXPECT_EQ(var(x, {0}).item(), 0.0);
  EXPECT_EQ(softmax(x).to_vector<double>(), (std::vector<double>{0.5, 0.5}));
  // Each op rounds its own result to f16 once: 60000 * 2 = 120000 is stored as inf.
  EXPECT_EQ(mul(x, 2.0).to_vector<double>()[0], INFINITY);
  Tensor a = tensor({1.0, 2.0, 3.0}).to(DType::bf16);
  EXPECT_EQ(softmax(a).dtype(), DType::bf16);
  EXPECT_EQ(matmul(a.reshape({1, 3}), a.reshape({3, 1})).item(), 14.0);
  EXPECT_EQ(sum(a).item(), 6.0);
}

TEST(Dtype, DataPointerChecksType) {
  Tensor x = zeros({2});
  expect_error([&] { x.data<double>(); }, {"Tensor::data: requested f64 pointer, but the tensor holds f32"});
  expect_error([&] { zeros({2}, DType::bf16).data<f16>(); },
               {"requested f16 pointer, but the tensor holds bf16"});
}

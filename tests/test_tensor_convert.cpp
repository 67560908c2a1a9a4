// float <-> f16 / bf16 on SIMD vectors (tensor/kernels/half-inl.h: what the norm kernels load and store half
// precision with, and what Tensor::to uses, exported as ng::simd::convert): the same bits as the scalar
// ng::f16_to_f32, ng::bf16_to_f32, ng::f32_to_f16 and ng::f32_to_bf16, on every SIMD target. The loads are
// checked on all 65536 bit patterns; the stores on ordinary values, ties, denormals, overflow, infinities,
// NaNs and random patterns; Tensor::to on strided and contiguous tensors.
//
// Why bit by bit: on AVX-512 CPUs with AVX512-BF16 the bf16 store uses vcvtneps2bf16, which flushes denormal
// inputs to zero where our rounding keeps them, so a vector with a denormal lane must take the rounding by
// hand; and on SSE4 and EMU128 Highway 1.0.3's own f16 conversions truncate and lose inf and NaN (this test
// found that). The norm tests compare with tolerances and would notice none of it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "tensor/kernels/convert_simd.h"
#include "simd_targets.h"
#include "tensor/dtype.h"
#include "tensor/tensor.h"

using namespace ng;

namespace {

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Special values, each placed among ordinary ones, then random bit patterns of every kind.
std::vector<float> hostile_inputs() {
  const uint32_t special[] = {
      0x00000000, 0x80000000,                          // zeros
      0x00000001, 0x80000001, 0x007fffff, 0x807fffff,  // smallest and largest denormals
      0x00008000, 0x00018000, 0x00010000, 0x0000ffff,  // denormal ties and near-ties
      0x00800000, 0x80800000, 0x00808000, 0x00818000,  // smallest normals, and ties just above them
      0x3f800000, 0x3f808000, 0x3f818000, 0x3f808001,  // 1, ties to even, just above a tie
      0x7f7fffff, 0xff7fffff, 0x7f7f7fff, 0x477ff000,  // overflow to inf in bf16; 65520 overflows f16
      0x7f800000, 0xff800000,                          // infinities
      0x7fc00000, 0xffc00000, 0x7f800001, 0x7fbfffff,  // quiet and signalling NaNs (low payloads too)
      0x33000000, 0x33000001, 0x387fe000, 0x38800000,  // f16's denormal range and its edges
  };
  std::vector<float> v;
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> ordinary(-3.0f, 3.0f);
  for (uint32_t s : special) {
    // alone in a vector of ordinary values, at varying lanes
    for (int k = 0; k < 5; ++k) v.push_back(ordinary(gen));
    v.push_back(from_bits(s));
  }
  // whole vectors of denormals, and of ordinary values only
  for (int k = 0; k < 64; ++k) v.push_back(from_bits(uint32_t(gen()) & 0x807fffffu));
  for (int k = 0; k < 64; ++k) v.push_back(ordinary(gen));
  // random bit patterns: every exponent, sign and NaN payload
  for (int k = 0; k < 20000; ++k) v.push_back(from_bits(uint32_t(gen())));
  return v;
}

template <typename T, typename Scalar>
void expect_same_bits(const std::vector<float>& in, Scalar scalar, const char* what) {
  // every length up to 40 (the tails), then the whole array
  std::vector<int64_t> lengths;
  for (int64_t n = 0; n <= 40; ++n) lengths.push_back(n);
  lengths.push_back(int64_t(in.size()));
  for (int64_t offset : {0, 3}) {  // unaligned starts too
    for (int64_t n : lengths) {
      if (offset + n > int64_t(in.size())) continue;
      std::vector<T> out(size_t(n) + 1, T{0xabcd});  // one guard element past the end
      simd::convert(in.data() + offset, out.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const uint32_t bits = [&] {
          uint32_t u;
          std::memcpy(&u, &in[size_t(offset + i)], 4);
          return u;
        }();
        ASSERT_EQ(out[size_t(i)].bits, scalar(in[size_t(offset + i)]).bits)
            << what << ": input bits 0x" << std::hex << bits << std::dec << " at " << i << " of " << n;
      }
      ASSERT_EQ(out[size_t(n)].bits, 0xabcd) << what << ": wrote past the end, n = " << n;
    }
  }
}

}  // namespace

TEST(HalfConvert, Bf16StoreSameBitsAsScalarOnEveryTarget) {
  const std::vector<float> in = hostile_inputs();
  const int targets = ng::testing::for_each_target([&] {
    expect_same_bits<bf16>(
        in, [](float f) { return f32_to_bf16(f); }, "bf16");
  });
  EXPECT_GE(targets, 2);
}

TEST(HalfConvert, F16StoreSameBitsAsScalarOnEveryTarget) {
  const std::vector<float> in = hostile_inputs();
  const int targets = ng::testing::for_each_target([&] {
    expect_same_bits<f16>(
        in, [](float f) { return f32_to_f16(f); }, "f16");
  });
  EXPECT_GE(targets, 2);
}

// Every one of the 65536 bit patterns, at every offset from an aligned start (the tails too).
template <typename T, typename Scalar>
void expect_loads_exact(Scalar scalar, const char* what) {
  std::vector<T> in(65536 + 40);
  for (size_t b = 0; b < in.size(); ++b) in[b] = T{uint16_t(b)};
  std::vector<float> out(in.size() + 1);
  for (int64_t offset : {0, 1, 7}) {
    for (int64_t n : {int64_t(65536), int64_t(1), int64_t(17), int64_t(33)}) {
      out.assign(out.size(), -1234.5f);
      simd::convert(in.data() + offset, out.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const float want = scalar(in[size_t(offset + i)]);
        uint32_t got_bits, want_bits;
        std::memcpy(&got_bits, &out[size_t(i)], 4);
        std::memcpy(&want_bits, &want, 4);
        if (std::isnan(want)) {
          // A NaN stays a NaN with the same sign and payload; F16C's vcvtph2ps makes a signalling one quiet
          // (sets the top mantissa bit), the scalar code keeps its bits: both are fine.
          ASSERT_EQ(got_bits | 0x00400000u, want_bits | 0x00400000u)
              << what << ": NaN input bits 0x" << std::hex << in[size_t(offset + i)].bits;
          continue;
        }
        ASSERT_EQ(got_bits, want_bits)
            << what << ": input bits 0x" << std::hex << in[size_t(offset + i)].bits;
      }
      ASSERT_EQ(out[size_t(n)], -1234.5f) << what << ": wrote past the end, n = " << n;
    }
  }
}

TEST(HalfConvert, F16LoadExactOnEveryTarget) {
  const int targets = ng::testing::for_each_target(
      [&] { expect_loads_exact<f16>([](f16 h) { return f16_to_f32(h); }, "f16"); });
  EXPECT_GE(targets, 2);
}

TEST(HalfConvert, Bf16LoadExactOnEveryTarget) {
  const int targets = ng::testing::for_each_target(
      [&] { expect_loads_exact<bf16>([](bf16 h) { return bf16_to_f32(h); }, "bf16"); });
  EXPECT_GE(targets, 2);
}

// Tensor::to between float and f16 / bf16: contiguous tensors take the SIMD kernels, strided ones the scalar
// loop; both give the scalar conversion's bits, on every target, also for inputs long enough to be split
// into parallel chunks.
TEST(HalfConvert, TensorToGivesTheScalarBitsContiguousOrStrided) {
  std::vector<float> values = hostile_inputs();
  values.resize(70000 + 13, 1.5f);  // more than one parallel chunk (65536), and a tail
  const int64_t n = int64_t(values.size());
  const Tensor x = from_vector(values, {n});
  const Tensor xt = from_vector(values, {1, n}).expand({2, n}).transpose(0, 1);  // a strided view
  values = x.to_vector<float>();  // the floats the tensor holds (from_vector may quiet a signalling NaN)
  const int targets = ng::testing::for_each_target([&] {
    for (DType dt : {DType::bf16, DType::f16}) {
      for (const Tensor& src : {x, xt}) {
        const Tensor h = src.to(dt).contiguous();
        const Tensor back = h.to(DType::f32);
        const auto* hb = static_cast<const uint16_t*>(h.raw_data());
        const auto* fb = static_cast<const float*>(back.raw_data());
        const int64_t stride = src.dim() == 1 ? 1 : 2;  // xt holds every value twice
        for (int64_t i = 0; i < n; ++i) {
          const float v = values[size_t(i)];
          const uint16_t want = dt == DType::bf16 ? f32_to_bf16(v).bits : f32_to_f16(v).bits;
          ASSERT_EQ(hb[i * stride], want) << dtype_name(dt) << " to(), value " << i << ", dims " << src.dim();
          const float want_back = dt == DType::bf16 ? bf16_to_f32(bf16{want}) : f16_to_f32(f16{want});
          if (std::isnan(want_back)) {
            ASSERT_TRUE(std::isnan(fb[i * stride])) << dtype_name(dt) << " back, value " << i;
          } else {
            ASSERT_EQ(fb[i * stride], want_back) << dtype_name(dt) << " back, value " << i;
          }
        }
      }
    }
  });
  EXPECT_GE(targets, 2);
}

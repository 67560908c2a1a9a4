// Small helpers shared by tests/test_norms_*.cpp.
#pragma once

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "normgrad.h"
#include "simd_targets.h"

namespace normtest {

using namespace ng;

// A random f64 leaf that requires grad.
inline Tensor leaf(const Shape& shape, uint64_t seed, double mean = 0.0, double std = 1.0) {
  Generator gen(seed);
  return randn(shape, gen, DType::f64, mean, std).requires_grad_();
}

// A random NON-contiguous f64 leaf of `shape`: every other element of a tensor twice as wide in the last dim.
inline Tensor strided_leaf(const Shape& shape, uint64_t seed) {
  Shape wide = shape;
  wide.back() *= 2;
  Generator gen(seed);
  Tensor base = randn(wide, gen, DType::f64);
  Tensor view = base.slice(int64_t(shape.size()) - 1, 0, wide.back(), 2);
  EXPECT_FALSE(view.is_contiguous());
  return view.requires_grad_();
}

inline void expect_gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs,
                             const std::string& what) {
  GradcheckResult r = gradcheck(fn, inputs);
  EXPECT_TRUE(r.ok) << what << ": " << r.message();
  EXPECT_GT(r.checked, 0) << what;
}

// A real nn::Linear (f64, PyTorch's init) in front of a norm module, for "a Linear before the norm"
// gradchecks: the norm's dx then flows on through the Linear's backward into x, weight and bias, as in a
// model. `layout` maps the Linear's output (..., C) to what the norm wants (identity, or a transpose to (N,
// C, L)). The norm is cast to f64 and its affine parameters (if any) drawn at random, so w = 1, b = 0 hide
// nothing. Checked: x, the Linear's weight and bias, the norm's parameters.
inline void expect_gradcheck_behind_linear(nn::Module& norm, const Shape& x_shape, int64_t C,
                                           const std::function<Tensor(const Tensor&)>& layout, uint64_t seed,
                                           const std::string& what) {
  Generator gen(seed);
  nn::Linear lin(x_shape.back(), C, /*bias=*/true, gen, DType::f64);
  nn::cast_(norm, DType::f64);
  {
    NoGradGuard no_grad;  // an update of values, not a step of the computation (Tensor::copy_)
    for (Tensor& p : norm.parameters()) p.copy_(randn(p.shape(), gen, DType::f64, 0.5, 1.0));
  }
  Tensor x = randn(x_shape, gen, DType::f64).requires_grad_();
  std::vector<Tensor> inputs = {x, lin.weight, lin.bias};
  for (const Tensor& p : norm.parameters()) inputs.push_back(p);
  // The Linear and the norm read their own members, which are inputs[1..]: gradcheck's perturbations of
  // those tensors are what the modules see.
  GradcheckResult r =
      gradcheck([&](const std::vector<Tensor>& in) { return norm(layout(lin(in[0]))); }, inputs);
  EXPECT_TRUE(r.ok) << what << ": " << r.message();
  EXPECT_EQ(r.checked, x.numel() + lin.weight.numel() + lin.bias.numel() + norm.num_parameters()) << what;
}

inline double max_abs_diff(const Tensor& a, const Tensor& b) {
  std::vector<double> va = a.to_vector<double>(), vb = b.to_vector<double>();
  EXPECT_EQ(va.size(), vb.size());
  double m = 0;
  for (size_t i = 0; i < va.size() && i < vb.size(); ++i) {
    if (std::isnan(va[i]) != std::isnan(vb[i])) return INFINITY;
    if (!std::isnan(va[i])) m = std::max(m, std::abs(va[i] - vb[i]));
  }
  return m;
}

// max_abs_diff relative to the largest |b| (b: the reference).
inline double max_rel_diff(const Tensor& a, const Tensor& b) {
  double scale = 0;
  for (double v : b.to_vector<double>()) scale = std::max(scale, std::abs(v));
  return max_abs_diff(a, b) / scale;
}

// How far a (the fast kernel's output) is from b (the reference's) beyond what rounding into a's dtype
// explains: the worst |a - b| - rtol |b| over the elements (a NaN in one but not the other: infinity).
// With rtol = one unit in the last place of the dtype (half_rtol), two computations whose f32 results
// differ in their last bits may round to neighbouring values and still pass with a small atol, while a
// backward that drops a term of its formula (off by 0.06-0.27 where dx is 0.5-2) fails. The fast-vs-
// reference tests used an absolute 0.3 in bf16 until stop 44, which such a backward passed.
inline double max_diff_beyond(const Tensor& a, const Tensor& b, double rtol) {
  std::vector<double> va = a.to_vector<double>(), vb = b.to_vector<double>();
  EXPECT_EQ(va.size(), vb.size());
  double m = 0;
  for (size_t i = 0; i < va.size() && i < vb.size(); ++i) {
    if (std::isnan(va[i]) != std::isnan(vb[i])) return INFINITY;
    if (!std::isnan(va[i])) m = std::max(m, std::abs(va[i] - vb[i]) - rtol * std::abs(vb[i]));
  }
  return m;
}
// max_abs_diff relative to 1 + the largest |b|: for sums over many rows (dweight, dbias), whose rounding
// has the scale of their largest value, and which may all be 0 (a LayerNorm row of one value).
inline double max_diff_scaled(const Tensor& a, const Tensor& b) {
  double scale = 0;
  for (double v : b.to_vector<double>()) scale = std::max(scale, std::abs(v));
  return max_abs_diff(a, b) / (1 + scale);
}
// One unit in the last place, relative: 2^-7 for bf16, 2^-10 for f16; 0 for f32 and f64, which the tests
// compare absolutely.
inline double half_rtol(DType dt) {
  return dt == DType::bf16 ? 0x1p-7 : dt == DType::f16 ? 0x1p-10 : 0.0;
}

inline bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.raw_data(), cb.raw_data(), size_t(ca.numel()) * dtype_size(ca.dtype())) == 0;
}

// Expect fn() to throw ng::Error whose message contains every one of `parts`.
inline void expect_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "expected ng::Error containing '" << parts.front() << "'";
  } catch (const Error& e) {
    for (const std::string& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "message: " << e.what() << "\nmissing: " << p;
  }
}

// Run fn with the thread count forced to n, then restore the previous count.
template <typename Fn>
auto with_threads(int n, Fn&& fn) {
  const int before = num_threads();
  set_num_threads(n);
  auto r = fn();
  set_num_threads(before);
  return r;
}

using ng::testing::for_each_target;  // tests/simd_targets.h

// A bf16 kernel's outputs (got) against the f32 kernel's on the same values (f32), for the tests of the bf16
// stores' subnormal fallback: every got must be its f32 rounded to nearest even by hand (f32_to_bf16), bit
// for bit, and most f32 must be subnormals (the case those tests are about).
inline void expect_bf16_rounding_of_subnormals(const std::vector<float>& f32, const std::vector<bf16>& got) {
  ASSERT_EQ(f32.size(), got.size());
  int64_t subnormal = 0, wrong = 0;
  for (size_t i = 0; i < f32.size(); ++i) {
    if (f32[i] != 0.0f && std::abs(f32[i]) < std::numeric_limits<float>::min()) ++subnormal;
    if (got[i].bits != f32_to_bf16(f32[i]).bits) ++wrong;
  }
  EXPECT_GT(subnormal, int64_t(f32.size()) / 2);
  EXPECT_EQ(wrong, 0);
}

}  // namespace normtest

// Helpers shared by the op tests (header only; not a test file itself).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "normgrad.h"

namespace ng::testing {

inline double max_abs_diff(const Tensor& a, const Tensor& b) {
  auto x = a.to_vector<double>(), y = b.to_vector<double>();
  EXPECT_EQ(x.size(), y.size());
  double m = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    if (std::isnan(x[i]) != std::isnan(y[i])) return INFINITY;
    if (!std::isnan(x[i])) m = std::max(m, std::abs(x[i] - y[i]));
  }
  return m;
}

// Bitwise equality of two tensors' values (same dtype, same shape).
inline bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.raw_data(), cb.raw_data(), size_t(ca.numel()) * dtype_size(ca.dtype())) == 0;
}

// Expect `f` to throw ng::Error whose message contains every one of `parts`.
template <typename F>
void expect_error(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "expected ng::Error containing \"" << (parts.empty() ? "" : parts[0]) << "\"";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const auto& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << "missing \"" << p << "\" in: " << msg;
  }
}

// The message of the ng::Error that `f` throws, or "<no error>" (for a test that compares several).
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

inline void expect_gradcheck(const GradcheckFn& f, const std::vector<Tensor>& inputs,
                             GradcheckOptions o = {}) {
  GradcheckResult r = gradcheck(f, inputs, o);
  EXPECT_TRUE(r.ok) << r.message();
  EXPECT_GT(r.checked, 0);
}

// A random f64 leaf of `shape` that is NOT contiguous: drawn as the reversed shape and permuted back.
inline Tensor noncontig_leaf(const Shape& shape, Generator& g) {
  Shape rev(shape.rbegin(), shape.rend());
  std::vector<int64_t> perm;
  for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) perm.push_back(d);
  Tensor t = randn(rev, g, DType::f64).permute(perm).detach();
  t.requires_grad_();
  return t;
}
inline Tensor leaf(const Shape& shape, Generator& g) {
  return randn(shape, g, DType::f64).requires_grad_();
}

// RAII: run a block at a given thread count, restoring the previous one.
struct ThreadsGuard {
  explicit ThreadsGuard(int n) : prev(num_threads()) { set_num_threads(n); }
  ~ThreadsGuard() { set_num_threads(prev); }
  int prev;
};

}  // namespace ng::testing

// Tensor factories: empty, zeros, ones, full, arange, from_vector, tensor({...}).
#include <cmath>

#include "tensor/device_kernels.h"
#include "tensor/tensor.h"

namespace ng {

Tensor empty(const Shape& shape, DType dtype) {
  const int64_t nbytes = storage_bytes(shape, int64_t(dtype_size(dtype)), "empty");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(size_t(nbytes));
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(impl);
}

Tensor full(const Shape& shape, double value, DType dtype) {
  Tensor t = empty(shape, dtype);
  t.fill_(value);
  return t;
}
Tensor zeros(const Shape& shape, DType dtype) {
  return full(shape, 0.0, dtype);
}
Tensor ones(const Shape& shape, DType dtype) {
  return full(shape, 1.0, dtype);
}
Tensor scalar_tensor(double value, DType dtype) {
  return full({}, value, dtype);
}
// The *_like factories follow t's device too (device_kernels.h has the device-taking factories).
Tensor zeros_like(const Tensor& t) {
  check_defined("zeros_like", "t", t);
  return zeros(t.shape(), t.dtype(), t.device());
}
Tensor ones_like(const Tensor& t) {
  check_defined("ones_like", "t", t);
  return full(t.shape(), 1.0, t.dtype(), t.device());
}
Tensor empty_like(const Tensor& t) {
  check_defined("empty_like", "t", t);
  return empty(t.shape(), t.dtype(), t.device());
}

Tensor arange(double start, double end, double step, DType dtype) {
  NG_CHECK(step != 0, "arange", "expected a non-zero step, got 0 (start ", start, ", end ", end, ")");
  NG_CHECK(std::isfinite(start) && std::isfinite(end) && std::isfinite(step), "arange",
           "expected finite start, end and step, got start ", start, ", end ", end, ", step ", step);
  // The count as a double first: converting one past 2^63 (arange(0, 1e30)) to int64_t is undefined, and
  // x86 gave INT64_MIN, clamped to an empty tensor without a word.
  const double count = std::ceil((end - start) / step);
  NG_CHECK(std::isfinite(count) && count < 0x1p62, "arange", "[", start, ", ", end, ") with step ", step,
           " has ", count, " values, more than a tensor can hold");
  const int64_t n = std::max<int64_t>(0, int64_t(count));
  Tensor t = empty({n}, dtype);
  NG_DISPATCH_ALL(dtype, "arange", [&]<typename scalar_t>() {
    // The values run from start to last in one direction, so if both ends fit the dtype, all do. An i64
    // value past 2^63 was undefined (x86 wrote INT64_MIN without a word), and a half dtype turned every
    // value past its largest finite one into inf.
    if (n > 0) {
      const double last = start + double(n - 1) * step;
      for (const double v : {start, last}) {
        if constexpr (std::is_same_v<scalar_t, int64_t>) {
          check_has_i64(v, DType::f64, "arange");
        } else {
          NG_CHECK(std::isfinite(to_double(from_double<scalar_t>(v))), "arange", "the value ", v,
                   " overflows ", dtype_name(dtype), " (to ", to_double(from_double<scalar_t>(v)), ")");
        }
      }
    }
    scalar_t* p = t.data<scalar_t>();
    for (int64_t i = 0; i < n; ++i) p[i] = from_double<scalar_t>(start + double(i) * step);
  });
  return t;
}
Tensor arange(int64_t end, DType dtype) {
  return arange(0.0, double(end), 1.0, dtype);
}

template <typename V>
static Tensor from_values(const std::vector<V>& values, const Shape& shape, DType dtype) {
  NG_CHECK(int64_t(values.size()) == numel(shape), "from_vector", "got ", values.size(), " values for shape ",
           shape_str(shape), ", which holds ", numel(shape));
  Tensor t = empty(shape, dtype);
  NG_DISPATCH_ALL(dtype, "from_vector", [&]<typename scalar_t>() {
    scalar_t* p = t.data<scalar_t>();
    for (size_t i = 0; i < values.size(); ++i) {
      if constexpr (std::is_same_v<scalar_t, int64_t> && std::is_same_v<V, int64_t>) {
        p[i] = values[i];
      } else {
        if constexpr (std::is_same_v<scalar_t, int64_t>)
          check_has_i64(double(values[i]), std::is_same_v<V, float> ? DType::f32 : DType::f64, "from_vector");
        p[i] = from_double<scalar_t>(double(values[i]));
      }
    }
  });
  return t;
}
Tensor from_vector(const std::vector<double>& v, const Shape& s, DType d) {
  return from_values(v, s, d);
}
Tensor from_vector(const std::vector<float>& v, const Shape& s, DType d) {
  return from_values(v, s, d);
}
Tensor from_vector(const std::vector<int64_t>& v, const Shape& s, DType d) {
  return from_values(v, s, d);
}

Tensor tensor(std::initializer_list<double> values, DType dtype) {
  return from_vector(std::vector<double>(values), {int64_t(values.size())}, dtype);
}

Tensor tensor(std::initializer_list<std::initializer_list<double>> rows, DType dtype) {
  std::vector<double> flat;
  int64_t cols = rows.size() ? int64_t(rows.begin()->size()) : 0;
  for (const auto& r : rows) {
    NG_CHECK(int64_t(r.size()) == cols, "tensor", "rows must all have the same length: expected ", cols,
             ", got ", r.size());
    flat.insert(flat.end(), r.begin(), r.end());
  }
  return from_vector(flat, {int64_t(rows.size()), cols}, dtype);
}

}  // namespace ng

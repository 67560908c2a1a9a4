#include "tensor/shape.h"

#include "tensor/error.h"

#include <algorithm>
#include <limits>

namespace ng {

// a * b for sizes, or an ng::Error when it does not fit in int64 (a shape from a file or a bad reshape must
// never wrap around silently: that is undefined behaviour, and then a small allocation for a "huge" tensor).
static int64_t checked_mul(int64_t a, int64_t b, const Shape& shape) {
  int64_t r = 0;
  NG_CHECK(!__builtin_mul_overflow(a, b, &r), "shape", "the sizes of ", shape_str(shape),
           " multiply past the largest int64 (expected a product below 2^63)");
  return r;
}

// A zero size anywhere makes 0 elements, whatever the other sizes are: checked before multiplying, so that
// an expanded view of shape (2^40, 2^40, 0) has numel 0 like one of (0, 2^40, 2^40) (it threw: the product
// of the sizes before the 0 passes int64).
int64_t numel(const Shape& shape) {
  for (int64_t s : shape)
    if (s == 0) return 0;
  int64_t n = 1;
  for (int64_t s : shape) n = checked_mul(n, s, shape);
  return n;
}

int64_t storage_bytes(const Shape& shape, int64_t item_size, const char* op) {
  int64_t n = 1;
  for (int64_t s : shape) {
    NG_CHECK(s >= 0, op, "sizes must be non-negative, got shape ", shape_str(shape));
    NG_CHECK(s == 0 || n <= std::numeric_limits<int64_t>::max() / item_size / s, op, "shape ",
             shape_str(shape), " has too many elements (the byte size overflows 64 bits)");
    n *= s;
  }
  return n * item_size;
}

// A zero-size dim contributes 1 to the strides (as PyTorch does), so an empty tensor's strides stay those of
// its non-empty dims, and they must fit.
Strides contiguous_strides(const Shape& shape) {
  Strides st(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    st[i] = acc;
    if (i > 0) acc = checked_mul(acc, std::max<int64_t>(shape[i], 1), shape);
  }
  return st;
}

std::string shape_str(const Shape& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + ")";
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t lo = ndim == 0 ? -1 : -ndim, hi = ndim == 0 ? 0 : ndim - 1;
  NG_CHECK(dim >= lo && dim <= hi, op, "dim ", dim, " is out of range for a tensor with ", ndim,
           " dims (expected ", lo, " to ", hi, ")");
  return dim < 0 ? dim + std::max<int64_t>(ndim, 1) : dim;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t sa = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t sb = i < n - b.size() ? 1 : b[i - (n - b.size())];
    NG_CHECK(sa == sb || sa == 1 || sb == 1, op, "shapes ", shape_str(a), " and ", shape_str(b),
             " cannot be broadcast together (dim ", i, ": ", sa, " vs ", sb, ")");
    out[i] = sa == 1 ? sb : sa;
  }
  return out;
}

}  // namespace ng

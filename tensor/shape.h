// Shapes, strides and broadcasting.
//
// Letters used for shapes throughout normgrad (written down once, here):
//   B batch, T time (sequence), C channels / hidden size, V vocab, NH heads, HS head size,
//   G groups, N rows of a 2-D matrix, M/K/N for matmul (M x K) @ (K x N).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ng {

using Shape = std::vector<int64_t>;
using Strides = std::vector<int64_t>;

int64_t numel(const Shape& shape);
// The bytes a new contiguous tensor of `shape` takes, item_size bytes per element: an ng::Error naming `op`
// for a negative size or a byte count past int64 (which would otherwise wrap and allocate too little).
// Every allocating factory calls it, CPU and CUDA alike.
int64_t storage_bytes(const Shape& shape, int64_t item_size, const char* op);
// Row-major ("C order") strides, in elements.
Strides contiguous_strides(const Shape& shape);
// "(2, 16, 128)"
std::string shape_str(const Shape& shape);
// Wrap a possibly negative dim into [0, ndim). Throws naming `op` when out of range.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
// NumPy broadcasting: align from the right; each pair of sizes must be equal or contain a 1.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

}  // namespace ng

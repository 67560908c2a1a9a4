// .npy files (NumPy's array format), so tensors can be inspected and compared with NumPy.
//
// Format (version 1.0; 2.0 and 3.0 only widen the header length to 4 bytes):
//   bytes 0-5   magic "\x93NUMPY"
//   bytes 6-7   version major, minor
//   bytes 8-9   header length H (little-endian uint16; uint32 in bytes 8-11 for versions 2 and 3)
//   H bytes     a Python dict literal, e.g. {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
//               padded with spaces and a final '\n' so that the data starts at a multiple of 64
//   data        the elements in C (row-major) order
//
// Supported dtypes: f32 '<f4', f64 '<f8', f16 '<f2', i64 '<i8'. bf16 has no NumPy dtype: saving it is an
// error (convert with .to(DType::f32)). Loading is defensive: a bad magic, an unknown dtype, fortran_order
// True, a malformed dict, a shape whose size overflows or does not match the bytes in the file are all an
// ng::Error naming the file and the problem. Nothing is allocated until the header has been checked
// against the file's size, so a lying header cannot trigger a giant allocation.
//
// More, with every bad-file case: docs/npy.md.
#pragma once

#include <string>

#include "tensor/tensor.h"

namespace ng {

// Write t (any strides) as a C-order .npy file. Atomic (io/whole_file.h): writes a temporary file in the
// same folder, fsyncs it, then renames it over `path`, so a crash never leaves a half-written file under the
// final name.
void save_npy(const std::string& path, const Tensor& t);
Tensor load_npy(const std::string& path);

}  // namespace ng

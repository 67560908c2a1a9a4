// The safetensors file format (https://github.com/huggingface/safetensors), read and written from scratch.
//
//   bytes 0..7     N, the header length, unsigned 64-bit little-endian
//   bytes 8..8+N   a JSON object (UTF-8), padded with spaces:
//                    { "__metadata__": {"key": "value", ...},                       (optional, strings only)
//                      "<name>": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ... }
//   the rest       the data buffer: each tensor's raw little-endian bytes, row-major, at
//                  [begin, end) relative to the start of the buffer
//
// dtypes: F32, F64, F16, BF16, I64 (normgrad's five). Files we write have the tensors packed in the given
// order, no gaps, the header padded to a multiple of 8 bytes: Python's `safetensors.numpy.load_file` reads
// them (tests/data/ has a file written by Python that the tests read back).
//
// Loading trusts nothing in the file. It checks, and reports as ng::Error naming the file and the problem:
// the header length against the file size and the format's 100 MB limit, the header's opening '{', the JSON,
// every entry's keys, dtype, shape and offsets (in bounds, sizes equal to numel * dtype size, no overlap, no
// gap, the buffer fully used), the metadata types, and the names. It never allocates more than the file
// holds: every tensor's byte size is checked against the buffer before its memory is allocated.
//
// Writing is atomic: the bytes go to a temporary file in the same folder, which is fsync'ed and then
// renamed over the target (and the folder fsync'ed), so a crash or error mid-save leaves any old file intact
// (io/whole_file.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "io/whole_file.h"  // atomic_write_file: how save_safetensors writes
#include "nn/module.h"

namespace ng::io {

struct SafetensorsData {
  nn::NamedTensors tensors;                     // in file order (by data offset)
  std::map<std::string, std::string> metadata;  // "__metadata__", empty if absent
};

// Tensors are written as they are (dtype, shape), made contiguous. Names must be unique, non-empty and not
// "__metadata__". CPU tensors only.
void save_safetensors(const std::string& path, const nn::NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {});

SafetensorsData load_safetensors(const std::string& path);

// One tensor as the header describes it: its bytes are [begin, end) of the data buffer after the header.
struct SafetensorsEntry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

struct SafetensorsHeader {
  std::vector<SafetensorsEntry> entries;        // in file order (by data offset)
  std::map<std::string, std::string> metadata;  // "__metadata__", empty if absent
};

// The header alone: the 8-byte length and the JSON, never the tensors. Every check load_safetensors makes is
// made here too, against the file's size (so a truncated file is refused as it would be on loading), and
// errors name "read_safetensors_header" and the file. For a checkpoint's config (nn::read_checkpoint_config)
// and for whether a file is a checkpoint (nn::is_checkpoint_file): of a file whose header does not start
// with '{' it reads 9 bytes.
SafetensorsHeader read_safetensors_header(const std::string& path);

// The bytes save_safetensors would write, and the parser load_safetensors uses (`what` names the source
// in errors). Exposed for tests that build corrupt files.
std::string safetensors_serialize(const nn::NamedTensors& tensors,
                                  const std::map<std::string, std::string>& metadata = {});
SafetensorsData safetensors_parse(const std::string& bytes, const std::string& what);

}  // namespace ng::io

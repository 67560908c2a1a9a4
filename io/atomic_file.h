// Writing a whole file so that readers see either the old file or the new one, never a mix or a stump.
//
//   1. write the bytes to a temporary file in the same folder (same file system: the rename below is atomic)
//   2. fsync it (the bytes are on disk before the name points at them)
//   3. rename it over the target
//   4. fsync the folder (the rename itself is on disk)
//
// If any step fails the temporary file is removed and an ng::Error names the file and the step; the old
// file, if there was one, is untouched. Used by everything that saves: safetensors checkpoints
// (io/safetensors.h), .npy files (tensor/npy.h), PNG plots (plot/png.cpp) and the trainers' CSV and summaries
// (examples/common/report.h).
#pragma once

#include <cstdint>
#include <string>

namespace ng::io {

// Write `bytes` to `path` atomically (temp file in the same folder, fsync, rename, fsync the folder).
// `op` begins the error messages ("save_npy: ...").
void atomic_write_file(const std::string& path, const std::string& bytes, const char* op = "save");

namespace testing {
// Fault injection for tests: the next atomic_write_file fails with an ng::Error after writing this many
// bytes of the temporary file (negative: off). It resets itself after firing.
void fail_next_write_after(int64_t bytes);
}  // namespace testing

}  // namespace ng::io

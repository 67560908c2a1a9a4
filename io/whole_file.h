// Reading and writing whole files: the two ways normgrad touches a file it loads or saves.
//
// Reading (read_whole_file): the file must be a regular file. A folder, a device or a pipe opens as a stream
// too, but its "size" means nothing (a folder's tellg is 2^63 - 1, which a loader would then try to
// allocate): those are an ng::Error naming the path, as are a missing file and a short read.
//
// Writing (atomic_write_file), so that readers see either the old file or the new one, never a mix or a
// stump:
//
//   1. write the bytes to a temporary file in the same folder (same file system: the rename below is atomic)
//   2. fsync it (the bytes are on disk before the name points at them)
//   3. rename it over the target
//   4. fsync the folder (the rename itself is on disk)
//
// If any step fails the temporary file is removed and an ng::Error names the file and the step; the old
// file, if there was one, is untouched. Used by everything that saves: safetensors checkpoints
// (io/safetensors.h), .npy files (tensor/npy.h), PNG plots (plot/png.cpp) and the trainers' CSV and
// summaries (examples/common/report.h).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace ng::io {

// The bytes of the regular file at `path`. Errors start with `op` ("load_safetensors: ...").
std::string read_whole_file(const std::string& path, const char* op);

// The checks read_whole_file makes before reading, for loaders that read a file piece by piece (load_npy):
// `path` names a regular file. Returns its size in bytes.
int64_t regular_file_size(const std::string& path, const char* op);

// Write `bytes` to `path` atomically (temp file in the same folder, fsync, rename, fsync the folder).
// `op` begins the error messages ("save_npy: ...").
void atomic_write_file(const std::string& path, std::string_view bytes, const char* op = "save");
// The same for a file made of several pieces, written one after the other (a header, then a tensor's
// bytes in place: no copy of the whole file in memory).
void atomic_write_file(const std::string& path, std::initializer_list<std::string_view> pieces,
                       const char* op = "save");

namespace testing {
// Fault injection for tests: the next atomic_write_file fails with an ng::Error after writing this many
// bytes of the temporary file (negative: off). It resets itself after firing.
void fail_next_write_after(int64_t bytes);
}  // namespace testing

}  // namespace ng::io

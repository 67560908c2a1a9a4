// Reading and writing whole files: the two ways normgrad touches a file it loads or saves.
//
// Reading (read_whole_file): the file must be a regular file. A folder, a device or a pipe opens as a stream
// too, but its "size" means nothing (a folder's tellg is 2^63 - 1, which a loader would then try to
// allocate): those are an ng::Error naming the path, as are a missing file, a short read and a file too
// large to allocate (its size in the message, never a std::bad_alloc).
//
// Writing (atomic_write_file), so that readers see either the old file or the new one, never a mix or a
// stump:
//
//   1. write the bytes to a new temporary file in the same folder (same file system: the rename below is
//      atomic), created with O_EXCL | O_NOFOLLOW under a name with 64 random bits: never a file or symlink
//      that was there before. It has the old file's permission bits when the target is a regular file
//      already (a file made private with chmod 600 stays private), else 0666 less the umask
//   2. fsync it (the bytes are on disk before the name points at them)
//   3. rename it over the target
//   4. fsync the folder (the rename itself is on disk)
//
// If step 1, 2 or 3 fails the temporary file is removed and an ng::Error names the file and the step; the
// old file, if there was one, is untouched. Step 4 comes after the rename: when the folder's fsync fails
// (EIO) the new file is already in place, and the ng::Error says that it is written but may not survive a
// crash. A folder that cannot be opened, or whose file system does not sync folders (EINVAL, EROFS), is
// not an error. Used by everything that saves: safetensors checkpoints
// (io/safetensors.h), .npy files (tensor/npy.h), PNG plots (plot/png.cpp) and the trainers' CSV and
// summaries (examples/common/report.h).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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

// Several files written as a set (a trainer's PNG, CSV, summary and command line): every temporary file is
// written and fsynced before the first rename, so a failure while writing (a full disk, a folder in the
// way) leaves all the old files as they were. The renames then follow back to back, and the folders are
// fsynced after the last of them. Each rename is atomic; the set as a whole is not, but only a rename
// failing between two of them (no space is needed by then) could split it, and then the temporary files
// not yet renamed are removed.
void atomic_write_files(const std::vector<std::pair<std::string, std::string_view>>& files,
                        const char* op = "save");

// The check every write above makes before it writes anything, for callers that want to fail early (a
// trainer, before hours of training): an ng::Error starting with `op` when `path` is a folder, or is
// something other than a regular file or a symlink (a FIFO, a device node, a socket), which the rename
// would replace.
void check_write_target(const std::string& path, const char* op);

namespace testing {
// This thread's next temporary file's name ends in ".tmp.<suffix>" instead of a random one (to test that an
// existing file or symlink at that name is never opened).
void next_temp_suffix(const std::string& suffix);
// Fault injection for tests: this thread's next atomic_write_file fails with an ng::Error after writing this
// many bytes of the temporary file (negative: off). It resets itself after firing.
void fail_next_write_after(int64_t bytes);
// Fault injection for tests: this thread's next fsync of a saved file's folder reports errno `err` (EIO,
// EINVAL, ...) after it has run. It resets itself after firing.
void fail_next_folder_fsync(int err);
}  // namespace testing

}  // namespace ng::io

// io/safetensors: round trip of every dtype, a file written by Python's safetensors, every kind of bad
// file (each with its message), and the atomic write.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <new>
#include <numbers>

#include "io/safetensors.h"
#include "normgrad.h"
#include "ops_test_util.h"

using namespace ng;
using ng::testing::expect_error;
namespace fs = std::filesystem;

namespace {

// One scratch folder per test process, removed when the process exits.
struct ScratchDir {
  fs::path path = fs::temp_directory_path() / ("ng_safetensors_" + std::to_string(::getpid()));
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
} scratch;

std::string temp_dir() {
  fs::create_directories(scratch.path);
  return scratch.path.string();
}

std::vector<uint8_t> raw_bytes(const Tensor& t) {
  Tensor c = t.contiguous();
  const uint8_t* p = static_cast<const uint8_t*>(c.raw_data());
  return std::vector<uint8_t>(p, p + c.numel() * int64_t(dtype_size(c.dtype())));
}

// A file from a JSON header and a data buffer, with a correct length prefix unless `length` is given.
std::string make_file(const std::string& json, const std::string& data, int64_t length = -1) {
  uint64_t n = length >= 0 ? uint64_t(length) : json.size();
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(char((n >> (8 * i)) & 0xff));
  return out + json + data;
}

// Expect safetensors_parse to throw an ng::Error whose message contains `needle`, and
// read_safetensors_header the same of a file holding `bytes`: every check is made from the header and the
// file's size.
void expect_bad(const std::string& bytes, const std::string& needle) {
  try {
    io::safetensors_parse(bytes, "bad.safetensors");
    FAIL() << "expected ng::Error containing: " << needle;
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("load_safetensors: bad.safetensors: "), std::string::npos) << m;
    EXPECT_NE(m.find(needle), std::string::npos) << "message: " << m << "\nexpected to contain: " << needle;
  }
  const std::string path = temp_dir() + "/bad.safetensors";
  io::atomic_write_file(path, bytes);
  try {
    io::read_safetensors_header(path);
    ADD_FAILURE() << "read_safetensors_header: expected ng::Error containing: " << needle;
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("read_safetensors_header: " + path + ": "), std::string::npos) << m;
    EXPECT_NE(m.find(needle), std::string::npos) << "message: " << m << "\nexpected to contain: " << needle;
  }
}

// A file of `size` bytes that starts with `head` and is sparse after it (no disk space used); false where the
// file system cannot hold it.
bool sparse_file(const std::string& path, const std::string& head, uint64_t size) {
  io::atomic_write_file(path, head);
  std::error_code ec;
  fs::resize_file(path, uintmax_t(size), ec);
  return !ec;
}

}  // namespace

TEST(Safetensors, RoundTripEveryDtypeShapeAndMetadata) {
  Generator g(3);
  nn::NamedTensors in = {
      {"a.f32", randn({2, 3}, g)},
      {"b.f64", randn({4}, g, DType::f64)},
      {"c.f16", randn({3, 1}, g).to(DType::f16)},
      {"d.bf16", randn({5}, g).to(DType::bf16)},
      {"e.i64", from_vector(std::vector<int64_t>{-1, 0, int64_t(1) << 62}, Shape{3})},
      {"f.scalar", scalar_tensor(2.5)},
      {"g.empty", zeros({0, 7})},
      {"h.transposed", randn({3, 4}, g).t()},  // non-contiguous: written in row-major order of the view
  };
  const std::string path = temp_dir() + "/round.safetensors";
  io::save_safetensors(path, in, {{"format", "test"}, {"note", "héllo \"quoted\""}});
  io::SafetensorsData out = io::load_safetensors(path);
  ASSERT_EQ(out.tensors.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(out.tensors[i].first, in[i].first);
    EXPECT_EQ(out.tensors[i].second.dtype(), in[i].second.dtype()) << in[i].first;
    EXPECT_EQ(out.tensors[i].second.shape(), in[i].second.shape()) << in[i].first;
    EXPECT_EQ(raw_bytes(out.tensors[i].second), raw_bytes(in[i].second)) << in[i].first;  // bit for bit
  }
  EXPECT_EQ(out.metadata.at("format"), "test");
  EXPECT_EQ(out.metadata.at("note"), "héllo \"quoted\"");
  // The header is padded so the data starts 8-byte aligned.
  std::string bytes = io::safetensors_serialize(in);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(uint8_t(bytes[size_t(i)])) << (8 * i);
  EXPECT_EQ(n % 8, 0u);
}

TEST(Safetensors, ReadsAFileWrittenByPython) {
  // tests/data/make_safetensors_fixture.py wrote it with safetensors 0.8.0.
  io::SafetensorsData d =
      io::load_safetensors(std::string(NORMGRAD_SOURCE_DIR) + "/tests/data/python_fixture.safetensors");
  std::map<std::string, Tensor> t(d.tensors.begin(), d.tensors.end());
  ASSERT_EQ(t.size(), 7u);
  EXPECT_EQ(t["f32"].shape(), (Shape{2, 3}));
  EXPECT_EQ(t["f32"].to_vector<double>(), (std::vector<double>{-1, -0.5, 0, 0.5, 1, 1.5}));
  EXPECT_EQ(t["f64"].to_vector<double>(), (std::vector<double>{std::numbers::pi, -std::numbers::e, 1e-300}));
  EXPECT_EQ(t["f16"].dtype(), DType::f16);
  EXPECT_EQ(t["f16"].to_vector<double>()[1], -2.5);
  EXPECT_EQ(t["f16"].to_vector<double>()[2], 65504.0);
  EXPECT_EQ(t["bf16"].dtype(), DType::bf16);
  EXPECT_EQ(t["bf16"].to_vector<double>(), (std::vector<double>{1.0, -2.0, 0.15625}));
  EXPECT_EQ(t["i64"].to_vector<int64_t>(), (std::vector<int64_t>{-3, 0, 9007199254740993}));
  EXPECT_EQ(t["scalar"].dim(), 0);
  EXPECT_EQ(t["scalar"].item(), 7.25);
  EXPECT_EQ(t["empty"].shape(), (Shape{0, 4}));
  EXPECT_EQ(d.metadata.at("note"), "fixture");
  EXPECT_EQ(d.metadata.at("source"), "python safetensors 0.8.0");
}

TEST(Safetensors, BadFilesAreErrorsThatSayWhy) {
  const std::string ok_entry = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string eight(8, '\0');
  // Sanity: the good version parses.
  EXPECT_EQ(io::safetensors_parse(make_file(ok_entry, eight), "ok").tensors.size(), 1u);

  expect_bad("abc", "file is 3 bytes, too short");
  expect_bad(make_file(ok_entry, eight, 1000), "header length 1000 exceeds the");  // lying length
  expect_bad(make_file(ok_entry, eight).substr(0, 20), "exceeds");                 // truncated header
  expect_bad(make_file(ok_entry, eight).substr(0, 8 + ok_entry.size() + 5),
             "past the end");                                                              // truncated data
  expect_bad(make_file(ok_entry, eight, int64_t(ok_entry.size()) - 3), "not valid JSON");  // short length
  expect_bad(make_file("[1,2,3]", ""),
             "the header starts with '[', expected '{' (the header is a JSON object)");
  expect_bad(make_file(std::string(2, '\0'), ""), "the header starts with \\x00, expected '{'");
  expect_bad(make_file(R"({"x":{"dtype":"F8","shape":[2],"data_offsets":[0,8]}})", eight),
             "entry 'x' has dtype \"F8\", expected one of F32, F64, F16, BF16, I64");
  expect_bad(
      make_file(R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", eight),
      "entry 'x' has shape [3] and dtype F32, which need 12 bytes, but its data_offsets [0, 8] hold 8");
  expect_bad(make_file(R"({"x":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", eight), "non-negative");
  expect_bad(
      make_file(R"({"x":{"dtype":"F32","shape":[1000000000000,1000000000],"data_offsets":[0,8]}})", eight),
      "larger than the file");
  // An empty tensor whose other sizes multiply past anything the file could describe.
  expect_bad(
      make_file(R"({"x":{"dtype":"F32","shape":[0,300000000080806,3000010310010],"data_offsets":[0,0]}})",
                ""),
      "larger than the file");
  expect_bad(make_file(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", eight), "begin > end");
  expect_bad(make_file(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", eight),
             "expected [begin, end]");
  expect_bad(make_file(R"({"x":{"dtype":"F32","shape":[2]}})", eight), "needs dtype, shape and data_offsets");
  expect_bad(make_file(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"extra":1}})", eight),
             "entry 'x' has an unexpected key 'extra'");
  expect_bad(make_file(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                       R"("y":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                       eight),
             "overlaps");
  expect_bad(make_file(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", eight), "leaving a gap");
  expect_bad(make_file(ok_entry, eight + "zz"), "trailing bytes");
  expect_bad(
      make_file(R"({"__metadata__":{"k":1},"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", eight),
      "__metadata__ entry 'k' is a JSON number, expected a string");
  expect_bad(make_file(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                       R"("x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                       eight),
             "the name 'x' appears twice");
  // ... at any depth: a metadata key, a tensor's field
  expect_bad(
      make_file(R"({"__metadata__":{"k":"1","k":"2"},"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                eight),
      "the name 'k' appears twice in one object of the header");
  expect_bad(make_file(R"({"x":{"dtype":"F32","shape":[2],"dtype":"F64","data_offsets":[0,8]}})", eight),
             "the name 'dtype' appears twice in one object of the header");
  expect_bad(make_file(R"({"":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", eight), "empty name");
  try {
    io::load_safetensors("/nonexistent/dir/file.safetensors");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/file.safetensors: no such file"),
              std::string::npos);
  }
  // A folder or a device opens as a stream too; a folder's size reads as 2^63 - 1, which the loader once
  // tried to allocate (std::bad_alloc, not an ng::Error). Now both are refused by name.
  expect_error([] { io::load_safetensors(fs::temp_directory_path().string()); },
               {"load_safetensors: ", "not a regular file (a folder)"});
  expect_error([] { io::load_safetensors("/dev/null"); },
               {"load_safetensors: /dev/null: not a regular file (a device, pipe or socket)"});
  expect_error([] { nn::read_checkpoint_config(fs::temp_directory_path().string()); },
               {"not a regular file (a folder)"});
  // Saving over a folder is refused before any temporary file is made (beside it, in its parent).
  expect_error(
      [] {
        io::save_safetensors(fs::temp_directory_path().string(), {{"w", ones({2})}});
      },
      {"save_safetensors: cannot write '" + fs::temp_directory_path().string() + "': it is a folder"});
  // A save into a missing folder names the op and the file asked for, then the temporary file it could not
  // create (it once said only "save: cannot create '/dir/x.safetensors.tmp.15767.0.740c...'").
  expect_error(
      [] {
        io::save_safetensors("/nonexistent/dir/x.safetensors", {{"w", ones({2})}});
      },
      {"save_safetensors: cannot write '/nonexistent/dir/x.safetensors': cannot create its temporary file "
       "'/nonexistent/dir/x.safetensors.tmp.",
       std::strerror(ENOENT)});
}

// read_safetensors_header gives what load_safetensors would, less the tensors: the same names in file
// order, dtypes, shapes, byte ranges and metadata. Of a sparse file that declares a 1 TiB tensor it reads the
// header alone (loading it would need 1 TiB), as do read_checkpoint_config and is_checkpoint_file.
TEST(Safetensors, TheHeaderAloneDescribesTheFileWithoutReadingTheTensors) {
  const std::string path = temp_dir() + "/header.safetensors";
  const nn::NamedTensors tensors = {{"b", from_vector(std::vector<double>{1, 2, 3}, Shape{3}, DType::f64)},
                                    {"a", ones({2, 2}, DType::bf16)},
                                    {"z", from_vector(std::vector<int64_t>{7}, Shape{})}};
  io::save_safetensors(path, tensors, {{"k", "v"}});
  const io::SafetensorsHeader h = io::read_safetensors_header(path);
  const io::SafetensorsData d = io::load_safetensors(path);
  EXPECT_EQ(h.metadata, d.metadata);
  ASSERT_EQ(h.entries.size(), 3u);
  ASSERT_EQ(d.tensors.size(), 3u);
  uint64_t at = 0;
  for (size_t i = 0; i < 3; ++i) {
    const io::SafetensorsEntry& e = h.entries[i];
    EXPECT_EQ(e.name, d.tensors[i].first);
    EXPECT_EQ(e.dtype, d.tensors[i].second.dtype()) << e.name;
    EXPECT_EQ(e.shape, d.tensors[i].second.shape()) << e.name;
    EXPECT_EQ(e.begin, at) << e.name;
    EXPECT_EQ(e.end - e.begin, uint64_t(d.tensors[i].second.numel()) * dtype_size(e.dtype)) << e.name;
    at = e.end;
  }
  EXPECT_EQ(at, uint64_t(3 * 8 + 4 * 2 + 8));

  const uint64_t tib = uint64_t(1) << 40;
  const std::string json = R"({"__metadata__":{"format":"normgrad-checkpoint-v1","config":"{\"dim\":4}"},)"
                           R"("w":{"dtype":"F32","shape":[274877906944],"data_offsets":[0,1099511627776]}})";
  const std::string huge = temp_dir() + "/huge_header.safetensors";
  if (!sparse_file(huge, make_file(json, ""), 8 + json.size() + tib)) {
    fs::remove(huge);
    GTEST_SKIP() << "this file system cannot hold a sparse 1 TiB file";
  }
  const io::SafetensorsHeader hh = io::read_safetensors_header(huge);
  ASSERT_EQ(hh.entries.size(), 1u);
  EXPECT_EQ(hh.entries[0].shape, (Shape{int64_t(1) << 38}));
  EXPECT_EQ(hh.entries[0].end, tib);
  EXPECT_EQ(nn::read_checkpoint_config(huge), "{\"dim\":4}");
  EXPECT_TRUE(nn::is_checkpoint_file(huge));
  fs::remove(huge);
}

// A header longer than the format's 100 MB limit (the reference implementation's) is refused by its length,
// before it is read or allocated.
TEST(Safetensors, AHeaderOverTheFormatsLimitIsRefusedByItsLength) {
  const uint64_t n = 100'000'001;
  const std::string path = temp_dir() + "/long_header.safetensors";
  if (!sparse_file(path, make_file("{", "", int64_t(n)), 8 + n)) {
    fs::remove(path);
    GTEST_SKIP() << "this file system cannot hold a sparse 100 MB file";
  }
  const std::string limit = ": header length 100000001 exceeds the format's limit of 100000000 bytes";
  expect_error([&] { io::read_safetensors_header(path); }, {"read_safetensors_header: " + path + limit});
  expect_error([&] { io::load_safetensors(path); }, {"load_safetensors: " + path + limit});
  fs::remove(path);
}

TEST(Safetensors, WriterRejectsBadNames) {
  expect_error(
      [] {
        io::safetensors_serialize({{"a", zeros({1})}, {"a", zeros({1})}});
      },
      {"save_safetensors: tensor name 'a' appears twice, expected every name once"});
  expect_error(
      [] {
        io::safetensors_serialize({{"__metadata__", zeros({1})}});
      },
      {"save_safetensors: invalid tensor name '__metadata__'",
       "expected a non-empty name other than '__metadata__'"});
  expect_error(
      [] {
        io::safetensors_serialize({{"", zeros({1})}});
      },
      {"save_safetensors: invalid tensor name ''", "expected a non-empty name"});
}

// JSON strings are UTF-8: a name or metadata string that is not is an ng::Error naming it (it was the JSON
// library's own exception, which a trainer's guarded_main does not catch).
TEST(Safetensors, WriterRejectsTextThatIsNotUtf8) {
  expect_error(
      [] {
        io::safetensors_serialize({{"w\xff", zeros({1})}});
      },
      {"save_safetensors: tensor name 'w\\xff' is not valid UTF-8"});
  expect_error(
      [] {
        io::safetensors_serialize({{"w", zeros({1})}}, {{"note", "caf\xe9"}});
      },
      {"save_safetensors: metadata value of 'note': 'caf\\xe9' is not valid UTF-8"});
  expect_error(
      [] {
        io::safetensors_serialize({{"w", zeros({1})}}, {{"\xc3", "x"}});
      },
      {"save_safetensors: metadata key '\\xc3' is not valid UTF-8"});
  // UTF-8 itself is fine, and comes back as it went.
  const std::string dir = temp_dir() + "/utf8";
  fs::create_directories(dir);
  io::save_safetensors(dir + "/u.safetensors", {{"poids_\xc3\xa9", ones({1})}}, {{"note", "caf\xc3\xa9"}});
  auto back = io::load_safetensors(dir + "/u.safetensors");
  EXPECT_EQ(back.tensors[0].first, "poids_\xc3\xa9");
  EXPECT_EQ(back.metadata.at("note"), "caf\xc3\xa9");
}

// The temporary file is created new (O_EXCL | O_NOFOLLOW): a file or a symlink already at its name is never
// opened, so a symlink planted there cannot redirect the write to another file. Here the next name is fixed
// and a symlink to a victim file put there first: the write takes another name, and the victim is untouched.
TEST(Safetensors, TheTemporaryFileIsNeverOneThatWasThere) {
  const std::string dir = temp_dir() + "/excl";
  fs::create_directories(dir);
  const std::string path = dir + "/target.safetensors", victim = dir + "/victim.txt";
  { std::ofstream(victim) << "victim"; }
  fs::create_symlink(victim, path + ".tmp.planted");
  io::testing::next_temp_suffix("planted");
  io::save_safetensors(path, {{"w", full({2}, 7.0)}});
  EXPECT_EQ(io::load_safetensors(path).tensors[0].second.to_vector<double>(),
            (std::vector<double>{7.0, 7.0}));
  std::ifstream in(victim);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "victim");
  EXPECT_TRUE(fs::is_symlink(path + ".tmp.planted"));  // left alone
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(path)));
}

TEST(Safetensors, FolderFsyncErrorsAreReportedUnlessTheFolderCannotBeSynced) {
  // After the rename, the folder is fsynced so that the rename survives a crash. EIO there is reported
  // (the new file is in place, but may not be on disk); EINVAL and EROFS mean the file system does not sync
  // folders, and are not errors. Injected: a real EIO needs a failing disk.
  const std::string dir = temp_dir() + "/folder_fsync";
  fs::create_directories(dir);
  const std::string path = dir + "/state.safetensors";
  io::testing::fail_next_folder_fsync(EIO);
  try {
    io::save_safetensors(path, {{"w", full({4}, 1.0)}});
    FAIL() << "expected the folder's fsync error";
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("is written, but fsync of its folder failed: " +
                                   std::string(std::strerror(EIO)) + " (the rename may not survive a crash)"),
        std::string::npos)
        << e.what();
  }
  EXPECT_EQ(io::load_safetensors(path).tensors[0].second.to_vector<double>(), (std::vector<double>(4, 1.0)));
  for (int err : {EINVAL, EROFS}) {
    io::testing::fail_next_folder_fsync(err);
    io::save_safetensors(path, {{"w", full({4}, 2.0)}});  // no error
  }
  io::save_safetensors(path, {{"w", full({4}, 3.0)}});  // the fault fired once each time
  EXPECT_EQ(io::load_safetensors(path).tensors[0].second.to_vector<double>(), (std::vector<double>(4, 3.0)));
}

// A set of files (a trainer's PNG, CSV, summary, command line) whose folder fsync fails: every file of the
// set is the new one and no temporary file is left. The fsync used to follow the first rename, so its
// error left the other three temporaries behind and the old run's three files beside the new PNG.
TEST(Safetensors, AFailedFolderFsyncLeavesTheWholeSetWrittenAndNoTemporaries) {
  const std::string dir = temp_dir() + "/set_fsync";
  fs::create_directories(dir);
  const std::vector<std::string> names = {"a.png", "a.csv", "a.md", "a.cmd.txt"};
  for (const std::string& n : names) io::atomic_write_file(dir + "/" + n, std::string("old"), "test");
  std::vector<std::pair<std::string, std::string_view>> files;
  for (const std::string& n : names) files.emplace_back(dir + "/" + n, "new");
  io::testing::fail_next_folder_fsync(EIO);
  try {
    io::atomic_write_files(files, "Report");
    FAIL() << "expected the folder's fsync error";
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("Report: '" + dir + "/a.png' is written, but fsync of its folder failed"),
        std::string::npos)
        << e.what();
  }
  size_t entries = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    ++entries;
    EXPECT_EQ(entry.path().string().find(".tmp."), std::string::npos) << entry.path();
  }
  EXPECT_EQ(entries, names.size());
  for (const std::string& n : names) EXPECT_EQ(io::read_whole_file(dir + "/" + n, "test"), "new") << n;
}

// A FIFO or a device node at the path is refused before anything is written: the rename would have
// replaced it by a regular file (as root, /dev/null with a checkpoint). A symlink is still replaced itself.
TEST(Safetensors, SavesRefuseToReplaceWhatIsNotARegularFile) {
  const std::string dir = temp_dir() + "/special";
  fs::create_directories(dir);
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  for (int set = 0; set < 2; ++set) {
    try {
      if (set)
        io::atomic_write_files({{dir + "/ok.csv", "x"}, {fifo, "y"}}, "Report");
      else
        io::save_safetensors(fifo, {{"w", full({4}, 1.0)}});
      ADD_FAILURE() << "expected ng::Error";
    } catch (const Error& e) {
      EXPECT_NE(
          std::string(e.what()).find("cannot write '" + fifo +
                                     "': it is not a regular file (a device, pipe or socket), which the "
                                     "save would replace"),
          std::string::npos)
          << e.what();
    }
    EXPECT_TRUE(fs::is_fifo(fifo));
    EXPECT_FALSE(fs::exists(dir + "/ok.csv"));  // nothing of the set was written
  }
  fs::create_symlink(dir + "/target", dir + "/link");
  io::atomic_write_file(dir + "/link", std::string("z"), "test");
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(dir + "/link")));
  EXPECT_FALSE(fs::exists(dir + "/target"));
}

TEST(Safetensors, FailedWriteLeavesTheOldFileIntact) {
  const std::string dir = temp_dir() + "/atomic";
  fs::create_directories(dir);
  const std::string path = dir + "/state.safetensors";
  io::save_safetensors(path, {{"w", full({4}, 1.0)}});
  io::testing::fail_next_write_after(20);  // the next write dies 20 bytes into the temp file
  try {
    io::save_safetensors(path, {{"w", full({4}, 2.0)}});
    FAIL() << "expected the injected fault";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("injected fault after 20 bytes"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("the old file, if any, is untouched"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(io::load_safetensors(path).tensors[0].second.to_vector<double>(), (std::vector<double>(4, 1.0)));
  int files = 0;
  for (auto& entry : fs::directory_iterator(dir)) ++files, (void)entry;
  EXPECT_EQ(files, 1);                                  // no temp file left behind
  io::save_safetensors(path, {{"w", full({4}, 3.0)}});  // the fault fired once; writes work again
  EXPECT_EQ(io::load_safetensors(path).tensors[0].second.to_vector<double>(), (std::vector<double>(4, 3.0)));
}

// A file the user made private (chmod 600) stays private when it is saved again: the temporary file that
// replaces it takes its permission bits. It used to be created 0644, so a re-save made it readable by all.
// A new file gets what any new file gets, 0666 less the umask (set to 002 here, so that 0644 would show).
TEST(Safetensors, ASaveKeepsTheOldFilesPermissions) {
  const std::string dir = temp_dir() + "/mode";
  fs::create_directories(dir);
  auto mode_of = [](const std::string& p) {
    struct stat st {};
    EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
    return st.st_mode & 07777;
  };
  const std::string path = dir + "/private.safetensors";
  io::save_safetensors(path, {{"w", full({4}, 1.0)}});
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  io::save_safetensors(path, {{"w", full({4}, 2.0)}});
  EXPECT_EQ(mode_of(path), 0600u);
  EXPECT_EQ(io::load_safetensors(path).tensors[0].second.to_vector<double>(), (std::vector<double>(4, 2.0)));
  ASSERT_EQ(::chmod(path.c_str(), 0640), 0);
  io::atomic_write_files({{path, "x"}}, "test");  // the set writer too
  EXPECT_EQ(mode_of(path), 0640u);

  const mode_t old_umask = ::umask(002);
  const std::string fresh = dir + "/new.safetensors";
  io::save_safetensors(fresh, {{"w", full({4}, 1.0)}});
  ::umask(old_umask);
  EXPECT_EQ(mode_of(fresh), 0664u);
}

// A file larger than memory is an ng::Error naming the file and its size, not a std::bad_alloc. The file is
// a sparse 1 TiB one (no disk space used); allocating 1 TiB fails under Linux's default overcommit
// heuristic on any machine with less memory plus swap than that. Where it would succeed (overcommit_memory
// = 1, or a huge machine) the test is skipped: read_whole_file would then fill 1 TiB. Under AddressSanitizer
// a failed allocation aborts the process instead of throwing, so it is skipped there too.
TEST(Safetensors, AFileLargerThanMemoryIsAnErrorNotBadAlloc) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer aborts on a 1 TiB allocation instead of throwing std::bad_alloc";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
  GTEST_SKIP() << "a sanitizer aborts on a 1 TiB allocation instead of throwing std::bad_alloc";
#endif
#endif
  const int64_t size = int64_t(1) << 40;
  {
    // The same allocation, never touched: if it succeeds, read_whole_file's would too, and would then
    // write 1 TiB of zeros. (A called operator new and a volatile pointer: a new-expression whose result
    // is unused may be optimized away.)
    void* volatile probe = ::operator new(size_t(size), std::nothrow);
    const bool fits = probe != nullptr;
    ::operator delete(probe);
    if (fits) GTEST_SKIP() << "allocating 1 TiB succeeds here (overcommit), so it cannot fail";
  }
  const std::string path = temp_dir() + "/huge.safetensors";
  {
    std::ofstream f(path, std::ios::binary);
    ASSERT_TRUE(f.good()) << path;
  }
  std::error_code ec;
  fs::resize_file(path, uintmax_t(size), ec);
  if (ec) {
    fs::remove(path);
    GTEST_SKIP() << "this file system cannot hold a sparse 1 TiB file: " << ec.message();
  }
  expect_error([&] { io::load_safetensors(path); },
               {"load_safetensors: " + path +
                ": the file is 1099511627776 bytes, more than this process can "
                "allocate to read it"});
  fs::remove(path);
}

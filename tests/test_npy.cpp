// .npy: round trips, files written by NumPy, byte-identical output, and every bad-file case.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "io/whole_file.h"
#include "ops_test_util.h"

using namespace ng;
using namespace ng::testing;
namespace fs = std::filesystem;

namespace {

const std::string kData = std::string(NORMGRAD_SOURCE_DIR) + "/tests/data/";

// A fresh temporary folder per test.
class Npy : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("normgrad_npy_" + std::to_string(::getpid()) + "_" +
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }
  std::string file(const std::string& name) const { return (dir / name).string(); }

  // Write raw bytes.
  std::string raw(const std::string& name, const std::string& bytes) const {
    std::ofstream f(file(name), std::ios::binary);
    f.write(bytes.data(), std::streamsize(bytes.size()));
    return file(name);
  }
  // A .npy v1 (or v2) file with the given header text and `data_bytes` zero bytes of data.
  std::string npy(const std::string& name, const std::string& header, size_t data_bytes,
                  int version = 1) const {
    std::string h = header + "\n";
    std::string pre = "\x93NUMPY";
    pre += char(version);
    pre += char(0);
    pre += char(h.size() & 0xff);
    pre += char((h.size() >> 8) & 0xff);
    if (version >= 2) pre += std::string(2, '\0');
    return raw(name, pre + h + std::string(data_bytes, '\0'));
  }
  fs::path dir;
};

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

}  // namespace

TEST_F(Npy, RoundTripEveryDtype) {
  Generator g(1);
  Tensor a = randn({3, 4}, g);
  Tensor b = randn({2, 3, 5}, g, DType::f64);
  Tensor c = randn({7}, g).to(DType::f16);
  Tensor d = randint(-1000000, 1000000, {4, 2}, g);
  for (const Tensor& t : {a, b, c, d}) {
    save_npy(file("t.npy"), t);
    Tensor r = load_npy(file("t.npy"));
    EXPECT_EQ(r.shape(), t.shape());
    EXPECT_TRUE(bitwise_equal(r, t)) << t.str();
  }
}

TEST_F(Npy, RoundTripScalarEmptyAndNonContiguous) {
  save_npy(file("s.npy"), scalar_tensor(2.5, DType::f64));
  Tensor s = load_npy(file("s.npy"));
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.item(), 2.5);
  save_npy(file("e.npy"), zeros({0, 4}));
  EXPECT_EQ(load_npy(file("e.npy")).shape(), (Shape{0, 4}));
  // A transposed view is written in C order of its logical shape.
  Tensor x = tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}}).t();
  save_npy(file("t.npy"), x);
  Tensor r = load_npy(file("t.npy"));
  EXPECT_EQ(r.shape(), (Shape{3, 2}));
  EXPECT_EQ(r.to_vector<double>(), (std::vector<double>{1, 4, 2, 5, 3, 6}));
}

TEST_F(Npy, ReadsFilesWrittenByNumpy) {
  Tensor a = load_npy(kData + "numpy_f32_2x3.npy");
  EXPECT_EQ(a.dtype(), DType::f32);
  EXPECT_EQ(a.shape(), (Shape{2, 3}));
  EXPECT_EQ(a.to_vector<double>(), (std::vector<double>{-0.625, -0.375, -0.125, 0.125, 0.375, 0.625}));

  Tensor b = load_npy(kData + "numpy_f64_2x1x3.npy");
  EXPECT_EQ(b.shape(), (Shape{2, 1, 3}));
  auto bv = b.to_vector<double>();
  EXPECT_EQ(bv[0], 1e-300);
  EXPECT_TRUE(std::signbit(bv[1]));
  EXPECT_EQ(bv[2], M_PI);
  EXPECT_EQ(bv[3], INFINITY);
  EXPECT_EQ(bv[4], -INFINITY);

  Tensor c = load_npy(kData + "numpy_f16_4.npy");
  EXPECT_EQ(c.dtype(), DType::f16);
  const f16* pc = c.data<f16>();
  EXPECT_EQ(pc[0].bits, 0x3c00);
  EXPECT_EQ(pc[1].bits, 0x7bff);  // 65504, the largest f16
  EXPECT_EQ(pc[2].bits, 0x0001);  // 6e-8 rounds to the smallest subnormal
  EXPECT_EQ(f16_to_f32(pc[3]), -2.5f);

  Tensor d = load_npy(kData + "numpy_i64_5.npy");
  EXPECT_EQ(d.to_vector<int64_t>(),
            (std::vector<int64_t>{0, -1, int64_t(1) << 62, std::numeric_limits<int64_t>::min(), 7}));

  Tensor s = load_npy(kData + "numpy_f32_scalar.npy");
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.item(), 3.25);
  EXPECT_EQ(load_npy(kData + "numpy_f64_0x3.npy").shape(), (Shape{0, 3}));
}

TEST_F(Npy, WritesTheSameBytesAsNumpy) {
  for (const char* name : {"numpy_f32_2x3.npy", "numpy_f64_2x1x3.npy", "numpy_f16_4.npy", "numpy_i64_5.npy",
                           "numpy_f32_scalar.npy", "numpy_f64_0x3.npy", "numpy_f32_15_ones.npy"}) {
    save_npy(file("mine.npy"), load_npy(kData + name));
    EXPECT_EQ(read_all(file("mine.npy")), read_all(kData + name)) << name;
  }
}

TEST_F(Npy, SaveIsAtomicAndLeavesNoTemporaryFiles) {
  save_npy(file("w.npy"), ones({3}));
  save_npy(file("w.npy"), zeros({5}));  // overwrite
  EXPECT_EQ(load_npy(file("w.npy")).to_vector<double>(), std::vector<double>(5, 0.0));
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    ++files;
    EXPECT_EQ(e.path().filename(), "w.npy");
  }
  EXPECT_EQ(files, 1);
}

// save_npy writes the header and then the tensor's bytes in place, as two pieces of one atomic write: a
// fault inside the data leaves the old file whole.
TEST_F(Npy, FailedWriteInsideTheDataLeavesTheOldFile) {
  save_npy(file("w.npy"), ones({3}));
  ng::io::testing::fail_next_write_after(128 + 4);  // the 128-byte header, then one float of the data
  expect_error(
      [&] { save_npy(file("w.npy"), zeros({1000})); },
      {"save_npy: writing '", "injected fault after 132 bytes", "the old file, if any, is untouched"});
  EXPECT_EQ(load_npy(file("w.npy")).to_vector<double>(), std::vector<double>(3, 1.0));
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) ++files, (void)e;
  EXPECT_EQ(files, 1);
  save_npy(file("w.npy"), zeros({1000}));  // the fault fired once
  EXPECT_EQ(load_npy(file("w.npy")).numel(), 1000);
}

TEST_F(Npy, Version2HeaderIsAccepted) {
  std::string p = npy("v2.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", 16, 2);
  EXPECT_EQ(load_npy(p).shape(), (Shape{2}));
}

TEST_F(Npy, SaveErrors) {
  expect_error([&] { save_npy(file("b.npy"), zeros({2}, DType::bf16)); },
               {"save_npy: ", "b.npy", "bf16 is not a NumPy dtype", ".to(DType::f32)"});
  expect_error([&] { save_npy(file("no_such_dir/x.npy"), zeros({2})); },
               {"save_npy: ", "no_such_dir/x.npy", "cannot create"});
  // The target is a folder: refused before any temporary file is made (io/whole_file.h).
  fs::create_directories(dir / "taken" / "inside");
  expect_error([&] { save_npy(file("taken"), zeros({2})); },
               {"save_npy: cannot write '", "taken", "it is a folder"});
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 0);
}

TEST_F(Npy, BadFiles) {
  const std::string ok_header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  // The good file loads; every variant below is an ng::Error naming the file and the problem.
  EXPECT_EQ(load_npy(npy("good.npy", ok_header, 24)).shape(), (Shape{2, 3}));

  expect_error([&] { load_npy(file("missing.npy")); }, {"load_npy: ", "missing.npy", "no such file"});
  // A folder opens as a stream whose size reads as 2^63 - 1: refused by name, before any read.
  fs::create_directories(dir / "folder.npy");
  expect_error([&] { load_npy(file("folder.npy")); },
               {"load_npy: ", "folder.npy", "not a regular file (a folder)"});
  expect_error([&] { load_npy("/dev/null"); },
               {"load_npy: /dev/null: not a regular file (a device, pipe or socket)"});
  expect_error([&] { load_npy(raw("short.npy", "\x93NUM")); }, {"short.npy", "file too short (4 bytes)"});
  expect_error([&] { load_npy(raw("magic.npy", "PK\x03\x04 this is a zip file, not npy")); },
               {"magic.npy", "bad magic string"});
  expect_error([&] { load_npy(npy("ver.npy", ok_header, 24, 9)); },
               {"ver.npy", "unsupported format version 9.0"});
  expect_error([&] { load_npy(raw("hlen.npy", std::string("\x93NUMPY\x01\x00\xff\x7f{'descr'", 18))); },
               {"hlen.npy", "truncated header", "32767 header bytes"});
  expect_error([&] { load_npy(npy("garbage.npy", "this is not a dict", 24)); },
               {"garbage.npy", "malformed header (expected '{'"});
  {
    // A huge garbage header: the message quotes only its first 200 characters.
    std::string p = npy("long.npy", std::string(5000, 'x'), 0);
    try {
      load_npy(p);
      ADD_FAILURE() << "expected ng::Error";
    } catch (const Error& e) {
      EXPECT_LT(std::string(e.what()).size(), 600u);
      EXPECT_NE(std::string(e.what()).find("malformed header"), std::string::npos);
    }
  }
  expect_error([&] { load_npy(npy("unterm.npy", "{'descr: '<f4'", 24)); },
               {"unterm.npy", "malformed header"});
  expect_error([&] { load_npy(npy("nokey.npy", "{'descr': '<f4', 'shape': (2, 3), }", 24)); },
               {"nokey.npy", "expected the keys 'descr', 'fortran_order' and 'shape'"});
  expect_error(
      [&] {
        load_npy(npy("extra.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'x': 1}", 24));
      },
      {"extra.npy", "unknown key 'x'"});
  // Characters after the dict (there used to be none of this check: "}xx garbage" loaded), and a shape of
  // more than NumPy's 64 dimensions.
  expect_error(
      [&] {
        load_npy(npy("after.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }xx garbage", 24));
      },
      {"after.npy", "unexpected characters after the closing '}'"});
  {
    std::string ones65;
    for (int d = 0; d < 65; ++d) ones65 += "1, ";
    expect_error(
        [&] {
          load_npy(
              npy("dims.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (" + ones65 + "), }", 4));
        },
        {"dims.npy", "more than 64 dimensions"});
    std::string ones64 = ones65.substr(3);
    EXPECT_EQ(load_npy(npy("dims64.npy",
                           "{'descr': '<f4', 'fortran_order': False, 'shape': (" + ones64 + "), }", 4))
                  .dim(),
              64);
  }
  expect_error(
      [&] { load_npy(npy("bool.npy", "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (6,), }", 24)); },
      {"bool.npy", "expected True or False"});
  expect_error(
      [&] { load_npy(npy("neg.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (-6,), }", 24)); },
      {"neg.npy", "expected a non-negative integer"});
  expect_error(
      [&] { load_npy(npy("c16.npy", "{'descr': '<c16', 'fortran_order': False, 'shape': (2,), }", 32)); },
      {"c16.npy", "unsupported dtype '<c16'", "'<f4' (f32)"});
  expect_error(
      [&] { load_npy(npy("be.npy", "{'descr': '>f4', 'fortran_order': False, 'shape': (6,), }", 24)); },
      {"be.npy", "unsupported dtype '>f4'", "little-endian"});
  expect_error(
      [&] { load_npy(npy("fort.npy", "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", 24)); },
      {"fort.npy", "fortran_order is True", "C-order"});
  // Lying shapes: more data than the file holds, less, an overflowing size, a huge but finite size.
  expect_error(
      [&] { load_npy(npy("trunc.npy", ok_header, 20)); },
      {"trunc.npy", "promises shape (2, 3) of <f4 = 24 bytes", "holds 20", "truncated or lying header"});
  expect_error([&] { load_npy(npy("trail.npy", ok_header, 30)); },
               {"trail.npy", "holds 30", "trailing bytes"});
  expect_error(
      [&] {
        load_npy(npy("overflow.npy",
                     "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296, 8), }", 24));
      },
      {"overflow.npy", "is too large (its size overflows)"});
  // Found by fuzz_npy: an empty tensor (a zero dim) whose other dims multiply past int64.
  expect_error(
      [&] {
        load_npy(npy(
            "empty_overflow.npy",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 300000000080806, 3000010310010,), }", 0));
      },
      {"empty_overflow.npy", "is too large (its size overflows)"});
  expect_error(
      [&] {
        load_npy(
            npy("huge.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000000,), }", 64));
      },
      {"huge.npy", "8000000000000 bytes", "holds 64"});
  expect_error(
      [&] {
        load_npy(npy("digits.npy",
                     "{'descr': '<f8', 'fortran_order': False, 'shape': "
                     "(99999999999999999999,), }",
                     8));
      },
      {"digits.npy", "dimension too large"});
}

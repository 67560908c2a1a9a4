// .npy save and load. See npy.h for the format.
#include "tensor/npy.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>

#include "io/whole_file.h"

namespace ng {

namespace {

// ---- dtype <-> descr ----------------------------------------------------------------------------
const char* descr_of(DType t) {
  switch (t) {
    case DType::f32:
      return "<f4";
    case DType::f64:
      return "<f8";
    case DType::f16:
      return "<f2";
    case DType::i64:
      return "<i8";
    case DType::bf16:
      return nullptr;
  }
  return nullptr;
}

// ---- a tiny parser for the header dict -----------------------------------------------------------
// The header is a Python literal written by NumPy: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3),
// } We accept any key order and whitespace, and reject anything else.
struct Parser {
  const std::string& s;
  size_t i = 0;
  const std::string& path;

  [[noreturn]] void bad(const std::string& what) const {
    // Quote at most 200 characters of the header: a corrupt file may have a huge one.
    fail("load_npy", path, ": malformed header (", what, " at character ", i, ") in ", s.substr(0, 200),
         s.size() > 200 ? "..." : "");
  }
  void ws() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n')) ++i;
  }
  bool eat(char c) {
    ws();
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) bad(std::string("expected '") + c + "'");
  }
  std::string str() {
    ws();
    if (i >= s.size() || (s[i] != '\'' && s[i] != '"')) bad("expected a string");
    const char q = s[i++];
    size_t start = i;
    while (i < s.size() && s[i] != q) ++i;
    if (i >= s.size()) bad("unterminated string");
    return s.substr(start, i++ - start);
  }
  bool boolean() {
    ws();
    if (s.compare(i, 4, "True") == 0) {
      i += 4;
      return true;
    }
    if (s.compare(i, 5, "False") == 0) {
      i += 5;
      return false;
    }
    bad("expected True or False");
  }
  int64_t integer() {
    ws();
    size_t start = i;
    uint64_t v = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      uint64_t digit = uint64_t(s[i] - '0');
      if (v > (uint64_t(std::numeric_limits<int64_t>::max()) - digit) / 10) bad("dimension too large");
      v = v * 10 + digit;
      ++i;
    }
    if (i == start) bad("expected a non-negative integer");
    return int64_t(v);
  }
  Shape shape() {
    Shape out;
    expect('(');
    if (eat(')')) return out;
    while (true) {
      // NumPy's own limit (NPY_MAXDIMS, 64): a corrupt header of 200000 ones loaded as a 200000-dim tensor.
      if (out.size() == 64) bad("more than 64 dimensions");
      out.push_back(integer());
      if (eat(')')) break;
      expect(',');
      if (eat(')')) break;  // (5,) and a trailing comma
    }
    return out;
  }
};

struct Header {
  std::string descr;
  bool fortran_order = false;
  Shape shape;
};

Header parse_header(const std::string& text, const std::string& path) {
  Parser p{text, 0, path};
  Header h;
  bool have_descr = false, have_order = false, have_shape = false;
  p.expect('{');
  while (!p.eat('}')) {
    std::string key = p.str();
    p.expect(':');
    if (key == "descr") {
      h.descr = p.str();
      have_descr = true;
    } else if (key == "fortran_order") {
      h.fortran_order = p.boolean();
      have_order = true;
    } else if (key == "shape") {
      h.shape = p.shape();
      have_shape = true;
    } else {
      p.bad("unknown key '" + key + "'");
    }
    if (!p.eat(',')) {
      p.expect('}');
      break;
    }
  }
  // Only the padding NumPy writes may follow the dict: "{...}xx garbage" used to load.
  p.ws();
  if (p.i != text.size()) p.bad("unexpected characters after the closing '}'");
  if (!have_descr || !have_order || !have_shape)
    fail("load_npy", path, ": malformed header (expected the keys 'descr', 'fortran_order' and 'shape') in ",
         text.substr(0, 200));
  return h;
}

DType dtype_of_descr(const std::string& descr, const std::string& path) {
  if (descr == "<f4") return DType::f32;
  if (descr == "<f8") return DType::f64;
  if (descr == "<f2") return DType::f16;
  if (descr == "<i8") return DType::i64;
  fail("load_npy", path, ": unsupported dtype '", descr,
       "', expected one of '<f4' (f32), '<f8' (f64), '<f2' (f16), '<i8' (i64) (little-endian)");
}

uint64_t read_le(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int k = bytes - 1; k >= 0; --k) v = (v << 8) | p[k];
  return v;
}

}  // namespace

// ---- save -----------------------------------------------------------------------------------------
void save_npy(const std::string& path, const Tensor& t) {
  check_defined("save_npy", "t", t);
  const char* descr = descr_of(t.dtype());
  NG_CHECK(descr != nullptr, "save_npy", path,
           ": bf16 is not a NumPy dtype; convert first with .to(DType::f32)");
  NG_CHECK(t.device().is_cpu(), "save_npy", path, ": expected a CPU tensor, got ", t.device().str());

  // The header as np.save writes it (numpy/lib/format.py, _write_array_header and _wrap_header):
  //   1. the dict, shape in Python tuple syntax: (), (5,), (2, 3)
  //   2. 21 - len(str(shape[0])) spaces when there is a shape: room for the first dimension to grow in
  //      place up to 21 digits (NumPy's GROWTH_AXIS_MAX_DIGITS)
  //   3. pad = 64 - (10 + len + 1) % 64 spaces, then '\n', so the data starts at a multiple of 64 bytes
  //      (10: magic, version, length; + 1: the '\n'). The pad is 1..64, never 0: NumPy adds a whole 64
  //      when the header already ends on a boundary.
  // Steps 2 and 3 change only the spaces: np.load reads the header whatever its padding.
  std::string shape = "(";
  for (int64_t d = 0; d < t.dim(); ++d) shape += (d ? ", " : "") + std::to_string(t.size(d));
  if (t.dim() == 1) shape += ",";
  shape += ")";
  std::string header =
      std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  if (t.dim() > 0) header.append(21 - std::to_string(t.size(0)).size(), ' ');
  const size_t total = 10 + header.size() + 1;
  header.append(64 - total % 64, ' ');
  header += '\n';
  NG_CHECK(header.size() <= 65535, "save_npy", path, ": header too long (", header.size(), " bytes)");

  std::string pre = "\x93NUMPY";
  pre += char(1);  // version 1.0
  pre += char(0);
  pre += char(header.size() & 0xff);
  pre += char(header.size() >> 8);

  Tensor c = t.contiguous();
  const size_t bytes = size_t(c.numel()) * dtype_size(c.dtype());

  // Atomic: a temporary file in the same folder, fsync, then rename (io/whole_file.h). The tensor's bytes
  // are written from where they are.
  const std::string head = pre + header;
  io::atomic_write_file(path, {head, std::string_view(static_cast<const char*>(c.raw_data()), bytes)},
                        "save_npy");
}

// ---- load -----------------------------------------------------------------------------------------
Tensor load_npy(const std::string& path) {
  const int64_t file_size = io::regular_file_size(path, "load_npy");
  std::ifstream f(path, std::ios::binary);
  NG_CHECK(f.good(), "load_npy", path, ": cannot open the file: ", std::strerror(errno));

  // 1. Magic, version, header length.
  unsigned char pre[12] = {};
  NG_CHECK(file_size >= 10, "load_npy", path, ": file too short (", file_size,
           " bytes) to be a .npy file (needs at least 10)");
  f.read(reinterpret_cast<char*>(pre), 10);
  NG_CHECK(std::memcmp(pre, "\x93NUMPY", 6) == 0, "load_npy", path,
           ": bad magic string (expected \\x93NUMPY; not a .npy file)");
  const int major = pre[6];
  NG_CHECK(major >= 1 && major <= 3, "load_npy", path, ": unsupported format version ", major, ".",
           int(pre[7]), " (expected 1.0, 2.0 or 3.0)");
  int64_t prelude = 10;
  uint64_t header_len = read_le(pre + 8, 2);
  if (major >= 2) {
    NG_CHECK(file_size >= 12, "load_npy", path, ": file too short (", file_size, " bytes) for a version ",
             major, " header");
    f.read(reinterpret_cast<char*>(pre + 10), 2);
    header_len = read_le(pre + 8, 4);
    prelude = 12;
  }
  NG_CHECK(int64_t(header_len) <= file_size - prelude, "load_npy", path, ": truncated header (the file says ",
           header_len, " header bytes, but only ", file_size - prelude, " bytes follow)");

  // 2. The header dict.
  std::string text(size_t(header_len), '\0');
  f.read(text.data(), std::streamsize(header_len));
  NG_CHECK(f.good(), "load_npy", path, ": read error in the header");
  Header h = parse_header(text, path);
  const DType dt = dtype_of_descr(h.descr, path);
  NG_CHECK(!h.fortran_order, "load_npy", path,
           ": fortran_order is True; only C-order arrays are supported (save with np.ascontiguousarray)");

  // 3. Size check before any allocation: numel * itemsize must equal the bytes left in the file.
  const int64_t data_bytes = file_size - prelude - int64_t(header_len);
  const int64_t item = int64_t(dtype_size(dt));
  // The product of the non-zero dims must fit too, even when a zero dim makes the tensor empty: the
  // strides of (0, 3e14, 3e12) would overflow all the same.
  int64_t n = 1, nonzero = 1;
  bool empty_dim = false;
  for (int64_t s : h.shape) {
    if (s == 0) {
      empty_dim = true;
      continue;
    }
    NG_CHECK(nonzero <= std::numeric_limits<int64_t>::max() / item / s, "load_npy", path, ": shape ",
             shape_str(h.shape), " is too large (its size overflows)");
    nonzero *= s;
  }
  n = empty_dim ? 0 : nonzero;
  NG_CHECK(n * item == data_bytes, "load_npy", path, ": the header promises shape ", shape_str(h.shape),
           " of ", h.descr, " = ", n * item, " bytes of data, but the file holds ", data_bytes,
           n * item > data_bytes ? " (truncated or lying header)" : " (trailing bytes)");

  // 4. The data.
  Tensor t = empty(h.shape, dt);
  if (data_bytes > 0) f.read(static_cast<char*>(t.raw_data()), std::streamsize(data_bytes));
  NG_CHECK(f.good(), "load_npy", path, ": read error in the data");
  return t;
}

}  // namespace ng

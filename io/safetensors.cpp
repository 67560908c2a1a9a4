#include "io/safetensors.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>
#include <vector>

#include "autograd/grad_mode.h"

namespace ng::io {

static_assert(std::endian::native == std::endian::little,
              "safetensors stores little-endian data; normgrad copies bytes as they are");

namespace {

using ordered_json = nlohmann::ordered_json;

const char* st_dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "F32";
    case DType::f64:
      return "F64";
    case DType::f16:
      return "F16";
    case DType::bf16:
      return "BF16";
    case DType::i64:
      return "I64";
  }
  return "?";
}

bool parse_st_dtype(const std::string& s, DType& out) {
  static const std::pair<const char*, DType> table[] = {{"F32", DType::f32},
                                                        {"F64", DType::f64},
                                                        {"F16", DType::f16},
                                                        {"BF16", DType::bf16},
                                                        {"I64", DType::i64}};
  for (auto& [name, t] : table)
    if (s == name) return out = t, true;
  return false;
}

// JSON strings are UTF-8: a name or metadata string that is not would make the JSON writer throw its own
// exception. Refuse it here, naming it, with its bytes outside printable ASCII as \xNN.
void check_utf8(const std::string& s, const char* what) {
  try {
    (void)nlohmann::json(s).dump();
  } catch (const nlohmann::json::exception&) {
    std::string shown;
    for (unsigned char c : s) {
      if (c >= 0x20 && c < 0x7f) {
        shown += char(c);
      } else {
        char buf[8];
        std::snprintf(buf, sizeof(buf), "\\x%02x", c);
        shown += buf;
      }
    }
    fail("save_safetensors", what, " '", shown,
         "' is not valid UTF-8, expected UTF-8 text (JSON strings are)");
  }
}

}  // namespace

// ---- writing -------------------------------------------------------------------------------------------
std::string safetensors_serialize(const nn::NamedTensors& tensors,
                                  const std::map<std::string, std::string>& metadata) {
  ordered_json header = ordered_json::object();
  if (!metadata.empty()) {
    ordered_json m = ordered_json::object();
    for (auto& [k, v] : metadata) {
      check_utf8(k, "metadata key");
      check_utf8(v, ("metadata value of '" + k + "':").c_str());
      m[k] = v;
    }
    header["__metadata__"] = m;
  }
  std::set<std::string> names;
  std::vector<Tensor> data;
  uint64_t offset = 0;
  NoGradGuard no_grad;
  for (auto& [name, t] : tensors) {
    NG_CHECK(!name.empty() && name != "__metadata__", "save_safetensors", "invalid tensor name '", name,
             "': expected a non-empty name other than '__metadata__' (the header's reserved key)");
    check_utf8(name, "tensor name");
    NG_CHECK(names.insert(name).second, "save_safetensors", "tensor name '", name,
             "' appears twice, expected every name once");
    NG_CHECK(t.defined(), "save_safetensors", "tensor '", name, "' is undefined");
    NG_CHECK(t.device().is_cpu(), "save_safetensors", "tensor '", name, "' is on ", t.device().str(),
             ", expected a CPU tensor (copy it to the CPU first)");
    Tensor c = t.contiguous();
    const uint64_t nbytes = uint64_t(c.numel()) * dtype_size(c.dtype());
    ordered_json shape = ordered_json::array();
    for (int64_t d : c.shape()) shape.push_back(d);
    header[name] = {
        {"dtype", st_dtype_name(c.dtype())}, {"shape", shape}, {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
    data.push_back(c);
  }
  std::string json = header.dump();
  while (json.size() % 8 != 0) json.push_back(' ');  // align the data buffer to 8 bytes

  std::string out;
  out.reserve(8 + json.size() + offset);
  const uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out.push_back(char((n >> (8 * i)) & 0xff));  // little-endian u64
  out += json;
  for (const Tensor& c : data)
    out.append(static_cast<const char*>(c.raw_data()), size_t(c.numel()) * dtype_size(c.dtype()));
  return out;
}

void save_safetensors(const std::string& path, const nn::NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  atomic_write_file(path, safetensors_serialize(tensors, metadata), "save_safetensors");
}

// ---- reading -------------------------------------------------------------------------------------------
namespace {

// Raises the ng::Error of one reader: "<op>: <file>: <parts>".
struct Bad {
  const char* op;
  const std::string& what;
  template <typename... Parts>
  [[noreturn]] void operator()(const Parts&... parts) const {
    fail(op, what, ": ", parts...);
  }
};

// The safetensors reference implementation refuses a header over 100 MB; so do we, before allocating it.
constexpr uint64_t kMaxHeader = 100'000'000;

// Checks the file's first bytes (up to 9 of them in `head`) against its size; returns N, the header's
// length. The header must start with '{': the format's header is a JSON object, and a reader that only asks
// whether a file is safetensors (nn::is_checkpoint_file) then reads no further into a file of another kind.
uint64_t check_header_length(std::string_view head, uint64_t size, const Bad& bad) {
  if (size < 8) bad("file is ", size, " bytes, too short for the 8-byte header length");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(static_cast<unsigned char>(head[size_t(i)])) << (8 * i);
  if (n > size - 8)
    bad("header length ", n, " exceeds the ", size - 8,
        " bytes after the length field (truncated or corrupt)");
  if (n > kMaxHeader) bad("header length ", n, " exceeds the format's limit of ", kMaxHeader, " bytes");
  if (n < 2) bad("header length ", n, " is too short for a JSON object");
  const unsigned char first = static_cast<unsigned char>(head[8]);
  if (first != '{') {
    char shown[8];
    std::snprintf(shown, sizeof shown, first >= 0x20 && first < 0x7f ? "'%c'" : "\\x%02X", first);
    bad("the header starts with ", shown, ", expected '{' (the header is a JSON object)");
  }
  return n;
}

// Parses and checks the JSON header (`json`, N bytes) against the size of the data buffer after it: every
// entry's keys, dtype, shape and offsets, the metadata types, and that the entries tile the buffer.
SafetensorsHeader parse_header(std::string_view json, uint64_t buffer_size, const Bad& bad) {
  // Parse, noting any key that appears twice in one object, at any depth: a tensor name, a metadata key or
  // a field such as "dtype" (JSON parsers keep only one of them, so the file would mean two things).
  ordered_json header;
  std::vector<std::set<std::string>> open_objects;  // the keys seen so far in each object being parsed
  std::string duplicate;
  auto on_event = [&](int, nlohmann::json::parse_event_t event, ordered_json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::object_start) open_objects.emplace_back();
    if (event == E::object_end) open_objects.pop_back();
    if (event == E::key && !open_objects.empty() &&
        !open_objects.back().insert(parsed.get<std::string>()).second && duplicate.empty())
      duplicate = parsed.get<std::string>();
    return true;
  };
  try {
    header = ordered_json::parse(json.begin(), json.end(), on_event);
  } catch (const std::exception& e) {
    bad("the header is not valid JSON: ", e.what());
  }
  if (!duplicate.empty()) bad("the name '", duplicate, "' appears twice in one object of the header");
  // (It starts with '{', so a header that parses is an object.)

  SafetensorsHeader out;
  for (auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object())
        bad("__metadata__ is a JSON ", value.type_name(), ", expected an object of strings");
      for (auto& [k, v] : value.items()) {
        if (!v.is_string())
          bad("__metadata__ entry '", k, "' is a JSON ", v.type_name(), ", expected a string");
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    if (name.empty()) bad("a tensor has an empty name");
    if (!value.is_object()) bad("entry '", name, "' is a JSON ", value.type_name(), ", expected an object");
    for (auto& [k, _] : value.items())
      if (k != "dtype" && k != "shape" && k != "data_offsets")
        bad("entry '", name, "' has an unexpected key '", k, "'");
    if (!value.contains("dtype") || !value.contains("shape") || !value.contains("data_offsets"))
      bad("entry '", name, "' needs dtype, shape and data_offsets");
    SafetensorsEntry e{name, DType::f32, {}, 0, 0};
    const auto& dt = value["dtype"];
    if (!dt.is_string() || !parse_st_dtype(dt.get<std::string>(), e.dtype))
      bad("entry '", name, "' has dtype ", dt.dump(), ", expected one of F32, F64, F16, BF16, I64");
    const auto& shape = value["shape"];
    if (!shape.is_array()) bad("entry '", name, "' has shape ", shape.dump(), ", expected an array of sizes");
    // nonzero: the product of the non-zero sizes, which must stay small even for an empty tensor (its
    // strides are made from it).
    uint64_t numel = 1, nonzero = 1;
    for (const auto& d : shape) {
      if (!d.is_number_unsigned())
        bad("entry '", name, "' has shape ", shape.dump(), ", expected non-negative integers");
      const uint64_t s = d.get<uint64_t>();
      if (s > uint64_t(std::numeric_limits<int64_t>::max()) || (s != 0 && nonzero > buffer_size / s + 1))
        bad("entry '", name, "' has shape ", shape.dump(), ", larger than the file");
      numel *= s;
      if (s != 0) nonzero *= s;
      e.shape.push_back(int64_t(s));
    }
    const auto& off = value["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      bad("entry '", name, "' has data_offsets ", off.dump(), ", expected [begin, end]");
    e.begin = off[0].get<uint64_t>();
    e.end = off[1].get<uint64_t>();
    if (e.begin > e.end) bad("entry '", name, "' has data_offsets [", e.begin, ", ", e.end, "]: begin > end");
    if (e.end > buffer_size)
      bad("entry '", name, "' has data_offsets [", e.begin, ", ", e.end, "] past the end of the ",
          buffer_size, "-byte data buffer (truncated or corrupt)");
    if (numel > buffer_size || numel * dtype_size(e.dtype) != e.end - e.begin)
      bad("entry '", name, "' has shape ", shape.dump(), " and dtype ", st_dtype_name(e.dtype),
          ", which need ",
          numel > buffer_size ? std::string("more bytes than the file has")
                              : std::to_string(numel * dtype_size(e.dtype)) + " bytes",
          ", but its data_offsets [", e.begin, ", ", e.end, "] hold ", e.end - e.begin);
    out.entries.push_back(e);
  }

  // The entries must tile the buffer: sorted by offset, each starts where the previous ended, the last ends
  // at the end of the file.
  auto& entries = out.entries;
  std::stable_sort(entries.begin(), entries.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expect = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const SafetensorsEntry& e = entries[i];
    if (e.begin < expect)
      bad("entry '", e.name, "' (bytes ", e.begin, "..", e.end, ") overlaps entry '", entries[i - 1].name,
          "' (bytes ", entries[i - 1].begin, "..", entries[i - 1].end, ")");
    if (e.begin > expect)
      bad("entry '", e.name, "' starts at byte ", e.begin, ", leaving a gap after byte ", expect);
    expect = e.end;
  }
  if (expect != buffer_size)
    bad("the tensors cover ", expect, " bytes of the ", buffer_size, "-byte data buffer (trailing bytes)");
  return out;
}

}  // namespace

SafetensorsData safetensors_parse(const std::string& bytes, const std::string& what) {
  const Bad bad{"load_safetensors", what};
  const uint64_t size = bytes.size();
  const uint64_t n = check_header_length(bytes, size, bad);
  SafetensorsHeader header = parse_header(std::string_view(bytes).substr(8, size_t(n)), size - 8 - n, bad);
  const char* buffer = bytes.data() + 8 + n;
  SafetensorsData out;
  out.metadata = std::move(header.metadata);
  for (const SafetensorsEntry& e : header.entries) {
    Tensor t = empty(e.shape, e.dtype);  // its size was checked against the buffer above
    if (e.end > e.begin) std::memcpy(t.raw_data(), buffer + e.begin, size_t(e.end - e.begin));
    out.tensors.emplace_back(e.name, t);
  }
  return out;
}

SafetensorsData load_safetensors(const std::string& path) {
  return safetensors_parse(read_whole_file(path, "load_safetensors"), path);
}

SafetensorsHeader read_safetensors_header(const std::string& path) {
  const char* op = "read_safetensors_header";
  const Bad bad{op, path};
  const uint64_t size = uint64_t(regular_file_size(path, op));
  std::ifstream in(path, std::ios::binary);
  NG_CHECK(in.good(), op, path, ": cannot open the file: ", std::strerror(errno));
  // The length and the header's first byte; the rest of the header only once those hold.
  std::string head(size_t(std::min<uint64_t>(size, 9)), '\0');
  in.read(head.data(), std::streamsize(head.size()));
  NG_CHECK(uint64_t(in.gcount()) == head.size(), op, path, ": read ", in.gcount(), " of the first ",
           head.size(), " bytes");
  const uint64_t n = check_header_length(head, size, bad);
  std::string json(size_t(n), '\0');
  json[0] = head[8];
  in.read(json.data() + 1, std::streamsize(n - 1));
  NG_CHECK(uint64_t(in.gcount()) == n - 1, op, path, ": read ", in.gcount() + 1, " of the header's ", n,
           " bytes");
  return parse_header(json, size - 8 - n, bad);
}

}  // namespace ng::io

#include "io/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
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
SafetensorsData safetensors_parse(const std::string& bytes, const std::string& what) {
  auto bad = [&](const auto&... parts) -> void { fail("load_safetensors", what, ": ", parts...); };
  const uint64_t size = bytes.size();
  if (size < 8) bad("file is ", size, " bytes, too short for the 8-byte header length");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(static_cast<unsigned char>(bytes[size_t(i)])) << (8 * i);
  if (n > size - 8)
    bad("header length ", n, " exceeds the ", size - 8,
        " bytes after the length field (truncated or corrupt)");
  if (n < 2) bad("header length ", n, " is too short for a JSON object");

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
    header = ordered_json::parse(bytes.begin() + 8, bytes.begin() + 8 + std::ptrdiff_t(n), on_event);
  } catch (const std::exception& e) {
    bad("the header is not valid JSON: ", e.what());
  }
  if (!duplicate.empty()) bad("the name '", duplicate, "' appears twice in one object of the header");
  if (!header.is_object()) bad("the header is a JSON ", header.type_name(), ", expected an object");

  const uint64_t buffer_size = size - 8 - n;
  const char* buffer = bytes.data() + 8 + n;

  SafetensorsData out;
  struct Entry {
    std::string name;
    DType dtype;
    Shape shape;
    uint64_t begin, end;
  };
  std::vector<Entry> entries;
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
    Entry e{name, DType::f32, {}, 0, 0};
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
    entries.push_back(e);
  }

  // The entries must tile the buffer: sorted by offset, each starts where the previous ended, the last ends
  // at the end of the file.
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expect = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    if (e.begin < expect)
      bad("entry '", e.name, "' (bytes ", e.begin, "..", e.end, ") overlaps entry '", entries[i - 1].name,
          "' (bytes ", entries[i - 1].begin, "..", entries[i - 1].end, ")");
    if (e.begin > expect)
      bad("entry '", e.name, "' starts at byte ", e.begin, ", leaving a gap after byte ", expect);
    expect = e.end;
  }
  if (expect != buffer_size)
    bad("the tensors cover ", expect, " bytes of the ", buffer_size, "-byte data buffer (trailing bytes)");

  for (const Entry& e : entries) {
    Tensor t = empty(e.shape, e.dtype);  // its size was checked against the buffer above
    if (e.end > e.begin) std::memcpy(t.raw_data(), buffer + e.begin, size_t(e.end - e.begin));
    out.tensors.emplace_back(e.name, t);
  }
  return out;
}

SafetensorsData load_safetensors(const std::string& path) {
  return safetensors_parse(read_whole_file(path, "load_safetensors"), path);
}

}  // namespace ng::io

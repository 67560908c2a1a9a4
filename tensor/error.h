// ng::Error: the one exception type normgrad throws for bad input.
//
// A good error names the op, says what it expected and what it was given:
//   "layer_norm: weight has shape (64), expected (128) to match the last dimension of x (2, 16, 128)"
// NG_CHECK builds such a message from any streamable pieces:
//   NG_CHECK(a.dim() == 2, "matmul", "expected a 2-D tensor, got shape ", shape_str(a.shape()));
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace ng {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {
template <typename... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}
}  // namespace detail

// Throw ng::Error("<op>: <message>").
template <typename... Parts>
[[noreturn]] void fail(const char* op, const Parts&... parts) {
  throw Error(std::string(op) + ": " + detail::concat(parts...));
}

}  // namespace ng

#define NG_CHECK(cond, op, ...)        \
  do {                                 \
    if (!(cond)) ng::fail(op, __VA_ARGS__); \
  } while (0)

// special_values: every elementwise op, reduction, row op and norm on special and extreme values (NaN,
// +-inf, +-0, subnormals, values past exp's and the squares' overflow), forward and gradient, printed one
// line per case for bench/special_values_vs_pytorch.py, which computes the same cases with PyTorch and
// prints where the two differ. Not a benchmark: a differential check, kept beside pytorch_compare.py
// because it needs PyTorch, which the tests do not.
//
//   cmake --build --preset release --target special_values
//   /tmp/torchenv/bin/python bench/special_values_vs_pytorch.py      # runs
//   build/release/bench/special_values
//
// Output lines (space-separated, values printed with 17 digits):
//   unary  <op> <dtype> <x> <y> <dy/dx>                       dy/dx from y.backward(ones)
//   binary <op> <dtype> <a> <b> <y> <dy/da> <dy/db>
//   row    <op> <dtype> <s> <v...>                            a row of 40 values 0.1 i - 2 with x_7 = s;
//                                                             v: the first output, output 7 (if any), and
//                                                             d sum(y)/dx_7, d sum(y)/dx_0
//   argmax <dtype> <s> <index>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "normgrad.h"

using namespace ng;

namespace {

using Unary = std::function<Tensor(const Tensor&)>;
using Binary = std::function<Tensor(const Tensor&, const Tensor&)>;

void print_line(const std::string& head, const std::vector<double>& values) {
  std::printf("%s", head.c_str());
  for (double v : values) std::printf(" %.17g", v);
  std::printf("\n");
}

const char* name_of(DType dt) {
  return dt == DType::f32 ? "f32" : "f64";
}

// x: the values, padded to 64 so that the SIMD kernels see whole vectors as well as a tail
void unary_cases(const std::string& op, const Unary& fn, DType dt, const std::vector<double>& values) {
  std::vector<double> padded = values;
  while (padded.size() < 64) padded.push_back(0.25);
  Tensor x = from_vector(padded, Shape{int64_t(padded.size())}, DType::f64).to(dt).requires_grad_();
  Tensor y = fn(x);
  y.backward(ones(y.shape(), dt));  // contiguous: the SIMD backward
  const std::vector<double> xs = x.detach().to_vector<double>(), ys = y.to_vector<double>();
  const std::vector<double> gs = x.grad().to_vector<double>();
  for (size_t i = 0; i < values.size(); ++i)
    print_line("unary " + op + " " + name_of(dt), {xs[i], ys[i], gs[i]});
}

void binary_cases(const std::string& op, const Binary& fn, DType dt, const std::vector<double>& values) {
  std::vector<double> av, bv;
  for (double a : values)
    for (double b : values) av.push_back(a), bv.push_back(b);
  const Shape shape{int64_t(av.size())};
  Tensor a = from_vector(av, shape, DType::f64).to(dt).requires_grad_();
  Tensor b = from_vector(bv, shape, DType::f64).to(dt).requires_grad_();
  Tensor y = fn(a, b);
  y.backward(ones(shape, dt));
  const std::vector<double> as = a.detach().to_vector<double>(), bs = b.detach().to_vector<double>();
  const std::vector<double> ys = y.to_vector<double>(), ga = a.grad().to_vector<double>();
  const std::vector<double> gb = b.grad().to_vector<double>();
  for (size_t i = 0; i < av.size(); ++i)
    print_line("binary " + op + " " + name_of(dt), {as[i], bs[i], ys[i], ga[i], gb[i]});
}

void row_cases(const std::string& op, const Unary& fn, DType dt, double s) {
  std::vector<double> r(40);
  for (int i = 0; i < 40; ++i) r[size_t(i)] = 0.1 * i - 2;
  r[7] = s;
  Tensor x = from_vector(r, Shape{1, 40}, DType::f64).to(dt).requires_grad_();
  Tensor y = fn(x);
  sum(y).backward();
  const std::vector<double> ys = y.detach().reshape({-1}).to_vector<double>(),
                            g = x.grad().to_vector<double>();
  std::vector<double> out{x.detach().to_vector<double>()[7], ys[0]};
  if (ys.size() > 7) out.push_back(ys[7]);
  out.push_back(g[7]);
  out.push_back(g[0]);
  print_line("row " + op + " " + name_of(dt), out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) {
    std::fprintf(stderr,
                 "%s: takes no arguments; it prints every case, for bench/special_values_vs_pytorch.py\n",
                 argv[0]);
    return 2;
  }
  const std::vector<double> special = {NAN,   INFINITY, -INFINITY, 0.0,    -0.0,    1e-45, -1e-45,
                                       1e-40, 1e-30,    -1e-30,    1.0,    -1.0,    0.5,   -2.5,
                                       20,    -20,      88.5,      -88.5,  100,     -100,  710,
                                       -710,  1e20,     -1e20,     3.4e38, -3.4e38, 1e300, -1e300};
  const std::vector<std::pair<std::string, Unary>> unary = {
      {"exp", [](const Tensor& x) { return exp(x); }},
      {"log", [](const Tensor& x) { return log(x); }},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }},
      {"abs", [](const Tensor& x) { return abs(x); }},
      {"square", [](const Tensor& x) { return square(x); }},
      {"relu", [](const Tensor& x) { return relu(x); }},
      {"gelu", [](const Tensor& x) { return gelu(x); }},
      {"silu", [](const Tensor& x) { return silu(x); }},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }},
      {"tanh", [](const Tensor& x) { return tanh(x); }},
      {"neg", [](const Tensor& x) { return neg(x); }},
      {"pow0.5", [](const Tensor& x) { return pow(x, 0.5); }},
      {"pow2", [](const Tensor& x) { return pow(x, 2.0); }},
      {"pow3", [](const Tensor& x) { return pow(x, 3.0); }},
      {"pow-1", [](const Tensor& x) { return pow(x, -1.0); }},
      {"pow0", [](const Tensor& x) { return pow(x, 0.0); }},
      {"clamp", [](const Tensor& x) { return clamp(x, -1.0, 1.0); }},
      {"add1", [](const Tensor& x) { return add(x, 1.0); }},
      {"mul2", [](const Tensor& x) { return mul(x, 2.0); }},
      {"rdiv1", [](const Tensor& x) { return rdiv(1.0, x); }},
  };
  const std::vector<std::pair<std::string, Binary>> binary = {
      {"add", [](const Tensor& a, const Tensor& b) { return add(a, b); }},
      {"sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); }},
      {"mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); }},
      {"div", [](const Tensor& a, const Tensor& b) { return div(a, b); }},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }},
  };
  const std::vector<std::pair<std::string, Unary>> rows = {
      {"sum", [](const Tensor& x) { return sum(x); }},
      {"mean", [](const Tensor& x) { return mean(x); }},
      {"var", [](const Tensor& x) { return var(x, {1}); }},
      {"max", [](const Tensor& x) { return max(x, 1); }},
      {"softmax", [](const Tensor& x) { return softmax(x); }},
      {"log_softmax", [](const Tensor& x) { return log_softmax(x); }},
      {"cross_entropy_t7", [](const Tensor& x) { return cross_entropy(x, full({1}, 7, DType::i64)); }},
      {"cross_entropy_t0", [](const Tensor& x) { return cross_entropy(x, zeros({1}, DType::i64)); }},
      {"layer_norm", [](const Tensor& x) { return F::layer_norm(x, {40}); }},
      {"rms_norm", [](const Tensor& x) { return F::rms_norm(x); }},
  };
  for (DType dt : {DType::f32, DType::f64}) {
    std::vector<double> values;  // f32: the values a float holds (no 1e300)
    for (double v : special)
      if (dt == DType::f64 || !std::isfinite(v) || std::abs(v) < 3.5e38) values.push_back(v);
    for (const auto& [op, fn] : unary) unary_cases(op, fn, dt, values);
    const std::vector<double> grid = {NAN, INFINITY, -INFINITY, 0.0,  -0.0,  1e-40,
                                      1.0, -1.0,     2.5,       1e20, -1e20, 3e38};
    for (const auto& [op, fn] : binary) binary_cases(op, fn, dt, grid);
    for (double s : grid) {
      for (const auto& [op, fn] : rows) row_cases(op, fn, dt, s);
      std::vector<double> r(40);
      for (int i = 0; i < 40; ++i) r[size_t(i)] = 0.1 * i - 2;
      r[7] = s;
      const Tensor x = from_vector(r, Shape{1, 40}, DType::f64).to(dt);
      print_line(std::string("argmax ") + name_of(dt),
                 {x.to_vector<double>()[7], double(argmax(x, 1).to_vector<int64_t>()[0])});
    }
  }
  return 0;
}

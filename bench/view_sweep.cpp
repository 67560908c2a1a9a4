// view_sweep: the interpreter half of a differential check against PyTorch over random shapes, strides and
// broadcasts. bench/view_sweep_vs_pytorch.py draws the cases (an op, its arguments, and for each input a
// base tensor and a chain of views: transpose, permute, slice with a step, select, expand, ...), computes
// them with PyTorch, and sends each case here as one JSON line on stdin; this program runs the same case and
// answers one JSON line on stdout: the output, the gradient of every input that asked for one (w.r.t. its
// base tensor, so a view's backward is checked too), and any tensor the op updates in place (BatchNorm's
// running statistics). An op that refuses the case answers its ng::Error. Not a benchmark: kept beside
// special_values.cpp because it needs PyTorch, which the tests do not.
//
//   cmake --build --preset release --target view_sweep
//   /tmp/torchenv/bin/python bench/view_sweep_vs_pytorch.py --cases 3000
//
// A case:  {"id": 7, "dtype": "f32", "op": "softmax", "args": {"dim": 1},
//           "inputs": [{"shape": [4, 6], "data": [...], "int": false, "grad": true,
//                       "views": [["transpose", 0, 1], ["slice", 0, 1, 6, 2]]}],
//           "dy": [...]}                       dy: the upstream gradient, in the output's shape (or absent)
// Answer:  {"id": 7, "shape": [3, 4], "y": [...], "grads": [[...] or null, ...], "extra": [[...], ...]}
//          or {"id": 7, "error": "..."}
#include <cmath>
#include <cstdio>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "normgrad.h"

using namespace ng;
using json = nlohmann::json;

namespace {

DType dtype_named(const std::string& s) {
  if (s == "f32") return DType::f32;
  if (s == "f64") return DType::f64;
  if (s == "f16") return DType::f16;
  if (s == "bf16") return DType::bf16;
  if (s == "i64") return DType::i64;
  throw Error("view_sweep: unknown dtype '" + s + "'");
}

Shape shape_of(const json& j) {
  return j.get<Shape>();
}

// One view of the chain, applied to t (each is differentiable, so the gradient reaches the base).
Tensor apply_view(const Tensor& t, const json& v) {
  const std::string name = v.at(0).get<std::string>();
  if (name == "transpose") return t.transpose(v.at(1).get<int64_t>(), v.at(2).get<int64_t>());
  if (name == "permute") return t.permute(v.at(1).get<std::vector<int64_t>>());
  if (name == "slice")
    return t.slice(v.at(1).get<int64_t>(), v.at(2).get<int64_t>(), v.at(3).get<int64_t>(),
                   v.at(4).get<int64_t>());
  if (name == "narrow")
    return t.narrow(v.at(1).get<int64_t>(), v.at(2).get<int64_t>(), v.at(3).get<int64_t>());
  if (name == "select") return t.select(v.at(1).get<int64_t>(), v.at(2).get<int64_t>());
  if (name == "expand") return t.expand(shape_of(v.at(1)));
  if (name == "unsqueeze") return t.unsqueeze(v.at(1).get<int64_t>());
  if (name == "squeeze") return t.squeeze(v.at(1).get<int64_t>());
  if (name == "reshape") return t.reshape(shape_of(v.at(1)));
  if (name == "view") return t.view(shape_of(v.at(1)));
  if (name == "flatten") return t.flatten(v.at(1).get<int64_t>(), v.at(2).get<int64_t>());
  if (name == "contiguous") return t.contiguous();
  throw Error("view_sweep: unknown view '" + name + "'");
}

// The values in order, as JSON: a number, or "nan", "inf", "-inf" (JSON has no non-finite numbers)
json values_of(const Tensor& t) {
  json out = json::array();
  for (double v : t.detach().contiguous().to_vector<double>()) {
    if (std::isfinite(v))
      out.push_back(v);
    else
      out.push_back(std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
  }
  return out;
}

struct Case {
  std::vector<Tensor> leaves;  // the base tensors
  std::vector<Tensor> in;      // after their views
  std::vector<bool> wants_grad;
};

Case build_inputs(const json& c, DType dt) {
  Case k;
  for (const json& in : c.at("inputs")) {
    const Shape shape = shape_of(in.at("shape"));
    const bool is_int = in.value("int", false);
    const bool grad = in.value("grad", false);
    Tensor leaf;
    if (in.contains("alias")) {
      // the base tensor of an earlier input: both see the same storage (the in-place ops' overlaps)
      leaf = k.leaves.at(in.at("alias").get<size_t>());
    } else if (is_int) {
      leaf = from_vector(in.at("data").get<std::vector<int64_t>>(), shape, DType::i64);
    } else {
      const DType idt = in.contains("dtype") ? dtype_named(in.at("dtype").get<std::string>()) : dt;
      leaf = from_vector(in.at("data").get<std::vector<double>>(), shape, DType::f64).to(idt).detach();
      if (grad) leaf.requires_grad_();
    }
    Tensor t = leaf;
    for (const json& v : in.value("views", json::array())) t = apply_view(t, v);
    k.leaves.push_back(leaf);
    k.in.push_back(t);
    k.wants_grad.push_back(grad && !is_int);
  }
  return k;
}

// The op, on the inputs after their views. extra: tensors the op updated in place.
Tensor run_op(const std::string& op, const json& a, std::vector<Tensor>& in, std::vector<Tensor>& extra) {
  auto arg = [&](const char* name) { return a.at(name); };
  auto opt = [&](size_t i) { return i < in.size() ? in[i] : Tensor(); };
  // unary
  if (op == "neg") return neg(in[0]);
  if (op == "exp") return exp(in[0]);
  if (op == "log") return log(in[0]);
  if (op == "sqrt") return sqrt(in[0]);
  if (op == "rsqrt") return rsqrt(in[0]);
  if (op == "abs") return abs(in[0]);
  if (op == "square") return square(in[0]);
  if (op == "relu") return relu(in[0]);
  if (op == "gelu") return gelu(in[0]);
  if (op == "silu") return silu(in[0]);
  if (op == "sigmoid") return sigmoid(in[0]);
  if (op == "tanh") return tanh(in[0]);
  if (op == "pow") return pow(in[0], arg("p").get<double>());
  if (op == "clamp") return clamp(in[0], arg("lo").get<double>(), arg("hi").get<double>());
  if (op == "add_s") return add(in[0], arg("s").get<double>());
  if (op == "sub_s") return sub(in[0], arg("s").get<double>());
  if (op == "mul_s") return mul(in[0], arg("s").get<double>());
  if (op == "div_s") return div(in[0], arg("s").get<double>());
  if (op == "rsub_s") return rsub(arg("s").get<double>(), in[0]);
  if (op == "rdiv_s") return rdiv(arg("s").get<double>(), in[0]);
  if (op == "contiguous") return in[0].contiguous();
  if (op == "clone") return in[0].clone();
  if (op == "reshape") return in[0].reshape(shape_of(arg("shape")));
  if (op == "to") return in[0].to(dtype_named(arg("dtype").get<std::string>()));
  // binary, broadcasting
  if (op == "add") return add(in[0], in[1]);
  if (op == "sub") return sub(in[0], in[1]);
  if (op == "mul") return mul(in[0], in[1]);
  if (op == "div") return div(in[0], in[1]);
  if (op == "maximum") return maximum(in[0], in[1]);
  if (op == "minimum") return minimum(in[0], in[1]);
  // reductions
  if (op == "sum_all") return sum(in[0]);
  if (op == "mean_all") return mean(in[0]);
  if (op == "sum") return sum(in[0], arg("dims").get<std::vector<int64_t>>(), arg("keepdim").get<bool>());
  if (op == "mean") return mean(in[0], arg("dims").get<std::vector<int64_t>>(), arg("keepdim").get<bool>());
  if (op == "var")
    return var(in[0], arg("dims").get<std::vector<int64_t>>(), arg("unbiased").get<bool>(),
               arg("keepdim").get<bool>());
  if (op == "max") return max(in[0], arg("dim").get<int64_t>(), arg("keepdim").get<bool>());
  if (op == "argmax") return argmax(in[0], arg("dim").get<int64_t>(), arg("keepdim").get<bool>());
  // rows
  if (op == "softmax") return softmax(in[0], arg("dim").get<int64_t>());
  if (op == "log_softmax") return log_softmax(in[0], arg("dim").get<int64_t>());
  if (op == "causal_softmax") return causal_softmax(in[0]);
  if (op == "matmul") return matmul(in[0], in[1]);
  if (op == "cat") return cat(in, arg("dim").get<int64_t>());
  if (op == "stack") return stack(in, arg("dim").get<int64_t>());
  if (op == "index_select") return index_select(in[0], arg("dim").get<int64_t>(), in[1]);
  if (op == "embedding") return embedding(in[0], in[1]);
  if (op == "masked_fill") return masked_fill(in[0], in[1], arg("value").get<double>());
  if (op == "cross_entropy") return cross_entropy(in[0], in[1], arg("ignore_index").get<int64_t>());
  // norms
  if (op == "layer_norm")
    return F::layer_norm(in[0], shape_of(arg("normalized_shape")), opt(1), opt(2), arg("eps").get<double>());
  if (op == "rms_norm") return F::rms_norm(in[0], opt(1), arg("eps").get<double>());
  if (op == "group_norm")
    return F::group_norm(in[0], arg("groups").get<int64_t>(), opt(1), opt(2), arg("eps").get<double>());
  if (op == "add_layer_norm")
    return F::add_layer_norm(in[0], in[1], arg("alpha").get<double>(), shape_of(arg("normalized_shape")),
                             opt(2), opt(3), arg("eps").get<double>());
  if (op == "add_rms_norm") return F::add_rms_norm(in[0], in[1], arg("alpha").get<double>(), opt(2));
  if (op == "batch_norm") {
    // inputs: x, running_mean, running_var, weight, bias (the running statistics are updated in place)
    Tensor rm = in[1].detach().contiguous().clone(), rv = in[2].detach().contiguous().clone();
    Tensor y = F::batch_norm(in[0], rm, rv, opt(3), opt(4), arg("training").get<bool>(),
                             arg("momentum").get<double>(), arg("eps").get<double>());
    extra = {rm, rv};
    return y;
  }
  // in place, on the view of input 0; the answer is input 0's base after the write
  if (op == "fill_") return in[0].fill_(arg("value").get<double>());
  if (op == "copy_") return in[0].copy_(in[1]);
  if (op == "add_") return add_(in[0], in[1], arg("alpha").get<double>());
  if (op == "mul_") return mul_(in[0], arg("s").get<double>());
  if (op == "view") return in[0].view(shape_of(arg("shape")));
  if (op == "rope") {
    // x: (B, T, NH, HS); the tables computed here, as the PyTorch side computes its own
    const int64_t T = in[0].size(1), HS = in[0].size(3);
    RopeTables tab = rope_tables(T, HS, arg("theta").get<double>(), in[0].dtype());
    return apply_rope(in[0], tab.cos, tab.sin);
  }
  throw Error("view_sweep: unknown op '" + op + "'");
}

json run_case(const json& c) {
  const DType dt = dtype_named(c.at("dtype").get<std::string>());
  Case k = build_inputs(c, dt);
  std::vector<Tensor> extra;
  const json args = c.value("args", json::object());
  const std::string op = c.at("op").get<std::string>();
  Tensor y = run_op(op, args, k.in, extra);
  if (op.back() == '_') y = k.leaves[0];  // an in-place op: what it wrote, seen through the base
  json out;
  out["shape"] = y.shape();
  out["y"] = values_of(y);
  if (c.contains("dy") && y.requires_grad()) {
    Tensor dy = from_vector(c.at("dy").get<std::vector<double>>(), y.shape(), DType::f64).to(y.dtype());
    y.backward(dy);
  }
  json grads = json::array();
  for (size_t i = 0; i < k.leaves.size(); ++i) {
    const Tensor g = k.wants_grad[i] ? k.leaves[i].grad() : Tensor();
    grads.push_back(g.defined() ? values_of(g) : json(nullptr));
  }
  out["grads"] = grads;
  json ex = json::array();
  for (const Tensor& e : extra) ex.push_back(values_of(e));
  out["extra"] = ex;
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) {
    std::fprintf(stderr, "%s: takes no arguments; it reads one JSON case per line on stdin (see %s)\n",
                 argv[0], "bench/view_sweep_vs_pytorch.py");
    return 2;
  }
  std::string line;
  int64_t line_no = 0;
  while (std::getline(std::cin, line)) {
    ++line_no;
    if (line.empty()) continue;
    json c;
    try {
      c = json::parse(line);
      if (!c.is_object() || !c.contains("id"))
        throw std::runtime_error("expected a JSON object with an \"id\"");
    } catch (const std::exception& e) {
      std::fprintf(stderr, "view_sweep: line %lld is not a case: %s\n", (long long)line_no, e.what());
      return 1;
    }
    json out;
    try {
      out = run_case(c);
    } catch (const Error& e) {  // the op refused the case: an answer
      out = json::object();
      out["error"] = e.what();
    } catch (const std::exception& e) {  // a malformed case (a missing argument): the case is named
      std::fprintf(stderr, "view_sweep: case %s is malformed: %s\n", c.at("id").dump().c_str(), e.what());
      return 1;
    }
    out["id"] = c.at("id");
    std::cout << out.dump() << "\n";
    std::cout.flush();
  }
  return 0;
}

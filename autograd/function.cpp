#include "autograd/function.h"

#include <atomic>

#include "autograd/anomaly.h"
#include "tensor/ops/reduce.h"

namespace ng {

namespace {
std::atomic<uint64_t> g_sequence{0};
}

bool needs_grad(std::initializer_list<Tensor> inputs) {
  if (!grad_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

bool needs_grad(const std::vector<Tensor>& inputs) {
  if (!grad_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

void attach(Tensor& out, const char* name, const std::vector<Tensor>& inputs, BackwardFn backward) {
  // Anomaly mode (autograd/anomaly.h): the first op whose output holds NaN/Inf throws, here.
  if (anomaly_enabled()) check_forward_anomaly(out, name, inputs);
  auto node = std::make_shared<FunctionNode>(name, std::move(backward));
  node->sequence_nr = g_sequence.fetch_add(1);
  node->next_edges.reserve(inputs.size());
  node->input_shapes.reserve(inputs.size());
  node->input_dtypes.reserve(inputs.size());
  node->input_devices.reserve(inputs.size());
  for (const Tensor& in : inputs) {
    node->next_edges.push_back(in.defined() && in.requires_grad() ? gradient_edge(in) : Edge{});
    node->input_shapes.push_back(in.defined() ? in.shape() : Shape{});
    node->input_dtypes.push_back(in.defined() ? in.dtype() : DType::f32);
    node->input_devices.push_back(in.defined() ? in.device() : Device{});
  }
  TensorImpl& o = out.impl();
  o.grad_fn = std::move(node);
  o.requires_grad = true;
}

Tensor sum_to(const Tensor& grad, const Shape& shape) {
  if (grad.shape() == shape) return grad;
  // Broadcasting aligned `shape` to the right of grad's shape. Sum the leading extra dims away, and
  // sum (keeping the dim) wherever shape has a 1 that grad stretched.
  int64_t lead = grad.dim() - int64_t(shape.size());
  NG_CHECK(lead >= 0, "sum_to", "cannot reduce gradient of shape ", shape_str(grad.shape()), " to ",
           shape_str(shape));
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < grad.dim(); ++i) {
    if (i < lead) {
      dims.push_back(i);
    } else {
      int64_t want = shape[i - lead];
      NG_CHECK(want == grad.size(i) || want == 1, "sum_to", "cannot reduce gradient of shape ",
               shape_str(grad.shape()), " to ", shape_str(shape));
      if (want == 1 && grad.size(i) != 1) dims.push_back(i);
    }
  }
  Tensor r = dims.empty() ? grad : sum(grad, dims, /*keepdim=*/true);
  return r.reshape(shape);
}

}  // namespace ng

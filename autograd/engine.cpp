#include "autograd/engine.h"

#include <cmath>
#include <queue>
#include <unordered_map>

#include "autograd/anomaly.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/reduce.h"

namespace ng {

namespace {
// One switch per thread, as grad mode is (autograd/grad_mode.cpp): DetectAnomalyGuard restores the state it
// found, and that is only sound if no other thread flips the same switch in between. The process-wide plain
// bool it was before was also a data race between a thread setting it and another one recording ops (stop
// 40; UserThreads.AnomalyModeIsPerThread).
thread_local bool g_anomaly = false;
}  // namespace

bool anomaly_enabled() {
  return g_anomaly;
}
void set_anomaly_enabled(bool on) {
  g_anomaly = on;
}

void run_backward(const Tensor& root, const Tensor& grad_in, bool retain_graph) {
  check_defined("backward", "self", root);
  NG_CHECK(root.requires_grad(), "backward",
           "the tensor does not require grad and has no grad_fn (did you forget requires_grad_() on "
           "an input, or run the forward under NoGradGuard?)");
  Tensor seed = grad_in;
  if (!seed.defined()) {
    NG_CHECK(root.numel() == 1, "backward",
             "a gradient can be created implicitly only for a scalar output; the output has shape ",
             shape_str(root.shape()), ", so pass backward(grad) with a gradient of that shape");
    seed = ones_like(root);
  } else {
    NG_CHECK(seed.shape() == root.shape(), "backward", "gradient has shape ", shape_str(seed.shape()),
             ", expected ", shape_str(root.shape()), " (the output's shape)");
    // Every backward formula reads its incoming gradient as its output's dtype: an f64 seed on an f32
    // output was read as floats, past its end (wrong gradients, an out-of-bounds read; stop 42).
    NG_CHECK(seed.dtype() == root.dtype(), "backward", "gradient has dtype ", dtype_name(seed.dtype()),
             ", expected ", dtype_name(root.dtype()), " (the output's dtype; convert it with .to())");
    NG_CHECK(seed.device() == root.device(), "backward", "gradient is on ", seed.device().str(),
             ", expected ", root.device().str(), " (the output's device)");
  }

  NoGradGuard no_grad;  // the backward pass itself is not recorded
  Edge root_edge = gradient_edge(root);
  if (!root_edge.valid()) return;

  // 1. Discover the graph (iterative DFS) and count, for each node, how many edges point at it.
  std::unordered_map<Node*, int> dependencies;
  std::vector<Node*> stack{root_edge.fn.get()};
  dependencies[root_edge.fn.get()] = 0;
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next_edges) {
      if (!e.valid()) continue;
      auto [it, inserted] = dependencies.try_emplace(e.fn.get(), 0);
      ++it->second;
      if (inserted) stack.push_back(e.fn.get());
    }
  }

  // 2. Run nodes whose consumers have all reported, latest-created first.
  std::unordered_map<Node*, Tensor> grads;  // summed dL/d(output of node)
  grads[root_edge.fn.get()] = seed;
  auto later_first = [](Node* a, Node* b) { return a->sequence_nr < b->sequence_nr; };
  std::priority_queue<Node*, std::vector<Node*>, decltype(later_first)> ready(later_first);
  ready.push(root_edge.fn.get());
  // Keep the root's node alive even if the caller drops `root` during backward.
  std::shared_ptr<Node> keep = root_edge.fn;

  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    Tensor g;
    if (auto it = grads.find(node); it != grads.end()) {
      g = std::move(it->second);
      grads.erase(it);
    }

    std::vector<Tensor> input_grads;
    if (g.defined()) {
      if (auto out = node->retained_output.lock()) {
        Tensor o(out);
        if (!out->grad)
          o.set_grad(g.clone());
        else {
          Tensor acc(out->grad);
          add_(acc, g);
        }
      }
      input_grads = node->apply(g);
      if (!retain_graph) node->release();
    }

    for (size_t i = 0; i < node->next_edges.size(); ++i) {
      const Edge& e = node->next_edges[i];
      if (!e.valid()) continue;
      if (i < input_grads.size() && input_grads[i].defined()) {
        const Tensor& gi = input_grads[i];
        NG_CHECK(gi.shape() == node->input_shapes[i], node->name().c_str(),
                 "backward returned a gradient of shape ", shape_str(gi.shape()), " for input ", i,
                 ", expected ", shape_str(node->input_shapes[i]));
        // A custom backward (attach) returning another dtype was read as the input's dtype further on (an f64
        // gradient for an f32 input failed inside Tensor::data, naming no node; an f32 one for a bf16 input
        // flowed on unnoticed), and another device likewise.
        if (i < node->input_dtypes.size()) {
          NG_CHECK(gi.dtype() == node->input_dtypes[i], node->name().c_str(),
                   "backward returned a gradient of dtype ", dtype_name(gi.dtype()), " for input ", i,
                   ", expected ", dtype_name(node->input_dtypes[i]), " (the input's dtype)");
          NG_CHECK(gi.device() == node->input_devices[i], node->name().c_str(),
                   "backward returned a gradient on ", gi.device().str(), " for input ", i, ", expected ",
                   node->input_devices[i].str(), " (the input's device)");
        }
        if (g_anomaly && !all_finite(gi))
          fail("anomaly", "the backward of ", node->name(), " produced NaN or Inf in the gradient of input ",
               i, " (shape ", shape_str(node->input_shapes[i]), "); its inputs have shapes ",
               shapes_list(node->input_shapes));
        auto [it, inserted] = grads.try_emplace(e.fn.get(), gi);
        if (!inserted) it->second = add(it->second, gi);
      }
      if (--dependencies[e.fn.get()] == 0) ready.push(e.fn.get());
    }
  }
}

}  // namespace ng

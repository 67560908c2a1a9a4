// The autograd graph.
//
// Every differentiable op that runs while grad mode is on and has an input that requires grad records a
// Node. The Node points at the Nodes of its inputs (edges), so the graph runs from the output back to the
// leaves:
//
//     x (leaf) ---> [AccumulateGrad(x)]
//                        ^
//     y = mul(x, w) -> [MulBackward] --edge--> [AccumulateGrad(w)]
//                        ^
//     loss = sum(y) -> [SumBackward]
//
// A Node's job is the chain rule for one op: given dL/d(output), return dL/d(input_i) for each input.
//
// Ops are written with attach (autograd/function.h), which takes the backward as a lambda written right
// below the forward, so the two sit side by side, as micrograd does.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace ng {

struct Node;

// Where a gradient flows: into `fn` (which may be an AccumulateGrad).
struct Edge {
  std::shared_ptr<Node> fn;
  bool valid() const { return fn != nullptr; }
};

struct Node : std::enable_shared_from_this<Node> {
  Node() = default;
  virtual ~Node();  // iterative: see node.cpp (a 100,000-op chain must not overflow the stack)
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // One edge per differentiable input, in input order (invalid edge: input needs no gradient).
  std::vector<Edge> next_edges;
  // Shapes of the inputs, for error messages and anomaly reports; dtypes and devices, to check that each
  // gradient a backward returns matches its input (the engine does, with this node's name).
  std::vector<Shape> input_shapes;
  std::vector<DType> input_dtypes;
  std::vector<Device> input_devices;

  // Given dL/d(output), return dL/d(input_i) per input (an undefined Tensor where none flows).
  virtual std::vector<Tensor> apply(const Tensor& grad_output) = 0;
  virtual std::string name() const = 0;
  // Drop saved tensors once backward has used them (unless retain_graph). Afterwards apply() throws.
  virtual void release() {}

  // Order of creation: later nodes run first among the ready ones (keeps backward deterministic).
  uint64_t sequence_nr = 0;
  // Set by Tensor::retain_grad(): the output whose .grad should also be filled.
  std::weak_ptr<TensorImpl> retained_output;
};

// The node at the end of every path: adds the incoming gradient into a leaf's .grad.
struct AccumulateGrad final : Node {
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf) : leaf(std::move(leaf)) {}
  std::vector<Tensor> apply(const Tensor& grad_output) override;
  std::string name() const override { return "AccumulateGrad"; }
  std::shared_ptr<TensorImpl> leaf;
};

// A tensor saved for backward, with the version it had when saved. unpack() refuses a tensor that was
// modified in place since (the gradient would silently be wrong).
//
// What is kept is a detached alias (same storage, so the same version counter, but no grad_fn). Keeping the
// tensor itself would make a reference cycle whenever an op saves its own OUTPUT (exp, sqrt, tanh, softmax
// do): output -> grad_fn -> this node's saved tensors -> output. A graph dropped without backward() would
// then never be freed (tests/test_reliability_leaks.cpp).
class SavedTensor {
 public:
  SavedTensor() = default;
  SavedTensor(const Tensor& t, const char* op) : tensor_(t.defined() ? t.detach() : t), op_(op) {
    if (t.defined()) version_ = t.version();
  }
  const Tensor& unpack() const;
  bool defined() const { return tensor_.defined(); }

 private:
  Tensor tensor_;
  uint64_t version_ = 0;
  const char* op_ = "";
};

// The Node every op uses: a name and a backward lambda.
using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_output)>;
struct FunctionNode final : Node {
  FunctionNode(std::string name, BackwardFn fn) : name_(std::move(name)), fn_(std::move(fn)) {}
  ~FunctionNode() override;
  std::vector<Tensor> apply(const Tensor& grad_output) override;
  std::string name() const override { return name_; }
  void release() override;

 private:
  std::string name_;
  BackwardFn fn_;  // owns the saved tensors (captured by value)
};

// The edge that gradient for `t` should flow into: its grad_fn, or its leaf accumulator, or none.
Edge gradient_edge(const Tensor& t);

}  // namespace ng

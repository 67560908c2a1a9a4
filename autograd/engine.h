// The backward engine: reverse-mode automatic differentiation.
//
// loss.backward() computes d(loss)/d(leaf) for every leaf that requires grad, and ADDS it into leaf.grad.
//
// Rules (they match PyTorch's):
//  * Gradients accumulate: .grad += new gradient. Call zero_grad() (or Module::zero_grad / an optimizer's
//    zero_grad) before each step, or the steps' gradients pile up.
//  * A scalar (one-element) output may call backward() with no argument: the seed gradient is 1.
//    A non-scalar output must be given a gradient of its own shape, or it is an ng::Error.
//  * backward() frees the graph's saved tensors as it goes. A second backward() through the same graph is an
//    ng::Error that says so, unless the first call passed retain_graph = true.
//  * Backward runs with grad mode off: the gradient computation itself is not recorded.
//
// Why topological order: a Node may feed several later Nodes (x used twice). Its gradient is the SUM of
// what all its consumers send back, so it may run only after every consumer has run. We count, for each
// Node, how many consumers point at it, and run a Node when that count reaches zero (Kahn's algorithm).
// Among ready Nodes the most recently created runs first, so the order is deterministic.
//
// Why iterative: a recursive walk would use one stack frame per op, and a 100,000-op chain (or a 1000-layer
// DeepNorm) would overflow the stack. The walk below uses explicit vectors, and Node's destructor frees long
// chains iteratively too (node.cpp).
#pragma once

#include "tensor/tensor.h"

namespace ng {

void run_backward(const Tensor& root, const Tensor& grad, bool retain_graph);

// Anomaly detection hook: when on, the engine checks every gradient a Node returns and throws an
// ng::Error naming the first Node whose backward produced NaN or Inf (see autograd/anomaly.h).
// The switch belongs to the calling thread, like grad mode: turning it on in one thread leaves the others'
// ops unchecked.
bool anomaly_enabled();
void set_anomaly_enabled(bool on);

}  // namespace ng

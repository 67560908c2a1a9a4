// attach: how every op hooks into autograd.
//
// An op computes its output with grad mode off, then, if any input requires grad, attaches a Node
// holding its backward. The pattern, with the backward's math beside the code:
//
//   Tensor mul(const Tensor& a, const Tensor& b) {
//     Tensor out = mul_kernel(a, b);                          // forward
//     if (needs_grad({a, b})) {
//       // d(a*b)/da = b, d(a*b)/db = a   ->  da = dout * b, db = dout * a (summed over broadcast dims)
//       SavedTensor sa(a, "mul"), sb(b, "mul");
//       attach(out, "MulBackward", {a, b}, [sa, sb, ...](const Tensor& dout) -> std::vector<Tensor> {
//         return {sum_to(dout * sb.unpack(), a_shape), sum_to(dout * sa.unpack(), b_shape)};
//       });
//     }
//     return out;
//   }
//
// Backward lambdas run with grad mode off, on tensors: they may call any op.
#pragma once

#include <initializer_list>

#include "autograd/grad_mode.h"
#include "autograd/node.h"

namespace ng {

// True when grad mode is on and some input requires grad.
bool needs_grad(std::initializer_list<Tensor> inputs);
bool needs_grad(const std::vector<Tensor>& inputs);

// Make `out` the output of a new FunctionNode whose inputs are `inputs`. Sets out.requires_grad.
void attach(Tensor& out, const char* name, const std::vector<Tensor>& inputs, BackwardFn backward);

// Reduce a broadcast gradient back to `shape`: sum over the dims that broadcasting added or stretched.
Tensor sum_to(const Tensor& grad, const Shape& shape);

}  // namespace ng

// Anomaly detection: find the FIRST op that produced a NaN or an Inf.
//
// A NaN spreads: once one op makes it, every op downstream produces NaN too, and the loss that finally
// shows it says nothing about where it came from. In anomaly mode normgrad checks, as it goes:
//
//   forward:  every op that records a Node (autograd/function.cpp, attach()) checks its output. The
//             first op whose output holds NaN/Inf throws, naming the op and its inputs' shapes.
//   backward: the engine (autograd/engine.cpp) checks every gradient a Node returns. The first Node whose
//             backward produced NaN/Inf throws, naming the Node and its inputs' shapes.
//
//   {
//     ng::DetectAnomalyGuard anomaly;   // on inside this scope, in this thread (it nests: the previous
//                                       // state comes back; other threads keep their own switch)
//     Tensor loss = model.forward(x);   // throws ng::Error "anomaly: the forward of Log ..." if log(-1) ran
//     loss.backward();                  // throws ng::Error "anomaly: the backward of DivBackward ..."
//   }
//
// Cost: every checked tensor is read once more, so training runs noticeably slower. Use it to debug, not
// by default (the trainers turn it on with --detect-anomaly).
//
// What it does not check: ops run with no input requiring grad (under NoGradGuard, or on plain data)
// record no Node, so their outputs are not checked. A NaN they make is caught by the first recorded op
// that consumes it: the message then says which input already held the NaN.
#pragma once

#include <string>
#include <vector>

#include "autograd/engine.h"
#include "tensor/tensor.h"

namespace ng {

class DetectAnomalyGuard {
 public:
  DetectAnomalyGuard() : prev_(anomaly_enabled()) { set_anomaly_enabled(true); }
  ~DetectAnomalyGuard() { set_anomaly_enabled(prev_); }
  DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
  DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;

 private:
  bool prev_;
};

// True when every value is finite. Integer tensors are always finite; CUDA tensors are copied to the
// CPU to be read.
bool all_finite(const Tensor& t);

// "(2, 3), (3), undefined": the shapes of an op's inputs, for anomaly messages.
std::string shapes_list(const std::vector<Shape>& shapes);

// The forward check, called by attach() when anomaly mode is on: throws ng::Error if `out` holds NaN/Inf.
// `node_name` is the Node's name ("MulBackward"); the message names the op ("Mul") and the inputs.
void check_forward_anomaly(const Tensor& out, const std::string& node_name,
                           const std::vector<Tensor>& inputs);

}  // namespace ng

// optim::Optimizer: the base of SGD, Adam and AdamW.
//
// An optimizer holds the parameters (by name, as Module::named_parameters() gives them) and, per parameter,
// a step count and named state tensors ("momentum_buffer" for SGD, "exp_avg" and "exp_avg_sq" for Adam).
// step() reads each parameter's .grad and updates the parameter IN PLACE, under NoGradGuard, in ONE pass
// over its elements (each element's whole update, moments included, is done at once). A parameter whose
// .grad is undefined is skipped, and its step count does not advance (as in PyTorch).
//
// Checkpointing: state_dict() lists the state as named tensors
//     "<param>.step"        i64, 0-d, for every parameter
//     "<param>.<buffer>"    the parameter's dtype and shape, once the buffer exists (after the first step)
// plus "lr" (f64, 0-d). state_dict() copies the buffers, so that a state kept in memory is a snapshot that
// later steps do not change. load_state_dict() checks every name, dtype and shape and says what is
// duplicated, missing, unexpected or wrong (a step count must be >= 0 and < INT64_MAX, since the next step
// adds 1); it copies onto each parameter's device, so the loaded optimizer never aliases the tensors it was
// given.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "nn/module.h"

namespace ng::optim {

struct ParamState {
  int64_t step = 0;                       // how many updates this parameter has had
  std::map<std::string, Tensor> buffers;  // e.g. "exp_avg" -> tensor shaped like the parameter
};

class Optimizer {
 public:
  explicit Optimizer(nn::NamedTensors params, double lr);
  // Unnamed parameters are named "0", "1", ... in order.
  Optimizer(const std::vector<Tensor>& params, double lr);
  virtual ~Optimizer() = default;

  virtual void step() = 0;
  virtual std::string type_name() const = 0;
  // The hyperparameters by name (lr, betas, eps, ...), for logs and checkpoint metadata.
  virtual std::map<std::string, double> hyperparameters() const = 0;

  void zero_grad();  // drop every parameter's .grad

  double lr;  // the learning rate of the next step(); LR schedules write it (step() checks it: finite, >= 0)

  const nn::NamedTensors& named_parameters() const { return params_; }
  const std::vector<ParamState>& state() const { return state_; }

  nn::NamedTensors state_dict() const;
  void load_state_dict(const nn::NamedTensors& state);

 protected:
  // The buffers this optimizer keeps per parameter (used by load_state_dict to know what to expect).
  virtual std::vector<std::string> buffer_names() const = 0;
  // The parameter's buffer `name`, created as zeros on first use.
  Tensor& buffer(size_t i, const std::string& name);
  // lr must be finite and >= 0: checked at construction and by every step(), since a schedule or the caller
  // writes it between steps (a NaN or inf one would turn every parameter into NaN without a word).
  void check_lr(const char* op) const;
  // Each parameter's gradient, made contiguous (undefined where the parameter has none), once every one of
  // them, and every buffer already made, has been checked against its parameter: the same dtype (f32 or f64),
  // shape and device. step() calls it before changing anything, so that a failed step leaves the parameters,
  // buffers and step counts as they were. An ng::Error naming `op` and the parameter.
  std::vector<Tensor> checked_grads(const char* op) const;

  nn::NamedTensors params_;
  std::vector<ParamState> state_;

 private:
  // ng::Error naming the two parameters when two of them share an element (overlapping views of a storage).
  void check_no_shared_elements() const;
};

}  // namespace ng::optim

// nn::Module: the base of every layer. It registers parameters, buffers and submodules by name, so that
// a model can list its parameters (for the optimizer), its state (for checkpoints), and switch
// train()/eval() recursively.
//
//   struct MyLayer : nn::Module {
//     Tensor weight;
//     std::shared_ptr<nn::Linear> proj;
//     MyLayer() {
//       weight = register_parameter("weight", ones({8}));
//       proj = register_module("proj", std::make_shared<nn::Linear>(8, 8));
//     }
//     Tensor forward(const Tensor& x) override { return proj->forward(x) * weight; }
//   };
//
// Names are dotted paths in registration order: "blocks.0.attn.q_proj.weight". Tensors are handles, so the
// registry and the member share one tensor; load_state_dict copies values INTO it (copy_), never
// replacing it, so optimizers that hold the parameters keep seeing the right ones.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace ng::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Module {
 public:
  virtual ~Module() = default;

  // Single-input modules override this (Linear, the norms, activations, blocks). Others define their own.
  virtual Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x) { return forward(x); }
  virtual std::string type_name() const { return "Module"; }

  // ---- introspection (recursive, stable registration order) ----
  // named_parameters() and named_buffers() list each tensor once, under the first name that reaches it, as
  // PyTorch does: a module registered twice (one layer used at two places) or a weight registered in two
  // modules is one parameter for the optimizer, clip_grad_norm_ and num_parameters(). state_dict() keeps
  // every name.
  NamedTensors named_parameters() const;
  std::vector<Tensor> parameters() const;
  NamedTensors named_buffers() const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const { return children_; }
  int64_t num_parameters() const;

  // ---- modes ----
  void train(bool on = true);  // recursive
  void eval() { train(false); }
  bool is_training() const { return training_; }
  void zero_grad();  // drop every parameter's .grad

  // ---- device ----
  // Moves every parameter and buffer (recursively) to `device`, in place: each tensor keeps its identity
  // (the member, the registry, a tied weight and an optimizer made later all see the moved data) and its
  // requires_grad; its .grad is dropped. A tensor already there is left alone. Moving needs the CUDA
  // backend for a CUDA device (an ng::Error otherwise). Make the optimizer after moving: its state is
  // created on the parameters' device.
  void to(Device device);

  // ---- state: parameters and buffers by dotted name ----
  NamedTensors state_dict() const;
  // Copies each entry into the matching tensor, converting its dtype to the tensor's (as copy_ does: f64
  // values into an f32 model are rounded). With strict, a missing or unexpected name is an error; a shape
  // mismatch, an undefined tensor, a name given twice, or a value the tensor's dtype cannot hold (NaN into
  // an i64 buffer), is always an error. The message lists every problem found, and nothing is copied unless
  // all entries are fine.
  void load_state_dict(const NamedTensors& state, bool strict = true);

 protected:
  Tensor register_parameter(const std::string& name, Tensor t);  // marks it requires_grad
  Tensor register_buffer(const std::string& name, Tensor t);     // state, but not a parameter
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    check_name(name);
    NG_CHECK(m != nullptr, "Module", "register_module: '", name, "' is a null module");
    children_.emplace_back(name, m);
    return m;
  }
  // Replace a registered tensor (e.g. a buffer recreated with another shape). Name must exist; a parameter's
  // new tensor is marked requires_grad, as register_parameter does. The registry alone changes: assign the
  // member that held the old tensor too (`weight = t; replace_tensor("weight", weight);`).
  void replace_tensor(const std::string& name, const Tensor& t);

 private:
  void check_name(const std::string& name) const;
  void collect(const std::string& prefix, bool params, bool buffers, NamedTensors& out) const;

  NamedTensors params_;
  NamedTensors buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

// Modules applied one after another.
class Sequential : public Module {
 public:
  Sequential() = default;
  void push_back(std::shared_ptr<Module> m) {
    register_module(std::to_string(layers_.size()), m);
    layers_.push_back(std::move(m));
  }
  Tensor forward(const Tensor& x) override;
  size_t size() const { return layers_.size(); }
  const std::shared_ptr<Module>& operator[](size_t i) const {
    NG_CHECK(i < layers_.size(), "Sequential", "index ", i, " is out of range for ", layers_.size(),
             " layers");
    return layers_[i];
  }
  std::string type_name() const override { return "Sequential"; }

 private:
  std::vector<std::shared_ptr<Module>> layers_;
};

}  // namespace ng::nn

// nn::Dropout: in training, zero each element with probability p and scale the survivors by 1 / (1 - p)
// (so the expected value is unchanged); in eval mode, the identity. The op is ng::dropout
// (tensor/ops/dropout.h).
//
// Its random numbers come from the Generator given at construction (by reference: it must outlive the
// module). A model passes its own generator to all its Dropouts, so its whole random state is one
// (seed, offset) pair that a checkpoint can save (see nn/checkpoint.h).
#pragma once

#include "nn/module.h"
#include "tensor/random.h"

namespace ng::nn {

class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5, Generator& gen = default_generator());
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Dropout"; }

  double p;

 private:
  Generator* gen_;
};

}  // namespace ng::nn

#include "nn/dropout.h"

#include "tensor/ops/dropout.h"

namespace ng::nn {

Dropout::Dropout(double p_, Generator& gen) : p(p_), gen_(&gen) {
  // p = 1 is allowed, as in ng::dropout and PyTorch: in training every element is zeroed (and so is its
  // gradient); NaN fails both comparisons.
  NG_CHECK(p >= 0 && p <= 1, "Dropout", "expected 0 <= p <= 1, got ", p);
}

Tensor Dropout::forward(const Tensor& x) {
  check_defined("Dropout", "x", x);
  if (!is_training() || p == 0) return x;  // no random numbers drawn: eval and p = 0 are exact identities
  return dropout(x, p, true, *gen_);
}

}  // namespace ng::nn

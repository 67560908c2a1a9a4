// gradcheck: compare the analytic backward with central finite differences, in float64.
//
// For a function f(inputs) -> out, pick a random upstream gradient u (never all ones: with all ones,
// sum(layer_norm(x)) has zero gradient and hides every error), and look at the scalar
//
//     L(inputs) = sum(f(inputs) * u).
//
//   analytic:  dL/dx from one backward pass;
//   numeric:   (L(x + eps e_i) - L(x - eps e_i)) / (2 eps) for every element i of every input that
//              requires grad (error O(eps^2)).
//
// An element passes when |analytic - numeric| <= atol + rtol * |numeric|. The result reports the worst
// element: which input, which index, both values, and the errors.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace ng {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
  uint64_t seed = 1234;  // for the random upstream gradient
};

struct GradcheckResult {
  bool ok = true;
  int input = -1;      // worst input (index into inputs)
  int64_t index = -1;  // worst element (row-major index within that input)
  double analytic = 0, numeric = 0, abs_err = 0, rel_err = 0;
  int64_t checked = 0;          // elements compared
  std::string message() const;  // one readable line
};

using GradcheckFn = std::function<Tensor(const std::vector<Tensor>&)>;

// Inputs must be f64. Only inputs with requires_grad() are checked; the others are passed through.
// fn must be deterministic (dropout: fix its seed inside fn). Inputs' existing .grad is left untouched, also
// when fn throws. An input that requires grad must be a CPU leaf whose elements are its own: not an
// expanded view, and not sharing memory with another input (the same tensor twice is fine: each entry gets
// its whole gradient).
GradcheckResult gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options = {});

}  // namespace ng

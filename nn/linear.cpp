#include "nn/linear.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "tensor/device_kernels.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/matmul.h"

namespace ng::F {

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_defined("linear", "x", x, "weight", weight);
  NG_CHECK(weight.dim() == 2, "linear", "weight must be 2-D (out, in), got shape ",
           shape_str(weight.shape()));
  const int64_t out = weight.size(0), in = weight.size(1);
  NG_CHECK(x.dim() >= 1 && x.size(-1) == in, "linear", "x has shape ", shape_str(x.shape()),
           ", expected last dimension ", in, " to match weight ", shape_str(weight.shape()));
  if (bias.defined())
    NG_CHECK(bias.dim() == 1 && bias.size(0) == out, "linear", "bias has shape ", shape_str(bias.shape()),
             ", expected (", out, ") to match weight ", shape_str(weight.shape()));
  NG_CHECK(x.dtype() == weight.dtype(), "linear", "x has dtype ", dtype_name(x.dtype()), ", expected ",
           dtype_name(weight.dtype()),
           " to match weight (convert x with .to(DType::", dtype_name(weight.dtype()),
           "), or the module with nn::cast_)");
  // x, weight and bias on one device (an error naming linear and both devices otherwise); the matmul and add
  // below dispatch to that device themselves.
  (void)on_device({x, weight, bias}, "linear");

  // x: (..., in) -> x2: (N, in), N = product of the leading dims (a free view when x is contiguous)
  Shape out_shape = x.shape();
  out_shape.back() = out;
  // N is counted from the leading dims, not inferred with -1, which is undefined when in = 0.
  int64_t N = 1;
  for (int64_t d = 0; d + 1 < x.dim(); ++d) N *= x.size(d);
  Tensor x2 = x.dim() == 2 ? x : x.reshape({N, in});

  // y2 = x2 @ W^T: (N, in) @ (in, out) -> (N, out). weight.t() is a view, the GEMM reads it transposed.
  Tensor y2 = matmul(x2, weight.t());
  if (bias.defined()) y2 = y2 + bias;  // bias: (out) broadcast over rows; its grad sums dy over rows
  return x.dim() == 2 ? y2 : y2.reshape(out_shape);
}

}  // namespace ng::F

namespace ng::nn {

Linear::Linear(int64_t in, int64_t out, bool with_bias, Generator& gen, DType dtype)
    : in_features(in), out_features(out) {
  NG_CHECK(in > 0 && out > 0, "Linear", "expected positive in_features and out_features, got ", in, " and ",
           out);
  NG_CHECK(is_floating(dtype), "Linear", "expected a floating dtype, got ", dtype_name(dtype));
  weight = register_parameter("weight", empty({out, in}, dtype));
  if (with_bias) bias = register_parameter("bias", empty({out}, dtype));
  reset_parameters(gen);
}

void Linear::reset_parameters(Generator& gen) {
  // kaiming_uniform_(a = sqrt(5)):  bound = sqrt(3) * sqrt(2 / (1 + 5)) / sqrt(fan_in) = 1 / sqrt(fan_in)
  const double bound = 1.0 / std::sqrt(double(in_features));
  NoGradGuard no_grad;
  uniform_(weight, -bound, bound, gen);
  if (bias.defined()) uniform_(bias, -bound, bound, gen);
}

Tensor Linear::forward(const Tensor& x) {
  return F::linear(x, weight, bias);
}

}  // namespace ng::nn

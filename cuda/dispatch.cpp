// The CUDA backend's entry in the core's device table (tensor/device_kernels.h): each slot points at the
// ng::cuda:: function that does that job on the GPU. tensor/device_kernels.cpp references dispatch_table()
// directly (under NORMGRAD_HAVE_CUDA), which is how the backend is "registered".
//
// The small adapters below translate the core's conventions into the backend's: the core's op enums into
// cuda::BinaryOp / UnaryOp, "dims = {} means every dim" for sums, and in-place updates built from an
// out-of-place kernel plus a device copy.
#include "cuda/backend.h"
#include "tensor/device_kernels.h"

namespace ng::cuda {

namespace {

BinaryOp to_cuda(BinaryKind k) {
  switch (k) {
    case BinaryKind::add:
      return BinaryOp::add;
    case BinaryKind::sub:
      return BinaryOp::sub;
    case BinaryKind::mul:
      return BinaryOp::mul;
    case BinaryKind::div:
      return BinaryOp::div;
    case BinaryKind::max:
      return BinaryOp::maximum;
    case BinaryKind::min:
      return BinaryOp::minimum;
  }
  fail("cuda::binary", "unknown binary op ", int(k));
}

UnaryOp to_cuda(UnaryKind k) {
  switch (k) {
    case UnaryKind::neg:
      return UnaryOp::neg;
    case UnaryKind::exp:
      return UnaryOp::exp;
    case UnaryKind::log:
      return UnaryOp::log;
    case UnaryKind::sqrt:
      return UnaryOp::sqrt;
    case UnaryKind::rsqrt:
      return UnaryOp::rsqrt;
    case UnaryKind::abs:
      return UnaryOp::abs;
    case UnaryKind::pow:
      return UnaryOp::pow;
    case UnaryKind::clamp:
      return UnaryOp::clamp;
    case UnaryKind::square:
      return UnaryOp::square;
    case UnaryKind::relu:
      return UnaryOp::relu;
    case UnaryKind::gelu:
      return UnaryOp::gelu;
    case UnaryKind::silu:
      return UnaryOp::silu;
    case UnaryKind::sigmoid:
      return UnaryOp::sigmoid;
    case UnaryKind::tanh:
      return UnaryOp::tanh;
  }
  fail("cuda::unary", "unknown unary op ", int(k));
}

Tensor copy(const Tensor& src, DType dtype) {
  check_cuda(src, "cuda::copy", "src");
  if (dtype != src.dtype()) return cast(src, dtype);  // always a fresh contiguous tensor
  if (!src.is_contiguous()) return contiguous(src);   // a fresh strided -> contiguous copy
  Tensor out = cuda::empty(src.shape(), dtype, src.device());
  copy_bytes(out, src);
  return out;
}

Tensor binary_op(BinaryKind op, const Tensor& a, const Tensor& b) {
  return binary(to_cuda(op), a, b);
}
Tensor unary_op(UnaryKind op, const Tensor& x, double p0, double p1) {
  return unary(to_cuda(op), x, p0, p1);
}
Tensor unary_backward_op(UnaryKind op, const Tensor& x, const Tensor& y, const Tensor& dout, double p0,
                         double p1) {
  return unary_backward(to_cuda(op), x, y, dout, p0, p1);
}

// self += alpha * other and self *= s, as out-of-place kernels then a device copy into self (self must be
// contiguous: gradients and optimizer state are).
//
// The arithmetic is in the compute dtype (f32 for f16/bf16), with the scalar in it, and one rounding back to
// self's dtype at the end, as on the CPU. Before, the scalar was made a 0-d tensor of self's own dtype: in
// f16 clip_grad_norm_'s coefficient 1e-7 became 1.19e-7 (19% off) and anything below ~3e-8 became 0, and bf16
// coefficients were off by up to 0.4%.
namespace {
Tensor scalar_in(double v, DType dt, Device device) {
  Tensor a = cuda::empty({}, dt, device);
  fill_(a, v);
  return a;
}
Tensor in_compute_dtype(const Tensor& t) {
  const DType acc = compute_dtype(t.dtype());
  return t.dtype() == acc ? t : cast(t, acc);
}
void store_into(const Tensor& self, const Tensor& result) {
  copy_bytes(self, result.dtype() == self.dtype() ? result : cast(result, self.dtype()));
}
}  // namespace

void add_inplace(const Tensor& self, const Tensor& other, double alpha) {
  NG_CHECK(self.is_contiguous(), "add_", "on CUDA, expected a contiguous self, got strides ",
           shape_str(self.strides()));
  Tensor o = in_compute_dtype(other);
  if (alpha != 1.0) o = binary(BinaryOp::mul, o, scalar_in(alpha, o.dtype(), o.device()));
  store_into(self, binary(BinaryOp::add, in_compute_dtype(self), o));
}

void mul_inplace(const Tensor& self, double s) {
  NG_CHECK(self.is_contiguous(), "mul_", "on CUDA, expected a contiguous self, got strides ",
           shape_str(self.strides()));
  const Tensor x = in_compute_dtype(self);
  store_into(self, binary(BinaryOp::mul, x, scalar_in(s, x.dtype(), x.device())));
}

Tensor sum_op(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, bool take_mean) {
  std::vector<int64_t> d = dims;
  if (d.empty())  // the core's convention: an empty list reduces every dim
    for (int64_t i = 0; i < x.dim(); ++i) d.push_back(i);
  return take_mean ? mean(x, d, keepdim) : sum(x, d, keepdim);
}

Tensor softmax_op(const Tensor& x, int64_t dim, bool log) {
  return log ? log_softmax(x, dim) : softmax(x, dim);
}

void adam_op(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, const AdamHyper& h) {
  AdamStep s;
  s.lr = h.lr;
  s.beta1 = h.beta1;
  s.beta2 = h.beta2;
  s.eps = h.eps;
  s.weight_decay = h.weight_decay;
  s.decoupled = h.decoupled;
  s.step = h.step;
  adam_step(p, g, m, v, s);
}

DeviceKernels make_table() {
  DeviceKernels k;
  k.name = "cuda";
  k.empty = &cuda::empty;
  k.fill = &cuda::fill_;
  k.copy = &copy;
  k.copy_bytes = &cuda::copy_bytes;
  k.to_device = &cuda::device_copy;
  k.binary = &binary_op;
  k.unary = &unary_op;
  k.unary_backward = &unary_backward_op;
  k.add_ = &add_inplace;
  k.mul_ = &mul_inplace;
  k.sum = &sum_op;
  k.rope = &cuda::rope_rotate;
  k.masked_fill = &cuda::masked_fill;
  k.matmul = &cuda::matmul;
  k.softmax = &softmax_op;
  k.cross_entropy = &cuda::cross_entropy;
  k.embedding = &cuda::embedding;
  k.layer_norm = &cuda::layer_norm;
  k.rms_norm = &cuda::rms_norm;
  k.adam_step = &adam_op;
  return k;
}

}  // namespace

const DeviceKernels& dispatch_table() {
  static const DeviceKernels table = make_table();
  return table;
}

}  // namespace ng::cuda

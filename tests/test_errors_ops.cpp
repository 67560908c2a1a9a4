// Bad input to the core ops: every shape, broadcast, dtype and device mismatch is an ng::Error whose message
// names the op, what it expected and what it was given.
//
// Ops owned by other files test their own errors (softmax/loss/embedding: tests/test_ops_*.cpp; norms:
// tests/test_norms_*.cpp); docs/reliability.md lists where each lives.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "normgrad.h"

using namespace ng;

namespace {
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an ng::Error";
  return "";
}

#define EXPECT_ERROR(stmt, ...)                                                                     \
  do {                                                                                              \
    const std::string msg_ = error_of([&] { (void)(stmt); });                                       \
    for (const char* part_ : {__VA_ARGS__})                                                         \
      EXPECT_NE(msg_.find(part_), std::string::npos) << "missing \"" << part_ << "\" in: " << msg_; \
  } while (0)

// A tensor that claims to live on cuda:0. There is no GPU here: the memory is host memory, adopted by a
// Storage tagged with the CUDA device. Only the metadata is read by the checks under test.
Tensor fake_cuda(const Shape& shape) {
  const size_t bytes = size_t(numel(shape)) * sizeof(float);
  void* p = std::calloc(bytes ? bytes : 1, 1);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(p, bytes, Device::cuda(0), [](void* q) { std::free(q); });
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = DType::f32;
  return Tensor(impl);
}
}  // namespace

// ---- broadcast / shape ------------------------------------------------------------------------------

TEST(ErrorsOps, BinaryOpsRejectShapesThatDoNotBroadcast) {
  Tensor a = ones({2, 3}), b = ones({4});
  EXPECT_ERROR(add(a, b), "add: ", "(2, 3)", "(4)");
  EXPECT_ERROR(sub(a, b), "sub: ", "(2, 3)", "(4)");
  EXPECT_ERROR(mul(a, b), "mul: ", "(2, 3)", "(4)");
  EXPECT_ERROR(div(a, b), "div: ", "(2, 3)", "(4)");
  EXPECT_ERROR(maximum(a, ones({3, 2})), "maximum: ", "(2, 3)", "(3, 2)");
  EXPECT_ERROR(minimum(ones({5, 1, 3}), ones({2, 4})), "minimum: ", "(5, 1, 3)", "(2, 4)");
}

TEST(ErrorsOps, InPlaceAddRejectsAnOperandThatCannotExpandToSelf) {
  Tensor self = zeros({2, 3});
  EXPECT_ERROR(add_(self, ones({3, 3})),
               "add_: source of shape (3, 3) cannot be broadcast to the destination's shape (2, 3)");
  EXPECT_ERROR(add_(self, ones({3, 2, 3})),
               "add_: source of shape (3, 2, 3) cannot be broadcast to the destination's shape (2, 3)");
  // copy_ takes its source through the same check, and names itself.
  EXPECT_ERROR(self.copy_(ones({4})),
               "copy_: source of shape (4) cannot be broadcast to the destination's shape (2, 3)");
  // And the failed call changed nothing.
  EXPECT_EQ(self.to_vector<double>(), std::vector<double>(6, 0.0));
}

TEST(ErrorsOps, MatmulRejectsInnerDimMismatchAndLowRank) {
  EXPECT_ERROR(matmul(ones({2, 3}), ones({4, 5})), "matmul: inner dimensions differ", "(2, 3)", "(4, 5)");
  EXPECT_ERROR(matmul(ones(Shape{}), ones({3, 2})), "matmul: expected tensors with at least 1 dim", "()");
  // Batch dims must broadcast.
  EXPECT_ERROR(matmul(ones({2, 2, 3}), ones({3, 3, 4})), "matmul: ", "(2)", "(3)");
}

TEST(ErrorsOps, ReductionsRejectBadDims) {
  Tensor x = ones({2, 3});
  EXPECT_ERROR(sum(x, {2}), "sum: dim 2 is out of range");
  EXPECT_ERROR(sum(x, {0, -2}), "sum: a dim appears twice");
  EXPECT_ERROR(mean(x, {-3}), "mean: dim -3 is out of range");
  EXPECT_ERROR(var(ones({3, 1}), {1}), "var: needs at least 2 values");
  EXPECT_ERROR(max(zeros({2, 0}), 1), "max: cannot reduce an empty dim", "(2, 0)");
  EXPECT_ERROR(mean(zeros({0})), "mean: cannot take the mean of an empty set");
}

TEST(ErrorsOps, ViewsRejectImpossibleShapes) {
  Tensor x = ones({2, 3});
  EXPECT_ERROR(x.reshape({4, 2}), "reshape: shape (4, 2) is invalid for a tensor of shape (2, 3)");
  EXPECT_ERROR(x.reshape({-1, -1}), "only one dimension can be -1");
  EXPECT_ERROR(x.t().view({6}), "view: cannot view a tensor of shape (3, 2)");
  EXPECT_ERROR(x.permute({0, 0}), "permute: dim 0 appears twice");
  EXPECT_ERROR(x.permute({1}), "permute: expected 2 dims");
  EXPECT_ERROR(x.narrow(1, 2, 2), "narrow: window [2, ");
  EXPECT_ERROR(x.select(0, 2), "select: index 2 is out of range for dim 0 of size 2");
  EXPECT_ERROR(x.expand({4, 3}), "expand: cannot expand shape (2, 3) to (4, 3)");
  EXPECT_ERROR(x.slice(1, 0, 3, 0), "slice: step must be positive");
  EXPECT_ERROR(x.transpose(0, 2), "dim 2 is out of range");
}

TEST(ErrorsOps, CatAndStackRejectMismatchedInputs) {
  EXPECT_ERROR(cat({ones({2, 3}), ones({2, 4})}, 0), "cat: tensor 1 has shape (2, 4)", "outside dim 0");
  EXPECT_ERROR(cat({ones({2, 3}), ones({3})}, 0), "cat: tensor 1 has shape (3)", "expected 2 dims");
  EXPECT_ERROR(cat({}, 0), "cat: expected at least one tensor");
  EXPECT_ERROR(stack({ones({2}), ones({3})}, 0), "stack: tensor 1 has shape (3), expected (2)");
}

TEST(ErrorsOps, FactoriesRejectBadArguments) {
  EXPECT_ERROR(zeros({2, -1}), "empty: sizes must be non-negative", "(2, -1)");
  EXPECT_ERROR(from_vector(std::vector<double>{1, 2, 3}, {2, 2}), "from_vector: got 3");
  EXPECT_ERROR(arange(0.0, 1.0, 0.0), "arange: expected a non-zero step, got 0");
  // A scalar op runs in the tensor's dtype: a scalar it cannot hold is named by the op (the errors said
  // fill_, or before that f16 turned 1e10 into inf and the product was inf).
  EXPECT_ERROR(mul(ones({2}, DType::f16), 1e10), "mul: the scalar 1e+10 overflows f16 (it would be inf)");
  EXPECT_ERROR(rdiv(-1e39, ones({2}, DType::bf16)), "rdiv: the scalar -1e+39 overflows bf16");
  EXPECT_ERROR(mul(arange(0.0, 3.0, 1.0, DType::i64), NAN), "mul: cannot convert nan (f64) to i64");
  EXPECT_EQ(add(ones({1}, DType::f16), -INFINITY).to_vector<double>(), std::vector<double>{-INFINITY});
  // Ends the dtype cannot hold: i64 past 2^63 (was INT64_MIN, undefined) and a half dtype past its largest
  // finite value (was inf). Either end is checked; the values between lie between them.
  EXPECT_ERROR(arange(-1e30, -0.99e30, 1e28, DType::i64), "arange: cannot convert -1e+30 (f64) to i64");
  EXPECT_ERROR(arange(9e18, 9.4e18, 1e17, DType::i64), "arange: cannot convert 9.3e+18 (f64) to i64");
  EXPECT_ERROR(arange(65000.0, 67000.0, 1000.0, DType::f16), "arange: the value 66000 overflows f16");
  EXPECT_ERROR(arange(-4e38, 0.0, 1e38, DType::bf16), "arange: the value -4e+38 overflows bf16");
  EXPECT_ERROR(arange(3e38, 4e38, 5e37, DType::f32), "arange: the value 3.5e+38 overflows f32");
  // The largest values each dtype holds are still taken.
  EXPECT_EQ(arange(65000.0, 65600.0, 500.0, DType::f16).to_vector<double>(),
            (std::vector<double>{64992, 65504}));
  EXPECT_EQ(arange(9e18, 9.2e18, 1e17, DType::i64).to_vector<int64_t>(),
            (std::vector<int64_t>{9000000000000000000, 9100000000000000000}));
  EXPECT_ERROR(ones({2}).item(), "item: expected a tensor with one element, got shape (2)");
}

// ---- dtype ----------------------------------------------------------------------------------------

TEST(ErrorsOps, BinaryOpsRejectMixedDtypes) {
  Tensor a = ones({2}, DType::f32), b = ones({2}, DType::f64);
  EXPECT_ERROR(add(a, b), "add: dtype mismatch: got f32 and f64");
  EXPECT_ERROR(mul(a, ones({2}, DType::bf16)), "mul: dtype mismatch: got f32 and bf16");
  EXPECT_ERROR(matmul(ones({2, 2}), ones({2, 2}, DType::f64)), "matmul: dtype mismatch: got f32 and f64");
  EXPECT_ERROR(cat({a, b}, 0), "cat: tensor 1 has dtype f64, expected f32");
  Tensor s = zeros({2});
  EXPECT_ERROR(add_(s, b), "add_: dtype mismatch: got f32 and f64");
}

TEST(ErrorsOps, FloatOnlyOpsRejectIntegers) {
  Tensor i = arange(4);  // i64
  EXPECT_ERROR(exp(i), "exp: expected a floating tensor, got i64");
  EXPECT_ERROR(relu(i), "relu: expected a floating tensor, got i64");
  EXPECT_ERROR(matmul(arange(4).reshape({2, 2}), arange(4).reshape({2, 2})), "matmul: expected floating");
  EXPECT_ERROR(Tensor(arange(3)).requires_grad_(), "requires_grad_: only floating tensors can require grad");
  EXPECT_ERROR(ones({2}).data<double>(), "Tensor::data: requested f64 pointer, but the tensor holds f32");
}

// ---- device -----------------------------------------------------------------------------------------

TEST(ErrorsOps, BinaryOpsRejectTensorsOnDifferentDevices) {
  Tensor cpu = ones({2, 3}), gpu = fake_cuda({2, 3});
  EXPECT_ERROR(add(cpu, gpu), "add: expected both tensors on the same device, got cpu and cuda:0");
  EXPECT_ERROR(mul(gpu, cpu), "mul: expected both tensors on the same device, got cuda:0 and cpu");
  EXPECT_ERROR(matmul(ones({3, 2}), gpu), "matmul: expected both tensors on the same device");
  EXPECT_ERROR(add_(cpu, gpu), "add_: expected both tensors on the same device");
}

TEST(ErrorsOps, CopyAcrossDevicesWithoutABackendIsAnError) {
  // Only meaningful where no CUDA backend is linked: with one, the copy would be attempted for real.
  try {
    (void)ones({1}).to(Device::cuda());
    GTEST_SKIP() << "a CUDA backend is linked";
  } catch (const Error& e) {
    if (std::string(e.what()).find("built without the CUDA backend") == std::string::npos)
      GTEST_SKIP() << "a CUDA backend is linked: " << e.what();
  }
  EXPECT_ERROR(ones({2}).to(Device::cuda()), "to: cannot move a tensor from cpu to cuda:0");
  // Reading a tensor that is not on the CPU copies it there first; with no backend that is refused too.
  Tensor gpu = fake_cuda({2});
  EXPECT_ERROR(gpu.to_vector<float>(), "to: cannot move a tensor from cuda:0 to cpu");
}

// Found by reading nn/norms and tensor/ops (stop 43): each gave a silent NaN or inf, accepted a bad dim, or
// named the wrong op.
TEST(ErrorsOps, NormsRefuseAnEpsThatRoundsToZeroAndABadRunningState) {
  // eps = 1e-50 is > 0 in double but 0 in the f32 arithmetic of f32/f16/bf16 inputs: a constant row's
  // 1/sqrt(0 + 0) was inf, its output NaN. f64 inputs keep it.
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    EXPECT_ERROR(F::layer_norm(full({2, 4}, 3.0, dt), {4}, {}, {}, 1e-50),
                 "layer_norm: eps 1e-50 rounds to 0 in the f32 arithmetic of a", dtype_name(dt));
    EXPECT_ERROR(F::rms_norm(zeros({2, 4}, dt), {}, 1e-50), "rms_norm: eps 1e-50 rounds to 0");
    EXPECT_ERROR(F::group_norm(zeros({2, 4, 3}, dt), 2, {}, {}, 1e-50), "group_norm: eps 1e-50 rounds to 0");
    EXPECT_ERROR(F::batch_norm(zeros({2, 4}, dt), {}, {}, {}, {}, true, 0.1, 1e-50),
                 "batch_norm: eps 1e-50 rounds to 0");
  }
  const std::vector<double> y =
      F::layer_norm(full({2, 4}, 3.0, DType::f64), {4}, {}, {}, 1e-50).to_vector<double>();
  EXPECT_EQ(y, std::vector<double>(8, 0.0));
  // Eval mode divides by sqrt(running_var + eps): a negative or NaN variance, or a NaN mean, gave NaN.
  const Tensor x = ones({3, 2});
  EXPECT_ERROR(
      F::batch_norm(x, zeros({2}), from_vector(std::vector<double>{1.0, -2.0}, Shape{2}), {}, {}, false),
      "batch_norm: running_var[1] is -2: expected a finite variance >= 0");
  EXPECT_ERROR(
      F::batch_norm(x, zeros({2}), from_vector(std::vector<double>{NAN, 1.0}, Shape{2}), {}, {}, false),
      "batch_norm: running_var[0] is nan");
  EXPECT_ERROR(F::batch_norm(x, full({2}, NAN), ones({2}), {}, {}, false),
               "batch_norm: running_mean[0] is nan: expected a finite mean");
}

TEST(ErrorsOps, SoftmaxOfAScalarTakesDimMinusOneOrZeroOnly) {
  EXPECT_EQ(softmax(scalar_tensor(2.0), 0).item(), 1.0);
  EXPECT_EQ(log_softmax(scalar_tensor(2.0), -1).item(), 0.0);
  EXPECT_ERROR(softmax(scalar_tensor(2.0), 5), "softmax: dim 5 is out of range for a tensor with 0 dims");
  EXPECT_ERROR(log_softmax(scalar_tensor(2.0), -7), "log_softmax: dim -7 is out of range");
}

TEST(ErrorsOps, MaskedFillRefusesAFiniteValueItsDtypeCannotHold) {
  EXPECT_ERROR(masked_fill(zeros({3}, DType::f16), ones({3}), 1e10),
               "masked_fill: value 1e+10 overflows f16 (it would be inf)");
  EXPECT_ERROR(masked_fill(zeros({3}), ones({3}), 1e300), "masked_fill: value 1e+300 overflows f32");
  // inf and NaN are fills of their own (an attention mask's -inf), and 6e4 fits f16.
  EXPECT_TRUE(std::isinf(masked_fill(zeros({1}, DType::f16), ones({1}), -INFINITY).item()));
  EXPECT_EQ(masked_fill(zeros({1}, DType::f16), ones({1}), 6e4).item(), 60000.0);
  EXPECT_TRUE(
      std::isfinite(masked_fill(zeros({1}, DType::bf16), ones({1}), 1e30).item()));  // bf16 reaches 3.4e38
}

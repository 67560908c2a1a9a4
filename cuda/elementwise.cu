// Elementwise kernels with broadcasting, the strided copy behind contiguous(), casts and fill.
//
// One kernel shape serves them all: thread i handles output element i (grid-stride loop), and a
// StridedIndexer turns i into the offset of each operand, so broadcasting (stride 0) and views (any
// strides) cost nothing extra to support. When every operand is contiguous the indexer is skipped.
#include "cuda/common.cuh"
#include "cuda/device_tensor.h"
#include "cuda/elementwise.h"

namespace ng::cuda {

namespace {

constexpr int kThreads = 256;

int64_t grid_for(int64_t n) {
  return std::min<int64_t>(ceil_div(n, kThreads), 65535 * 8);
}

// The indexer for an output of `shape` and operands with `strides`; size-1 dims are dropped.
template <int K>
StridedIndexer<K> make_indexer(const Shape& shape, const std::array<Strides, K>& strides, const char* op) {
  StridedIndexer<K> ix;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    NG_CHECK(ix.ndim < kMaxDims, op, "at most ", kMaxDims,
             " non-trivial dims are supported on CUDA, got shape ", shape_str(shape));
    ix.sizes[ix.ndim] = shape[d];
    for (int k = 0; k < K; ++k) ix.strides[k][ix.ndim] = strides[size_t(k)][d];
    ++ix.ndim;
  }
  return ix;
}

// ---- the math (device twins of un_apply / un_derivative in tensor/ops/elementwise.cpp) -----------------
template <typename A>
__device__ __forceinline__ A binary_apply(BinaryOp op, A a, A b) {
  switch (op) {
    case BinaryOp::add:
      return a + b;
    case BinaryOp::sub:
      return a - b;
    case BinaryOp::mul:
      return a * b;
    case BinaryOp::div:
      return a / b;
    case BinaryOp::maximum:
      return a > b || isnan(a) ? a : b;
    case BinaryOp::minimum:
      return a < b || isnan(a) ? a : b;
  }
  return A(0);
}

constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kGeluC = 0.044715;

template <typename A>
__device__ __forceinline__ A unary_apply(UnaryOp op, A x, A p0, A p1) {
  switch (op) {
    case UnaryOp::neg:
      return -x;
    case UnaryOp::exp:
      return exp(x);
    case UnaryOp::log:
      return log(x);
    case UnaryOp::sqrt:
      return sqrt(x);
    case UnaryOp::rsqrt:
      return A(1) / sqrt(x);
    case UnaryOp::abs:
      return fabs(x);
    case UnaryOp::square:
      return x * x;
    case UnaryOp::relu:
      return x <= A(0) ? A(0) : x;  // NaN stays NaN, as on the CPU
    case UnaryOp::gelu:
      return A(0.5) * x * (A(1) + tanh(A(kSqrt2OverPi) * (x + A(kGeluC) * x * x * x)));
    case UnaryOp::silu:
      return x / (A(1) + exp(-x));
    case UnaryOp::sigmoid:
      return A(1) / (A(1) + exp(-x));
    case UnaryOp::tanh:
      return tanh(x);
    case UnaryOp::pow:
      return pow(x, p0);
    case UnaryOp::clamp:
      return x < p0 ? p0 : (x > p1 ? p1 : x);
  }
  return x;
}

template <typename A>
__device__ __forceinline__ A unary_derivative(UnaryOp op, A x, A y, A p0, A p1) {
  switch (op) {
    case UnaryOp::neg:
      return A(-1);
    case UnaryOp::exp:
      return y;
    case UnaryOp::log:
      return A(1) / x;
    case UnaryOp::sqrt:
      return A(0.5) / y;
    case UnaryOp::rsqrt:
      return A(-0.5) * y * y * y;
    case UnaryOp::abs:
      return x > A(0) ? A(1) : (x < A(0) ? A(-1) : A(0));
    case UnaryOp::square:
      return A(2) * x;
    case UnaryOp::relu:
      return x <= A(0) ? A(0) : A(1);  // 1 at NaN, as on the CPU
    case UnaryOp::gelu: {
      const A u = A(kSqrt2OverPi) * (x + A(kGeluC) * x * x * x);
      const A t = tanh(u);
      return A(0.5) * (A(1) + t) +
             A(0.5) * x * (A(1) - t * t) * A(kSqrt2OverPi) * (A(1) + A(3 * kGeluC) * x * x);
    }
    case UnaryOp::silu: {
      const A s = A(1) / (A(1) + exp(-x));
      return s * (A(1) + x * (A(1) - s));
    }
    case UnaryOp::sigmoid:
      return y * (A(1) - y);
    case UnaryOp::tanh:
      return A(1) - y * y;
    case UnaryOp::pow:
      return p0 == A(0) ? A(0) : p0 * pow(x, p0 - A(1));  // x^0 = 1: its gradient is 0 (not 0 * inf at 0)
    case UnaryOp::clamp:
      return (x >= p0 && x <= p1) ? A(1) : A(0);
  }
  return A(0);
}

// ---- kernels ---------------------------------------------------------------------------------------------
template <typename T>
__global__ void binary_kernel(BinaryOp op, const T* a, const T* b, T* out, int64_t n, StridedIndexer<2> ix,
                              bool contiguous) {
  using A = acc_t<T>;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t o[2] = {i, i};
    if (!contiguous) ix.offsets(i, o);
    out[i] = from_acc<T>(binary_apply<A>(op, to_acc(a[o[0]]), to_acc(b[o[1]])));
  }
}

template <typename T>
__global__ void unary_kernel(UnaryOp op, const T* x, T* out, int64_t n, StridedIndexer<1> ix, bool contiguous,
                             double p0, double p1) {
  using A = acc_t<T>;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t o[1] = {i};
    if (!contiguous) ix.offsets(i, o);
    out[i] = from_acc<T>(unary_apply<A>(op, to_acc(x[o[0]]), A(p0), A(p1)));
  }
}

template <typename T>
__global__ void unary_backward_kernel(UnaryOp op, const T* x, const T* y, const T* dout, T* dx, int64_t n,
                                      StridedIndexer<3> ix, double p0, double p1) {
  using A = acc_t<T>;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t o[3];
    ix.offsets(i, o);
    const A d = unary_derivative<A>(op, to_acc(x[o[0]]), to_acc(y[o[1]]), A(p0), A(p1));
    dx[i] = from_acc<T>(to_acc(dout[o[2]]) * d);
  }
}

// Strided -> contiguous copy of raw elements of `Bytes` bytes (any dtype: only the size matters).
template <typename Word>
__global__ void strided_copy_kernel(const Word* src, Word* dst, int64_t n, StridedIndexer<1> ix) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t o[1];
    ix.offsets(i, o);
    dst[i] = src[o[0]];
  }
}

template <typename D, typename S>
__global__ void cast_kernel(const S* src, D* dst, int64_t n, StridedIndexer<1> ix) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t o[1];
    ix.offsets(i, o);
    if constexpr (std::is_same_v<S, double> || std::is_same_v<D, double>)
      dst[i] = from_acc<D>(double(to_acc(src[o[0]])));
    else
      dst[i] = from_acc<D>(float(to_acc(src[o[0]])));
  }
}

template <typename T>
__global__ void fill_kernel(T* x, T value, int64_t n, StridedIndexer<1> ix) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t o[1];
    ix.offsets(i, o);
    x[o[0]] = value;
  }
}

void check_pair(const Tensor& a, const Tensor& b, const char* op) {
  check_cuda(a, op, "a");
  NG_CHECK(a.device() == b.device(), op, "expected both tensors on the same device, got ", a.device().str(),
           " and ", b.device().str());
  NG_CHECK(a.dtype() == b.dtype(), op, "dtype mismatch: got ", dtype_name(a.dtype()), " and ",
           dtype_name(b.dtype()));
}

const char* binary_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::add:
      return "cuda::add";
    case BinaryOp::sub:
      return "cuda::sub";
    case BinaryOp::mul:
      return "cuda::mul";
    case BinaryOp::div:
      return "cuda::div";
    case BinaryOp::maximum:
      return "cuda::maximum";
    case BinaryOp::minimum:
      return "cuda::minimum";
  }
  return "cuda::binary";
}

}  // namespace

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  const char* name = binary_name(op);
  check_pair(a, b, name);
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  Tensor out = empty(shape, a.dtype(), a.device());
  const int64_t n = out.numel();
  if (n == 0) return out;
  Tensor ea = a.detach().expand(shape), eb = b.detach().expand(shape);
  const bool contiguous = ea.is_contiguous() && eb.is_contiguous();
  auto ix = make_indexer<2>(shape, {ea.strides(), eb.strides()}, name);
  NG_CUDA_DISPATCH_FLOAT(a.dtype(), name, [&]<typename T>() {
    binary_kernel<T>
        <<<grid_for(n), kThreads>>>(op, dptr<T>(ea), dptr<T>(eb), dptr<T>(out), n, ix, contiguous);
    NG_CUDA_CHECK_LAUNCH();
  });
  return out;
}

Tensor unary(UnaryOp op, const Tensor& x, double p0, double p1) {
  check_cuda(x, "cuda::unary", "x");
  Tensor out = empty(x.shape(), x.dtype(), x.device());
  const int64_t n = out.numel();
  if (n == 0) return out;
  auto ix = make_indexer<1>(x.shape(), {x.strides()}, "cuda::unary");
  NG_CUDA_DISPATCH_FLOAT(x.dtype(), "cuda::unary", [&]<typename T>() {
    unary_kernel<T>
        <<<grid_for(n), kThreads>>>(op, dptr<T>(x), dptr<T>(out), n, ix, x.is_contiguous(), p0, p1);
    NG_CUDA_CHECK_LAUNCH();
  });
  return out;
}

Tensor unary_backward(UnaryOp op, const Tensor& x, const Tensor& y, const Tensor& dout, double p0,
                      double p1) {
  check_pair(x, y, "cuda::unary_backward");
  check_pair(x, dout, "cuda::unary_backward");
  NG_CHECK(x.shape() == y.shape() && x.shape() == dout.shape(), "cuda::unary_backward",
           "expected x, y and dout of one shape, got ", shape_str(x.shape()), ", ", shape_str(y.shape()),
           " and ", shape_str(dout.shape()));
  Tensor dx = empty(x.shape(), x.dtype(), x.device());
  const int64_t n = dx.numel();
  if (n == 0) return dx;
  auto ix = make_indexer<3>(x.shape(), {x.strides(), y.strides(), dout.strides()}, "cuda::unary_backward");
  NG_CUDA_DISPATCH_FLOAT(x.dtype(), "cuda::unary_backward", [&]<typename T>() {
    unary_backward_kernel<T>
        <<<grid_for(n), kThreads>>>(op, dptr<T>(x), dptr<T>(y), dptr<T>(dout), dptr<T>(dx), n, ix, p0, p1);
    NG_CUDA_CHECK_LAUNCH();
  });
  return dx;
}

Tensor contiguous(const Tensor& src) {
  check_cuda(src, "cuda::contiguous", "src");
  if (src.is_contiguous()) return src;
  Tensor out = empty(src.shape(), src.dtype(), src.device());
  const int64_t n = out.numel();
  if (n == 0) return out;
  auto ix = make_indexer<1>(src.shape(), {src.strides()}, "cuda::contiguous");
  auto launch = [&]<typename Word>() {
    strided_copy_kernel<Word><<<grid_for(n), kThreads>>>(static_cast<const Word*>(src.raw_data()),
                                                         static_cast<Word*>(out.raw_data()), n, ix);
    NG_CUDA_CHECK_LAUNCH();
  };
  switch (dtype_size(src.dtype())) {
    case 2:
      launch.template operator()<uint16_t>();
      break;
    case 4:
      launch.template operator()<uint32_t>();
      break;
    default:
      launch.template operator()<uint64_t>();
      break;
  }
  return out;
}

Tensor cast(const Tensor& x, DType dtype) {
  check_cuda(x, "cuda::cast", "x");
  if (x.dtype() == dtype) return contiguous(x);
  NG_CHECK(is_floating(x.dtype()) && is_floating(dtype), "cuda::cast",
           "only floating dtypes convert on CUDA, got ", dtype_name(x.dtype()), " -> ", dtype_name(dtype));
  Tensor out = empty(x.shape(), dtype, x.device());
  const int64_t n = out.numel();
  if (n == 0) return out;
  auto ix = make_indexer<1>(x.shape(), {x.strides()}, "cuda::cast");
  NG_CUDA_DISPATCH_FLOAT(dtype, "cuda::cast", [&]<typename D>() {
    NG_CUDA_DISPATCH_FLOAT(x.dtype(), "cuda::cast", [&]<typename S>() {
      cast_kernel<D, S><<<grid_for(n), kThreads>>>(dptr<S>(x), dptr<D>(out), n, ix);
      NG_CUDA_CHECK_LAUNCH();
    });
  });
  return out;
}

void fill_(const Tensor& x, double value) {
  check_cuda(x, "cuda::fill_", "x");
  const int64_t n = x.numel();
  if (n == 0) return;
  auto ix = make_indexer<1>(x.shape(), {x.strides()}, "cuda::fill_");
  if (x.dtype() == DType::i64) {
    fill_kernel<int64_t><<<grid_for(n), kThreads>>>(dptr<int64_t>(x), int64_t(value), n, ix);
    NG_CUDA_CHECK_LAUNCH();
  } else {
    NG_CUDA_DISPATCH_FLOAT(x.dtype(), "cuda::fill_", [&]<typename T>() {
      // Convert on the host with the same rounding the CPU uses (one, from double), then hand the bits over.
      const T v = device_value<T>(value);
      fill_kernel<T><<<grid_for(n), kThreads>>>(dptr<T>(x), v, n, ix);
      NG_CUDA_CHECK_LAUNCH();
    });
  }
  x.bump_version();
}

}  // namespace ng::cuda

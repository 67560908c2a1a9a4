// GEMM on CUDA through cuBLAS (cublasGemmStridedBatchedEx). CPU twin: tensor/ops/matmul.cpp.
//
// cuBLAS is column-major; normgrad is row-major. A row-major (M x N) matrix C has the same bytes as the
// column-major (N x M) matrix C^T, and C^T = B^T A^T. So we ask cuBLAS for C^T = op(B) op(A) with the
// operands swapped, and each operand's "transposed or not" read off its strides:
//
//   a: (M, K) with strides (K, 1)  -> bytes = column-major A^T (K x M), ld K    -> op N
//      (M, K) with strides (1, M)  -> a transposed view: column-major A, ld M   -> op T
// (and the same for b with K, N). So a.t() costs nothing: it becomes CUBLAS_OP_T.
//
// Batches: a (batch..., M, K) and b (batch..., K, N) with equal batch dims, or b 2-D (the Linear case: one
// weight for every batch, stride 0). The batch dims must collapse to one stride (true for contiguous tensors
// and transposed views of them); anything else is made contiguous first.
#include <cublas_v2.h>
#include <dlfcn.h>

#include <limits>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "autograd/function.h"
#include "cuda/device_tensor.h"
#include "cuda/elementwise.h"
#include "cuda/ops.h"
#include "cuda/runtime.h"

namespace ng::cuda {

namespace {

// cuBLAS is loaded on the first GPU matmul (dlopen), not linked. The library is about 600 MB; linked, the
// dynamic loader mapped and relocated it at the start of every normgrad program, CPU-only runs included:
// exp1_gradient_vanishing's peak RSS was 281 MB with CUDA on against 66 MB with CUDA off (measured with
// /usr/bin/time, 2026-11-23). We call three of its functions; they are looked up once, here.
struct CublasApi {
  decltype(&cublasCreate_v2) create = nullptr;
  // Spelled out: in C++ the header overloads this name (an inline shim taking cudaDataType as the compute
  // type), so decltype(&cublasGemmStridedBatchedEx) is ambiguous. This is the exported one.
  cublasStatus_t (*gemm_strided_batched_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int m,
                                            int n, int k, const void* alpha, const void* A, cudaDataType,
                                            int lda, long long stride_a, const void* B, cudaDataType, int ldb,
                                            long long stride_b, const void* beta, void* C, cudaDataType,
                                            int ldc, long long stride_c, int batch, cublasComputeType_t,
                                            cublasGemmAlgo_t) = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
};

// Opens the library `name` (by soname, i.e. the loader's search path, then from the toolkit this was built
// against) and looks up the three functions into `api`. Returns "" on success, otherwise why not.
std::string open_cublas(const std::string& name, CublasApi& api) {
  void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
#ifdef NORMGRAD_CUDA_LIBRARY_DIR
  if (!lib)
    lib = dlopen((std::string(NORMGRAD_CUDA_LIBRARY_DIR) + "/" + name).c_str(), RTLD_NOW | RTLD_LOCAL);
#endif
  if (!lib) {
    const char* why = dlerror();
    return "cannot load " + name + " (" + (why ? why : "unknown reason") +
           "); the CUDA matmul needs cuBLAS from the CUDA toolkit on the library path";
  }
  api.create = reinterpret_cast<decltype(api.create)>(dlsym(lib, "cublasCreate_v2"));
  api.gemm_strided_batched_ex =
      reinterpret_cast<decltype(api.gemm_strided_batched_ex)>(dlsym(lib, "cublasGemmStridedBatchedEx"));
  api.status_string = reinterpret_cast<decltype(api.status_string)>(dlsym(lib, "cublasGetStatusString"));
  if (!api.create || !api.gemm_strided_batched_ex || !api.status_string)
    return name + " lacks cublasCreate_v2, cublasGemmStridedBatchedEx or cublasGetStatusString";
  return "";
}

const std::string kCublasName = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);

// The process's cuBLAS, opened once; `error_out` is "" when that worked.
const CublasApi& load_cublas(std::string& error_out) {
  static std::once_flag once;
  static CublasApi api;
  static std::string error;
  std::call_once(once, [] { error = open_cublas(kCublasName, api); });
  error_out = error;
  return api;
}

const CublasApi& cublas() {
  std::string error;
  const CublasApi& api = load_cublas(error);
  NG_CHECK(error.empty(), "cuda", error);
  return api;
}

void check_cublas(cublasStatus_t status, const char* call) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  fail("cuda", call, " failed: ", cublas().status_string(status), " (cuBLAS status ", int(status), ")");
}

// One cuBLAS handle per device, created on first use and kept for the life of the process.
cublasHandle_t handle_for(int device) {
  static std::mutex mutex;
  static std::vector<cublasHandle_t> handles;
  std::lock_guard<std::mutex> lock(mutex);
  if (size_t(device) >= handles.size()) handles.resize(size_t(device) + 1, nullptr);
  if (!handles[size_t(device)])
    check_cublas(cublas().create(&handles[size_t(device)]), "cublasCreate(&handle)");
  return handles[size_t(device)];
}

// How one operand is handed to cuBLAS.
struct Operand {
  Tensor t;                 // the tensor whose memory is used (maybe a contiguous copy)
  bool transposed = false;  // last two dims are a transposed view
  int64_t ld = 0;           // leading dimension (column-major)
  int64_t batch_stride = 0;
};

// rows x cols matrices over `batch` batches (batch dims already checked to collapse or be absent).
Operand prepare(const Tensor& x, int64_t batch) {
  const int64_t d = x.dim();
  const int64_t rows = x.size(d - 2), cols = x.size(d - 1);
  auto batch_stride_of = [&](const Tensor& t, int64_t& stride) {
    // the leading dims must collapse into one stride
    if (t.dim() == 2) {
      stride = 0;
      return true;
    }
    int64_t expected = t.stride(t.dim() - 3);
    for (int64_t k = t.dim() - 3; k >= 0; --k) {
      if (t.size(k) == 1) continue;
      if (t.stride(k) != expected) return false;
      expected *= t.size(k);
    }
    stride = t.stride(t.dim() - 3);
    return true;
  };
  Operand op;
  int64_t bs = 0;
  const bool row_major = x.stride(d - 1) == 1 && (rows == 1 || x.stride(d - 2) >= std::max<int64_t>(cols, 1));
  const bool col_major = x.stride(d - 2) == 1 && (cols == 1 || x.stride(d - 1) >= std::max<int64_t>(rows, 1));
  if ((row_major || col_major) && batch_stride_of(x, bs) && (batch == 1 || x.dim() == 2 || bs > 0)) {
    op.t = x;
    op.transposed = !row_major;
    op.ld = row_major ? std::max<int64_t>(x.stride(d - 2), std::max<int64_t>(cols, 1))
                      : std::max<int64_t>(x.stride(d - 1), std::max<int64_t>(rows, 1));
    op.batch_stride = bs;
    return op;
  }
  op.t = contiguous(x);
  op.transposed = false;
  op.ld = std::max<int64_t>(cols, 1);
  op.batch_stride = x.dim() == 2 ? 0 : rows * cols;
  return op;
}

}  // namespace

Tensor matmul_forward(const Tensor& a, const Tensor& b) {
  const char* op = "cuda::matmul";
  check_cuda(a, op, "a");
  check_cuda(b, op, "b");
  NG_CHECK(a.device() == b.device(), op, "expected both tensors on the same device, got ", a.device().str(),
           " and ", b.device().str());
  NG_CHECK(a.dtype() == b.dtype(), op, "dtype mismatch: got ", dtype_name(a.dtype()), " and ",
           dtype_name(b.dtype()));
  NG_CHECK(a.dim() >= 2 && b.dim() >= 2, op, "expected tensors of at least 2 dims, got ",
           shape_str(a.shape()), " and ", shape_str(b.shape()));
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  NG_CHECK(b.size(-2) == K, op, "inner dimensions differ: a ", shape_str(a.shape()), " and b ",
           shape_str(b.shape()));
  Shape batch_a(a.shape().begin(), a.shape().end() - 2), batch_b(b.shape().begin(), b.shape().end() - 2);
  NG_CHECK(b.dim() == 2 || batch_a == batch_b, op, "batch dims must be equal, or b 2-D, on CUDA; got a ",
           shape_str(a.shape()), " and b ", shape_str(b.shape()));
  const int64_t batch = numel(batch_a);
  Shape out_shape = batch_a;
  out_shape.push_back(M);
  out_shape.push_back(N);
  Tensor out = empty(out_shape, a.dtype(), a.device());
  if (out.numel() == 0) return out;
  if (K == 0) {
    fill_(out, 0.0);
    return out;
  }
  Operand A = prepare(a, batch), B = prepare(b, batch);
  // cuBLAS takes sizes, leading dimensions and the batch count as int: past INT_MAX they would wrap (K = 2^32
  // + 5 would multiply 5 columns) and give a wrong product with no error.
  for (const auto& [v, what] :
       {std::pair{M, "M"}, std::pair{N, "N"}, std::pair{K, "K"}, std::pair{batch, "the batch count"},
        std::pair{A.ld, "a's leading dimension"}, std::pair{B.ld, "b's leading dimension"}})
    NG_CHECK(v <= std::numeric_limits<int>::max(), op, what, " = ", v,
             " is past cuBLAS's int range (at most ", std::numeric_limits<int>::max(), "), for a ",
             shape_str(a.shape()), " @ ", shape_str(b.shape()));

  cudaDataType_t type;
  cublasComputeType_t compute;
  switch (a.dtype()) {
    case DType::f32:
      type = CUDA_R_32F, compute = CUBLAS_COMPUTE_32F;
      break;
    case DType::f64:
      type = CUDA_R_64F, compute = CUBLAS_COMPUTE_64F;
      break;
    case DType::f16:
      type = CUDA_R_16F, compute = CUBLAS_COMPUTE_32F;
      break;
    case DType::bf16:
      type = CUDA_R_16BF, compute = CUBLAS_COMPUTE_32F;
      break;
    default:
      fail(op, "expected a floating dtype, got ", dtype_name(a.dtype()));
  }
  const double one_d = 1.0, zero_d = 0.0;
  const float one_f = 1.0f, zero_f = 0.0f;
  const bool f64 = a.dtype() == DType::f64;
  cublasHandle_t h = handle_for(a.device().index);
  // C^T (N x M, ld N) = op(B) (N x K) * op(A) (K x M)
  check_cublas(cublas().gemm_strided_batched_ex(
                   h, B.transposed ? CUBLAS_OP_T : CUBLAS_OP_N, A.transposed ? CUBLAS_OP_T : CUBLAS_OP_N,
                   int(N), int(M), int(K), f64 ? static_cast<const void*>(&one_d) : &one_f, B.t.raw_data(),
                   type, int(B.ld), B.batch_stride, A.t.raw_data(), type, int(A.ld), A.batch_stride,
                   f64 ? static_cast<const void*>(&zero_d) : &zero_f, out.raw_data(), type, int(N), M * N,
                   int(batch), compute, CUBLAS_GEMM_DEFAULT),
               "cublasGemmStridedBatchedEx");
  return out;
}

std::string cublas_load_error(const std::string& soname) {
  std::string error;
  if (soname.empty() || soname == kCublasName) {
    load_cublas(error);
  } else {
    CublasApi scratch;  // another library, for the tests: opened and checked, not used
    error = open_cublas(soname, scratch);
  }
  return error;
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  Tensor c = matmul_forward(a, b);
  if (needs_grad({a, b})) {
    const bool need_a = a.requires_grad(), need_b = b.requires_grad();
    const bool b_shared = b.dim() == 2 && a.dim() > 2;
    SavedTensor sa(need_b ? a.detach() : Tensor(), "cuda::matmul"),
        sb(need_a ? b.detach() : Tensor(), "cuda::matmul");
    const int64_t K = a.size(-1), N = b.size(-1);
    attach(c, "CudaMatmulBackward", {a, b}, [=](const Tensor& dc) -> std::vector<Tensor> {
      Tensor dcc = contiguous(dc);
      // dA = dC @ B^T (B^T is a view: cuBLAS reads it transposed)
      Tensor da = need_a ? matmul_forward(dcc, sb.unpack().transpose(-2, -1)) : Tensor();
      Tensor db;
      if (need_b) {
        Tensor av = sa.unpack();
        if (b_shared)  // one B for every batch: dB = sum_batch A^T dC = (A as (batch*M, K))^T (dC as
                       // (batch*M, N))
          db = matmul_forward(contiguous(av).reshape({-1, K}).transpose(0, 1), dcc.reshape({-1, N}));
        else
          db = matmul_forward(av.transpose(-2, -1), dcc);
      }
      return {da, db};
    });
  }
  return c;
}

}  // namespace ng::cuda

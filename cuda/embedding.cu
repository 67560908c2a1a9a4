// Embedding on CUDA: a gather forward and a deterministic scatter-add backward. CPU twin:
// tensor/ops/index.cpp.
//
// Forward: out[i, c] = weight[ids[i], c], one thread per output element.
// Backward: dweight[v, c] = sum over positions i with ids[i] == v of dout[i, c]. Adding with atomicAdd would
// make the order (and so the float result) change from run to run. Instead the ids are sorted by (id,
// position) on the host (a counting sort, N integers: cheap next to the N x C gradient), giving for each used
// id the list of its positions in increasing order; then one block per used id walks its list in that order,
// its threads covering the C columns. Every sum is taken in position order: the same bits every run, and the
// same order as the CPU's loop over positions.
#include <vector>

#include "autograd/function.h"
#include "cuda/common.cuh"
#include "cuda/device_tensor.h"
#include "cuda/ops.h"

namespace ng::cuda {

namespace {

template <typename T>
__global__ void embedding_forward_kernel(const T* w, const int64_t* ids, T* out, int64_t N, int64_t C) {
  const int64_t total = N * C;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t n = i / C, c = i - n * C;
    out[i] = w[ids[n] * C + c];
  }
}

// Block u handles used id ids_sorted[u]: positions order[starts[u] .. starts[u+1]).
template <typename T>
__global__ void embedding_backward_kernel(const T* dout, const int64_t* used_ids, const int64_t* starts,
                                          const int64_t* order, T* dw, int64_t C) {
  using A = acc_t<T>;
  const int64_t u = blockIdx.x;
  const int64_t v = used_ids[u], p0 = starts[u], p1 = starts[u + 1];
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    A s = 0;
    for (int64_t p = p0; p < p1; ++p) s += to_acc(dout[order[p] * C + c]);
    dw[v * C + c] = from_acc<T>(s);
  }
}

}  // namespace

Tensor embedding_forward(const Tensor& weight, const Tensor& ids) {
  const char* op = "cuda::embedding";
  check_cuda(weight, op, "weight");
  check_cuda(ids, op, "ids");
  NG_CHECK(weight.device() == ids.device(), op, "expected weight and ids on the same device, got ",
           weight.device().str(), " and ", ids.device().str());
  NG_CHECK(weight.dim() == 2, op, "expected weight (V, C), got ", shape_str(weight.shape()));
  NG_CHECK(ids.dtype() == DType::i64, op, "expected i64 ids, got ", dtype_name(ids.dtype()));
  const int64_t V = weight.size(0), C = weight.size(1), N = ids.numel();
  // Ids out of range would read outside the table: check on the host (one copy of N integers).
  Tensor ids_host = ids.to(Device::cpu()).contiguous();
  const int64_t* ph = ids_host.data<int64_t>();
  for (int64_t i = 0; i < N; ++i)
    NG_CHECK(ph[i] >= 0 && ph[i] < V, op, "id ", ph[i], " at position ", i, " is out of range for ", V,
             " embeddings");
  Shape out_shape = ids.shape();
  out_shape.push_back(C);
  Tensor out = empty(out_shape, weight.dtype(), weight.device());
  if (N * C == 0) return out;
  Tensor wc = contiguous(weight.detach()), idc = contiguous(ids);
  NG_CUDA_DISPATCH_FLOAT(weight.dtype(), op, [&]<typename T>() {
    const int64_t grid = std::clamp<int64_t>(ceil_div(N * C, 256), 1, 65535 * 8);
    embedding_forward_kernel<T><<<unsigned(grid), 256>>>(dptr<T>(wc), dptr<int64_t>(idc), dptr<T>(out), N, C);
    NG_CUDA_CHECK_LAUNCH();
  });
  return out;
}

Tensor embedding_backward(const Tensor& dout, const Tensor& ids, int64_t V) {
  const char* op = "cuda::embedding_backward";
  check_cuda(dout, op, "dout");
  const int64_t N = ids.numel();
  NG_CHECK(dout.dim() == 2 && dout.size(0) == N, op, "expected dout of shape (", N, ", C) for ", N,
           " ids, got ", shape_str(dout.shape()));
  const int64_t C = dout.size(1);
  Tensor dw = zeros({V, C}, dout.dtype(), dout.device());
  if (N == 0 || C == 0) return dw;

  // Counting sort of positions by id on the host: used ids ascending, each with its positions ascending.
  Tensor ids_host = ids.to(Device::cpu()).contiguous();
  const int64_t* id = ids_host.data<int64_t>();
  std::vector<int64_t> count(size_t(V), 0);
  for (int64_t i = 0; i < N; ++i) {
    // The forward checked these; this entry is public too, and a bad id would write past `count`.
    NG_CHECK(id[i] >= 0 && id[i] < V, op, "id ", id[i], " at position ", i, " is out of range for ", V,
             " embeddings");
    ++count[size_t(id[i])];
  }
  std::vector<int64_t> used, starts{0}, first(size_t(V), 0);
  for (int64_t v = 0; v < V; ++v)
    if (count[size_t(v)] > 0) {
      first[size_t(v)] = starts.back();
      used.push_back(v);
      starts.push_back(starts.back() + count[size_t(v)]);
    }
  std::vector<int64_t> order(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; ++i) order[size_t(first[size_t(id[i])]++)] = i;

  const Device dev = dout.device();
  Tensor used_d = from_vector(used, {int64_t(used.size())}).to(dev);
  Tensor starts_d = from_vector(starts, {int64_t(starts.size())}).to(dev);
  Tensor order_d = from_vector(order, {N}).to(dev);
  Tensor dc = contiguous(dout.detach());
  NG_CUDA_DISPATCH_FLOAT(dout.dtype(), op, [&]<typename T>() {
    embedding_backward_kernel<T><<<unsigned(used.size()), 256>>>(
        dptr<T>(dc), dptr<int64_t>(used_d), dptr<int64_t>(starts_d), dptr<int64_t>(order_d), dptr<T>(dw), C);
    NG_CUDA_CHECK_LAUNCH();
  });
  return dw;
}

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  Tensor out = embedding_forward(weight, ids);
  if (needs_grad({weight})) {
    const int64_t V = weight.size(0), C = weight.size(1);
    SavedTensor sids(ids, "cuda::embedding");
    attach(out, "CudaEmbeddingBackward", {weight}, [=](const Tensor& dout) -> std::vector<Tensor> {
      // (N, C), not (-1, C): with C = 0 the -1 could be anything, and reshape refuses it.
      const Tensor ids_saved = sids.unpack();
      return {embedding_backward(contiguous(dout).reshape({ids_saved.numel(), C}), ids_saved, V)};
    });
  }
  return out;
}

}  // namespace ng::cuda

#include "nn/embedding.h"

#include "autograd/grad_mode.h"
#include "tensor/ops/index.h"

namespace ng::nn {

Embedding::Embedding(int64_t V, int64_t C, Generator& gen, DType dtype)
    : num_embeddings(V), embedding_dim(C) {
  NG_CHECK(V > 0 && C > 0, "Embedding", "expected positive num_embeddings and embedding_dim, got ", V,
           " and ", C);
  NG_CHECK(is_floating(dtype), "Embedding", "expected a floating dtype, got ", dtype_name(dtype));
  weight = register_parameter("weight", empty({V, C}, dtype));
  NoGradGuard no_grad;
  normal_(weight, 0.0, 1.0, gen);  // PyTorch: nn.init.normal_(weight)
}

Tensor Embedding::forward(const Tensor& ids) {
  return embedding(weight, ids);
}

}  // namespace ng::nn

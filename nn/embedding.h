// nn::Embedding: a lookup table, row ids[i] of weight for each id.
//
//   ids: i64, any shape (*)  ->  out: (*, C);   weight: (V, C), initialized N(0, 1) as in PyTorch.
//
// The lookup and its backward (scatter-add of dout rows into dweight) are ng::embedding
// (tensor/ops/index.h); this module only owns the weight.
#pragma once

#include "nn/module.h"
#include "tensor/random.h"

namespace ng::nn {

class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, Generator& gen = default_generator(),
            DType dtype = DType::f32);

  Tensor forward(const Tensor& ids) override;
  std::string type_name() const override { return "Embedding"; }

  int64_t num_embeddings, embedding_dim;
  Tensor weight;  // (V, C)
};

}  // namespace ng::nn

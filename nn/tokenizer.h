// nn::CharTokenizer: one token per byte, the vocabulary being the distinct bytes of a training corpus.
//
//   vocab = sorted distinct bytes of the corpus        e.g. "hello" -> ['e', 'h', 'l', 'o']
//   encode: byte -> its index in vocab                 "hole" -> [1, 3, 2, 0]
//   decode: index -> byte
//
// A byte that is not in the vocabulary is an ng::Error at encode time (never silently mapped to some other
// token): a model trained on one corpus is asked about text it has never seen. The vocab is part of the
// model's state; checkpoints store it (nn/checkpoint.h) as the i64 tensor of its byte values.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace ng::nn {

class CharTokenizer {
 public:
  CharTokenizer() = default;
  // The distinct bytes of `corpus`, sorted. An empty corpus is an error.
  static CharTokenizer from_corpus(const std::string& corpus);
  // From an explicit list of byte values (0..255), distinct, in token order (what a checkpoint stores).
  static CharTokenizer from_vocab(const std::vector<int64_t>& bytes);

  int64_t vocab_size() const { return int64_t(vocab_.size()); }
  const std::string& vocab() const { return vocab_; }  // token i is byte vocab()[i]
  std::vector<int64_t> vocab_bytes() const;

  std::vector<int64_t> encode(const std::string& text) const;
  std::string decode(const std::vector<int64_t>& ids) const;
  // encode as a 1-D i64 tensor
  Tensor encode_tensor(const std::string& text) const;

  bool operator==(const CharTokenizer& o) const { return vocab_ == o.vocab_; }

 private:
  std::string vocab_;
  std::array<int32_t, 256> index_{};  // byte -> token id, -1 when absent
};

}  // namespace ng::nn

#include "nn/tokenizer.h"

#include <algorithm>

namespace ng::nn {

namespace {
std::string printable(unsigned char c) {
  if (c >= 32 && c < 127 && c != '\'') return std::string("'") + char(c) + "'";
  return "byte " + std::to_string(int(c));
}
}  // namespace

CharTokenizer CharTokenizer::from_corpus(const std::string& corpus) {
  NG_CHECK(!corpus.empty(), "CharTokenizer", "cannot build a vocabulary from an empty corpus");
  std::array<bool, 256> seen{};
  for (unsigned char c : corpus) seen[c] = true;
  std::vector<int64_t> bytes;
  for (int b = 0; b < 256; ++b)
    if (seen[size_t(b)]) bytes.push_back(b);
  return from_vocab(bytes);
}

CharTokenizer CharTokenizer::from_vocab(const std::vector<int64_t>& bytes) {
  NG_CHECK(!bytes.empty(), "CharTokenizer", "the vocabulary is empty");
  CharTokenizer tok;
  tok.index_.fill(-1);
  for (size_t i = 0; i < bytes.size(); ++i) {
    const int64_t b = bytes[i];
    NG_CHECK(b >= 0 && b < 256, "CharTokenizer", "vocabulary entry ", i, " is ", b,
             ", expected a byte 0..255");
    NG_CHECK(tok.index_[size_t(b)] < 0, "CharTokenizer", "vocabulary entry ", i, " (byte ", b,
             ") appears twice");
    tok.index_[size_t(b)] = int32_t(i);
    tok.vocab_.push_back(char(b));
  }
  return tok;
}

std::vector<int64_t> CharTokenizer::vocab_bytes() const {
  std::vector<int64_t> out;
  for (unsigned char c : vocab_) out.push_back(c);
  return out;
}

std::vector<int64_t> CharTokenizer::encode(const std::string& text) const {
  NG_CHECK(!vocab_.empty(), "CharTokenizer::encode",
           "the tokenizer has no vocabulary, expected one built by from_corpus() or from_vocab()");
  std::vector<int64_t> ids;
  ids.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    const int32_t id = index_[c];
    NG_CHECK(id >= 0, "CharTokenizer::encode", printable(c), " at position ", i,
             " is not in the vocabulary (", vocab_.size(), " tokens)");
    ids.push_back(id);
  }
  return ids;
}

std::string CharTokenizer::decode(const std::vector<int64_t>& ids) const {
  // as in encode: "out of range [0, 0)" would not say why
  NG_CHECK(!vocab_.empty(), "CharTokenizer::decode",
           "the tokenizer has no vocabulary, expected one built by from_corpus() or from_vocab()");
  std::string out;
  out.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    NG_CHECK(ids[i] >= 0 && ids[i] < vocab_size(), "CharTokenizer::decode", "token ", ids[i], " at position ",
             i, " is out of range [0, ", vocab_size(), ")");
    out.push_back(vocab_[size_t(ids[i])]);
  }
  return out;
}

Tensor CharTokenizer::encode_tensor(const std::string& text) const {
  std::vector<int64_t> ids = encode(text);
  return from_vector(ids, Shape{int64_t(ids.size())});
}

}  // namespace ng::nn

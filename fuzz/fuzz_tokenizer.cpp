// libFuzzer target: nn::CharTokenizer on arbitrary bytes.
//
// The input is split at its first 0xFF byte (or in half): the first part is the corpus, the second the text.
// Contract under test (nn/tokenizer.h): building, encoding and decoding either succeed or throw ng::Error,
// and whenever encode succeeds, decode(encode(text)) == text. The same bytes read as a vocabulary list
// (what a checkpoint stores) either build a tokenizer or throw ng::Error; arbitrary token ids either decode
// or throw ng::Error.
#include <cstdint>
#include <string>
#include <vector>

#include "nn/tokenizer.h"
#include "tensor/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  size_t cut = input.find('\xff');
  if (cut == std::string::npos) cut = size / 2;
  const std::string corpus = input.substr(0, cut);
  const std::string text = cut < size ? input.substr(cut + 1) : std::string();

  // 1. Corpus -> vocabulary -> encode/decode round trip.
  try {
    ng::nn::CharTokenizer tok = ng::nn::CharTokenizer::from_corpus(corpus);
    if (tok.vocab_size() < 1 || tok.vocab_size() > 256) __builtin_trap();
    if (tok.decode(tok.encode(corpus)) != corpus) __builtin_trap();  // the corpus always encodes
    try {
      if (tok.decode(tok.encode(text)) != text) __builtin_trap();
    } catch (const ng::Error&) {
      // text holds a byte the corpus does not: refused with a message
    }
    // Arbitrary ids (the text's bytes, signed, so negatives appear too).
    std::vector<int64_t> ids;
    for (char c : text) ids.push_back(int64_t(static_cast<signed char>(c)));
    try {
      (void)tok.decode(ids);
    } catch (const ng::Error&) {
    }
    // The vocabulary as a checkpoint stores it builds the same tokenizer.
    if (!(ng::nn::CharTokenizer::from_vocab(tok.vocab_bytes()) == tok)) __builtin_trap();
  } catch (const ng::Error&) {
    // empty corpus
  }

  // 2. The raw bytes as a vocabulary list (as read back from a possibly corrupt checkpoint).
  std::vector<int64_t> vocab;
  for (size_t i = 0; i + 1 < size; i += 2) vocab.push_back(int64_t(int16_t(data[i] | (data[i + 1] << 8))));
  try {
    ng::nn::CharTokenizer tok = ng::nn::CharTokenizer::from_vocab(vocab);
    if (tok.vocab_size() != int64_t(vocab.size())) __builtin_trap();
  } catch (const ng::Error&) {
  }
  return 0;
}

// libFuzzer target: nn::CharTokenizer on arbitrary bytes.
//
// The input is split at its first 0xFF byte (or in half): the first part is the corpus, the second the text.
// Contract under test (nn/tokenizer.h): building, encoding and decoding either succeed or throw ng::Error,
// and whenever encode succeeds, decode(encode(text)) == text. The same bytes read as a vocabulary list
// (what a checkpoint stores) either build a tokenizer or throw ng::Error; arbitrary token ids either decode
// or throw ng::Error (a negative one always throws).
#include <cstdint>
#include <optional>
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

  // 1. Corpus -> vocabulary -> encode/decode round trip. Only building may throw ng::Error (an empty
  // corpus); every call after it runs outside that catch, so a wrong ng::Error there reaches libFuzzer.
  std::optional<ng::nn::CharTokenizer> built;
  try {
    built.emplace(ng::nn::CharTokenizer::from_corpus(corpus));
  } catch (const ng::Error&) {
    if (!corpus.empty()) __builtin_trap();  // refused only for an empty corpus
  }
  if (built) {
    const ng::nn::CharTokenizer& tok = *built;
    if (tok.vocab_size() < 1 || tok.vocab_size() > 256) __builtin_trap();
    if (tok.decode(tok.encode(corpus)) != corpus) __builtin_trap();  // the corpus always encodes
    try {
      if (tok.decode(tok.encode(text)) != text) __builtin_trap();
    } catch (const ng::Error&) {
      // text holds a byte the corpus does not: refused with a message
    }
    // Arbitrary ids: the text's bytes as unsigned values 0..255 (every id a vocabulary can have, and ids
    // past a smaller one). They decode, one byte per id, exactly when every one is below vocab_size. Then one
    // negative id, always refused.
    std::vector<int64_t> ids;
    bool all_in_vocab = true;
    for (char c : text) {
      ids.push_back(int64_t(static_cast<unsigned char>(c)));
      all_in_vocab = all_in_vocab && ids.back() < tok.vocab_size();
    }
    try {
      if (tok.decode(ids).size() != ids.size() || !all_in_vocab) __builtin_trap();
    } catch (const ng::Error&) {
      if (all_in_vocab) __builtin_trap();
    }
    try {
      (void)tok.decode(std::vector<int64_t>{-1});
      __builtin_trap();  // a negative id must be refused
    } catch (const ng::Error&) {
    }
    // The vocabulary as a checkpoint stores it builds the same tokenizer.
    if (!(ng::nn::CharTokenizer::from_vocab(tok.vocab_bytes()) == tok)) __builtin_trap();
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

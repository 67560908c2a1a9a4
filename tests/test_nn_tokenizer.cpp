// CharTokenizer: vocab from a corpus, round trip, unknown bytes and bad ids are errors.
#include <gtest/gtest.h>

#include "normgrad.h"
#include "ops_test_util.h"

using namespace ng;
using ng::testing::expect_error;

TEST(CharTokenizer, VocabIsSortedDistinctBytesAndRoundTrips) {
  auto tok = nn::CharTokenizer::from_corpus("hello world");
  EXPECT_EQ(tok.vocab(), " dehlorw");
  EXPECT_EQ(tok.vocab_size(), 8);
  EXPECT_EQ(tok.encode("hole"), (std::vector<int64_t>{3, 5, 4, 2}));
  EXPECT_EQ(tok.decode(tok.encode("lower word")), "lower word");
  Tensor t = tok.encode_tensor("od");
  EXPECT_EQ(t.dtype(), DType::i64);
  EXPECT_EQ(t.to_vector<int64_t>(), (std::vector<int64_t>{5, 1}));
  auto again = nn::CharTokenizer::from_vocab(tok.vocab_bytes());
  EXPECT_TRUE(again == tok);
  // Any byte value works, including non-ASCII and NUL.
  std::string odd("a\0\xff", 3);
  auto bin = nn::CharTokenizer::from_corpus(odd);
  EXPECT_EQ(bin.vocab_size(), 3);
  EXPECT_EQ(bin.decode(bin.encode(odd)), odd);
}

TEST(CharTokenizer, UnknownByteAndBadIdAreErrors) {
  auto tok = nn::CharTokenizer::from_corpus("abc");
  try {
    tok.encode("abz");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "CharTokenizer::encode: 'z' at position 2 is not in the vocabulary (3 tokens)"),
              std::string::npos)
        << e.what();
  }
  try {
    tok.encode(std::string("a\n"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("byte 10 at position 1"), std::string::npos) << e.what();
  }
  try {
    tok.decode({0, 3});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token 3 at position 1 is out of range [0, 3)"), std::string::npos)
        << e.what();
  }
  expect_error([] { nn::CharTokenizer::from_corpus(""); },
               {"CharTokenizer: cannot build a vocabulary from an empty corpus"});
  expect_error(
      [] {
        nn::CharTokenizer::from_vocab({97, 97});
      },
      {"CharTokenizer: vocabulary entry 1 (byte 97) appears twice"});
  expect_error([] { nn::CharTokenizer::from_vocab({300}); },
               {"CharTokenizer: vocabulary entry 0 is 300, expected a byte 0..255"});
  expect_error(
      [] { nn::CharTokenizer().encode("a"); },
      {"CharTokenizer::encode: the tokenizer has no vocabulary, expected one built by from_corpus()"});
  expect_error(
      [] { nn::CharTokenizer().decode({0}); },
      {"CharTokenizer::decode: the tokenizer has no vocabulary, expected one built by from_corpus()"});
}

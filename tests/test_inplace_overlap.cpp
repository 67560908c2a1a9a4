// In-place writes through views that share memory (tensor.h, "In-place writes and memory that is shared"):
// a source that overlaps the destination is read in full first, and a destination with two elements at
// one address (an expanded view) is refused by copy_, add_, mul_ and the random fills, and taken by fill_.
// Found by bench/view_sweep_vs_pytorch.py: before, x[2::2].copy_(x[:-2:2]) smeared x[0] over the row and
// mul_ on an expanded view multiplied its one value once per element.
#include "ops_test_util.h"

using namespace ng;
using namespace ng::testing;

namespace {

std::vector<double> values(const Tensor& t) {
  return t.contiguous().to_vector<double>();
}

}  // namespace

TEST(InPlaceOverlap, ShiftedCopyReadsTheSourceFirst) {
  for (DType dt : {DType::f32, DType::f64, DType::bf16, DType::i64}) {
    // x[1:] = x[:-1]: an element-by-element loop from the front read x[i - 1] after writing it
    Tensor x = arange(8, DType::i64).to(dt);
    x.slice(0, 1, 8).copy_(x.slice(0, 0, 7));
    EXPECT_EQ(values(x), (std::vector<double>{0, 0, 1, 2, 3, 4, 5, 6})) << dtype_name(dt);
    // and the other way (a loop from the front happened to be right here; it must stay right)
    Tensor y = arange(8, DType::i64).to(dt);
    y.slice(0, 0, 7).copy_(y.slice(0, 1, 8));
    EXPECT_EQ(values(y), (std::vector<double>{1, 2, 3, 4, 5, 6, 7, 7})) << dtype_name(dt);
    // strided (the contiguous copies above take memmove, which handles overlap itself; these do not):
    // x[2::2] = x[0:10:2]
    Tensor z = arange(12, DType::i64).to(dt);
    z.slice(0, 2, 12, 2).copy_(z.slice(0, 0, 10, 2));
    EXPECT_EQ(values(z), (std::vector<double>{0, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11})) << dtype_name(dt);
  }
}

TEST(InPlaceOverlap, TransposeIntoItself) {
  // m = m^T through a view of the same memory: element (0, 1) was read after (1, 0) was written
  Tensor m = arange(9, DType::i64).to(DType::f32).reshape({3, 3});
  m.copy_(m.t());
  EXPECT_EQ(values(m), (std::vector<double>{0, 3, 6, 1, 4, 7, 2, 5, 8}));
}

TEST(InPlaceOverlap, AddReadsTheSourceFirst) {
  for (DType dt : {DType::f32, DType::f64}) {
    // x[1:] += x[:-1] (a prefix step), with alpha
    Tensor x = arange(6, DType::i64).to(dt);
    Tensor dst = x.slice(0, 1, 6);
    add_(dst, x.slice(0, 0, 5), 2.0);
    EXPECT_EQ(values(x), (std::vector<double>{0, 1, 4, 7, 10, 13})) << dtype_name(dt);
    // a source of one element inside the destination, broadcast over it: every element adds the OLD value
    Tensor z = arange(4, DType::i64).to(dt);
    Tensor all = z.slice(0, 0, 4);
    add_(all, z.slice(0, 2, 3));
    EXPECT_EQ(values(z), (std::vector<double>{2, 3, 4, 5})) << dtype_name(dt);
  }
  // the very same elements as source: x += x, each element read then written in place
  Tensor s = arange(4, DType::i64).to(DType::f32);
  add_(s, s);
  EXPECT_EQ(values(s), (std::vector<double>{0, 2, 4, 6}));
  // views of one storage that do not meet are left as they are (even and odd elements)
  Tensor e = arange(6, DType::i64).to(DType::f64);
  Tensor evens = e.slice(0, 0, 6, 2);
  add_(evens, e.slice(0, 1, 6, 2));
  EXPECT_EQ(values(e), (std::vector<double>{1, 1, 5, 3, 9, 5}));
}

TEST(InPlaceOverlap, ExpandedDestinationIsRefusedExceptByFill) {
  Tensor base = ones({1, 4});
  Tensor wide = base.expand({3, 4});  // three rows, one in memory
  const char* msg = "has stride 0 (an expanded view), so 3 of its elements are one value in memory";
  expect_error([&] { mul_(wide, 2.0); }, {"mul_: the tensor written in place has shape (3, 4)", msg});
  expect_error([&] { add_(wide, ones({3, 4})); }, {"add_:", msg});
  expect_error([&] { wide.copy_(ones({3, 4})); }, {"copy_:", msg});
  Generator g(1);
  expect_error([&] { normal_(wide, 0.0, 1.0, g); }, {"normal_:", msg});
  expect_error([&] { uniform_(wide, 0.0, 1.0, g); }, {"uniform_:", msg});
  // nothing was written by the refused calls
  EXPECT_EQ(values(base), std::vector<double>(4, 1.0));
  // fill_ stores one value, so every write to the shared address agrees (PyTorch takes it too)
  wide.fill_(5.0);
  EXPECT_EQ(values(base), std::vector<double>(4, 5.0));
  // a size-1 dim of stride 0 is one element, and an empty expanded view writes nothing: not refused
  Tensor one = zeros({4}).unsqueeze(0).expand({1, 4});
  mul_(one, 3.0);
  Tensor none = zeros({0, 1}).expand({0, 5});
  mul_(none, 3.0);
  none.copy_(ones({5}));
}

// fill_ of an expanded view writes each element of memory once. It wrote every position: the same address
// from several threads at once (a data race, which ThreadSanitizer reported on (1, 16) -> (100000, 16)), and
// 2^42 writes for the view below, hours of work for the 4 values in memory.
TEST(InPlaceOverlap, FillOfAnExpandedViewWritesEachElementOnce) {
  Tensor base = zeros({1, 4});
  Tensor wide = base.expand({int64_t(1) << 40, 4});
  wide.fill_(2.0);
  EXPECT_EQ(values(base), std::vector<double>(4, 2.0));
  // a view with stride 0 on an inner dim, and the other elements of the storage left as they were
  Tensor m = zeros({3, 2}, DType::f64);
  Tensor col = m.narrow(1, 1, 1).expand({3, 5});
  const uint64_t before = m.version();
  col.fill_(-1.5);
  EXPECT_EQ(values(m), (std::vector<double>{0, -1.5, 0, -1.5, 0, -1.5}));
  EXPECT_GT(m.version(), before);
}

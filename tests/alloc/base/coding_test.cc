#include "alloc/base/coding.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace cudafs {
namespace {

TEST(CodingTest, VarintsAndBytesRoundTrip) {
  const std::vector<uint64_t> numbers = {0,       1,          127,       128,
                                         16383,   16384,      1u << 31,  uint64_t{1} << 63,
                                         ~0ull};
  std::string out;
  for (const uint64_t n : numbers) PutVarint(&out, n);
  PutBytes(&out, "");
  PutBytes(&out, std::string("a\0b", 3));
  absl::string_view in = out;
  for (const uint64_t n : numbers) {
    uint64_t got = 0;
    ASSERT_TRUE(GetVarint(&in, &got));
    EXPECT_EQ(got, n);
  }
  absl::string_view bytes;
  ASSERT_TRUE(GetBytes(&in, &bytes));
  EXPECT_EQ(bytes, "");
  ASSERT_TRUE(GetBytes(&in, &bytes));
  EXPECT_EQ(bytes, std::string("a\0b", 3));
  EXPECT_TRUE(in.empty());
}

TEST(CodingTest, VarintsAtOnceMatchOneByOne) {
  std::string one_by_one = "x";
  for (const uint64_t n : std::initializer_list<uint64_t>{0, 127, 128, ~0ull, uint64_t{1} << 40}) {
    PutVarint(&one_by_one, n);
  }
  std::string at_once = "x";
  PutVarints(&at_once, {0, 127, 128, ~0ull, uint64_t{1} << 40});
  EXPECT_EQ(at_once, one_by_one);
  std::string widest;
  PutVarints(&widest, {~0ull, ~0ull, ~0ull, ~0ull, ~0ull, ~0ull, ~0ull, ~0ull, ~0ull, ~0ull, ~0ull,
                       ~0ull, ~0ull, ~0ull, ~0ull, ~0ull});
  EXPECT_EQ(widest.size(), kMaxVarintsAtOnce * kMaxVarintBytes);
  char encoded[5 * kMaxVarintBytes];
  const size_t used = EncodeVarints(encoded, {0, 127, 128, ~0ull, uint64_t{1} << 40});
  EXPECT_EQ(std::string(encoded, used), one_by_one.substr(1));
}

// In place, what PutBytes writes: lengths of one byte and longer, after
// bytes already in the output, and nested.
TEST(CodingTest, BytesWrittenInPlaceMatchPutBytes) {
  for (const size_t size : {size_t{0}, size_t{1}, size_t{127}, size_t{128}, size_t{300},
                            size_t{16383}, size_t{16384}, size_t{70000}}) {
    const std::string bytes(size, 'q');
    std::string expected = "head";
    PutBytes(&expected, bytes);
    PutVarint(&expected, 7);
    std::string got = "head";
    PutBytesOf(&got, [&](std::string* out) { out->append(bytes); });
    PutVarint(&got, 7);
    EXPECT_EQ(got, expected) << size;
  }
  std::string inner;
  PutBytes(&inner, std::string(200, 'i'));
  PutVarint(&inner, 1u << 20);
  std::string expected;
  PutBytes(&expected, inner);
  std::string got;
  PutBytesOf(&got, [](std::string* out) {
    PutBytesOf(out, [](std::string* deeper) { deeper->append(200, 'i'); });
    PutVarint(out, 1u << 20);
  });
  EXPECT_EQ(got, expected);
}

TEST(CodingTest, TruncatedOrOverlongInputIsRefused) {
  std::string out;
  PutVarint(&out, ~0ull);
  uint64_t value = 0;
  for (size_t cut = 0; cut < out.size(); ++cut) {
    absl::string_view in(out.data(), cut);
    EXPECT_FALSE(GetVarint(&in, &value)) << cut;
  }
  // Eleven bytes, or a tenth byte beyond bit 63.
  absl::string_view eleven("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11);
  EXPECT_FALSE(GetVarint(&eleven, &value));
  absl::string_view too_high("\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02", 10);
  EXPECT_FALSE(GetVarint(&too_high, &value));

  std::string bytes;
  PutBytes(&bytes, "hello");
  absl::string_view short_bytes(bytes.data(), bytes.size() - 1);
  absl::string_view got;
  EXPECT_FALSE(GetBytes(&short_bytes, &got));

  std::string big;
  PutVarint(&big, 300);
  absl::string_view in = big;
  EXPECT_FALSE(GetVarintUpTo(&in, 299, &value));
}

}  // namespace
}  // namespace cudafs

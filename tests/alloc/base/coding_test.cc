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

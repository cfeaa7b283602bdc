// Abstract socket addresses (fs/wire/abstract_address.h).
#include "fs/wire/abstract_address.h"

#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "gtest/gtest.h"

namespace cudafs {
namespace {

TEST(AbstractAddressTest, ANameIsItsBytesAfterANul) {
  const std::optional<AbstractAddress> address = AbstractAddress::Of("cudafs-1-ab");
  ASSERT_TRUE(address.has_value());
  EXPECT_EQ(address->address.sun_family, AF_UNIX);
  EXPECT_EQ(address->address.sun_path[0], '\0');
  EXPECT_EQ(std::string(address->address.sun_path + 1, 11), "cudafs-1-ab");
  EXPECT_EQ(address->length, offsetof(sockaddr_un, sun_path) + 12);
}

TEST(AbstractAddressTest, EmptyAndTooLongNamesHaveNone) {
  EXPECT_FALSE(AbstractAddress::Of("").has_value());
  EXPECT_TRUE(AbstractAddress::Of(std::string(AbstractAddress::kMaxName, 'n')).has_value());
  EXPECT_FALSE(AbstractAddress::Of(std::string(AbstractAddress::kMaxName + 1, 'n')).has_value());
}

// What one end binds, the other reaches: the length counts the name's
// bytes only, so a name that is a prefix of another is another address.
TEST(AbstractAddressTest, BoundAddressesAreReachedAndPrefixesAreNot) {
  const std::string name = "cudafs-abstract-address-test-" + std::to_string(getpid());
  const std::optional<AbstractAddress> address = AbstractAddress::Of(name);
  const std::optional<AbstractAddress> prefix =
      AbstractAddress::Of(name.substr(0, name.size() - 1));
  ASSERT_TRUE(address.has_value() && prefix.has_value());
  const int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  ASSERT_EQ(bind(listener, address->get(), address->length), 0);
  ASSERT_EQ(listen(listener, 1), 0);
  const int reaching = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  EXPECT_EQ(connect(reaching, address->get(), address->length), 0);
  const int missing = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  EXPECT_NE(connect(missing, prefix->get(), prefix->length), 0);
  close(missing);
  close(reaching);
  close(listener);
}

}  // namespace
}  // namespace cudafs

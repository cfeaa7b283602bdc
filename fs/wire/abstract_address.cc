#include "fs/wire/abstract_address.h"

#include <cstring>

namespace cudafs {

std::optional<AbstractAddress> AbstractAddress::Of(std::string_view name) {
  if (name.empty() || name.size() > kMaxName) return std::nullopt;
  AbstractAddress result = {};
  result.address.sun_family = AF_UNIX;
  std::memcpy(result.address.sun_path + 1, name.data(), name.size());  // sun_path[0]: NUL
  result.length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return result;
}

}  // namespace cudafs

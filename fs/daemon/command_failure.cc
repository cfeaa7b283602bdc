#include "fs/daemon/command_failure.h"

#include <cstdio>
#include <string>

namespace cudafs {

int Fail(absl::string_view message) {
  std::fprintf(stderr, "cudafs: %s\n", std::string(message).c_str());
  return kExitUsage;
}

}  // namespace cudafs

#include "tests/support/temp_dir.h"

#include <stdlib.h>

#include <filesystem>
#include <system_error>

namespace cudafs_test {

TempDir::TempDir(const std::string& prefix) {
  std::string pattern = prefix + "XXXXXX";
  if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
}

TempDir::~TempDir() {
  if (path_.empty()) return;
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace cudafs_test

// TempDir: a fresh directory, removed with all it holds when destroyed.
#ifndef CUDAFS_TESTS_SUPPORT_TEMP_DIR_H_
#define CUDAFS_TESTS_SUPPORT_TEMP_DIR_H_

#include <string>

namespace cudafs_test {

class TempDir {
 public:
  // mkdtemp(`prefix` + "XXXXXX"); path() is empty when that fails, which
  // callers check.
  explicit TempDir(const std::string& prefix = "/tmp/cudafs-test-");
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir();

  const std::string& path() const { return path_; }
  // Leaves the directory in place: it is no longer removed.
  void Keep() { path_.clear(); }

 private:
  std::string path_;
};

}  // namespace cudafs_test

#endif  // CUDAFS_TESTS_SUPPORT_TEMP_DIR_H_

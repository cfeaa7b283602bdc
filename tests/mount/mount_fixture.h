// The fixtures of the tests that run against a mounted cudafs.
//
// FsTest gives every test a fresh, empty filesystem: it starts the real
// `cudafs` binary (see mount.h) on a temporary mountpoint with the backend
// named by the test parameter and unmounts it afterwards. When the
// environment variable CUDAFS_TEST_DIR names a directory, the tests run in a
// fresh subdirectory of it instead, so the suite can be checked against
// tmpfs (or compared with it). Tests that need a real cudafs mount (mount
// options, the daemon) skip there.
//
// A mount that fails to start skips the test ("cudafs cannot mount here"),
// since a machine without FUSE cannot run these tests at all; set
// CUDAFS_TEST_REQUIRE_MOUNT=1 to make that a failure instead.
//
// CUDAFS_TEST_KILL_EVERY_MS=N, with CUDAFS_TEST_MOUNT_OPTIONS holding
// survive=on, kills the mount's daemon with SIGKILL every N ms throughout
// each test, its keeper's successor serving on: the suite must pass as if
// nothing happened (fs/daemon/keeper.h).
#ifndef CUDAFS_TESTS_MOUNT_MOUNT_FIXTURE_H_
#define CUDAFS_TESTS_MOUNT_MOUNT_FIXTURE_H_

#include <atomic>
#include <thread>

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gtest/gtest.h"
#include "tests/mount/mount.h"

namespace cudafs_test {

// Users for permission tests: an owner that is not root, and "nobody".
inline constexpr uid_t kOwnerUid = 1000;
inline constexpr gid_t kOwnerGid = 1000;
inline constexpr uid_t kOtherUid = 65534;
inline constexpr gid_t kOtherGid = 65534;

// The directory of CUDAFS_TEST_DIR, or nullopt to test real mounts.
std::optional<std::string> TestDirFromEnv();

// The number in environment variable `name`, or `fallback` when it is unset
// or empty.
uint64_t EnvOrDefault(const char* name, uint64_t fallback);

// Whether CUDAFS_TEST_REQUIRE_MOUNT makes a mount that fails a failure.
bool MountFailuresAreFatal();

// Sets the process umask for the lifetime of a test, so that the modes of
// new files are predictable.
class ScopedUmask {
 public:
  explicit ScopedUmask(mode_t mask) : saved_(umask(mask)) {}
  ScopedUmask(const ScopedUmask&) = delete;
  ScopedUmask& operator=(const ScopedUmask&) = delete;
  ~ScopedUmask() { umask(saved_); }

 private:
  mode_t saved_;
};

// Base for tests parameterized by backend ("host", "cuda") that start
// cudafs themselves: skips when the backend cannot run here or
// CUDAFS_TEST_DIR is set. Mounts nothing itself.
class BackendTest : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override;

  const std::string& backend() const { return GetParam(); }

  // -o options for this backend, then CUDAFS_TEST_MOUNT_OPTIONS (a comma
  // list, how CI runs the suite over each FUSE transport), then `extra`,
  // which wins. allow_other lets the permission tests act as other users.
  std::vector<std::string> MountOptions(const std::vector<std::string>& extra = {}) const;

  // Starts `mount`; skips the test when cudafs cannot mount here (see the
  // file comment). Callers return when HasFatalFailure() or IsSkipped().
  void StartOrSkip(Mount& mount, const std::vector<std::string>& options,
                   const std::string& source = "");

 private:
  ScopedUmask umask_{022};
};

// Base for tests that need only a directory with filesystem semantics: a
// fresh cudafs mount, or a fresh subdirectory of CUDAFS_TEST_DIR.
class FsTest : public BackendTest {
 protected:
  void SetUp() override;
  void TearDown() override;

  // True on a real cudafs mount, false under CUDAFS_TEST_DIR.
  bool on_cudafs() const { return !test_dir_.has_value(); }

  // Replaces the mount with one started with MountOptions(extra) (and
  // `source`). Only on a real mount: guard with SKIP_UNLESS_CUDAFS().
  testing::AssertionResult Remount(const std::vector<std::string>& extra,
                                   const std::string& source = "");

  // The root of the filesystem under test, and paths below it.
  const std::string& root() const { return root_; }
  std::string Path(std::string_view relative) const { return root_ + "/" + std::string(relative); }

  Mount& mount() { return mount_; }

 private:
  Mount mount_;
  std::string root_;
  std::optional<std::string> test_dir_;
  // CUDAFS_TEST_KILL_EVERY_MS's.
  std::thread killer_;
  std::atomic<bool> stop_killing_{false};
  std::atomic<int> kills_{0};
};

std::string BackendName(const testing::TestParamInfo<std::string>& info);

}  // namespace cudafs_test

// Skips tests that make sense only on a real cudafs mount.
#define SKIP_UNLESS_CUDAFS()                                                           \
  do {                                                                                 \
    if (!on_cudafs()) GTEST_SKIP() << "needs a cudafs mount (CUDAFS_TEST_DIR is set)"; \
  } while (0)

// Runs `suite` once per backend; the cuda instance skips without a GPU.
#define CUDAFS_INSTANTIATE_BACKENDS(suite)                                   \
  INSTANTIATE_TEST_SUITE_P(Backends, suite, testing::Values("host", "cuda"), \
                           ::cudafs_test::BackendName)

#endif  // CUDAFS_TESTS_MOUNT_MOUNT_FIXTURE_H_

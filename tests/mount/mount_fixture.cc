#include "tests/mount/mount_fixture.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/xattr.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "tests/support/errno_check.h"
#include "tests/support/processes.h"

namespace cudafs_test {

std::optional<std::string> TestDirFromEnv() {
  const char* dir = getenv("CUDAFS_TEST_DIR");
  if (dir == nullptr || *dir == '\0') return std::nullopt;
  return std::string(dir);
}

uint64_t EnvOrDefault(const char* name, uint64_t fallback) {
  const char* value = getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  return std::stoull(value);
}

bool MountFailuresAreFatal() {
  const char* value = getenv("CUDAFS_TEST_REQUIRE_MOUNT");
  return value != nullptr && *value != '\0' && std::string_view(value) != "0";
}

void BackendTest::SetUp() {
  if (TestDirFromEnv()) GTEST_SKIP() << "needs a cudafs mount (CUDAFS_TEST_DIR is set)";
  if (const auto why = WhyCannotMount(backend())) GTEST_SKIP() << *why;
}

std::vector<std::string> BackendTest::MountOptions(const std::vector<std::string>& extra) const {
  std::vector<std::string> options = {"backend=" + backend(), "allow_other"};
  if (const char* from_env = getenv("CUDAFS_TEST_MOUNT_OPTIONS")) {
    std::istringstream list(from_env);
    for (std::string option; std::getline(list, option, ',');) {
      if (!option.empty()) options.push_back(option);
    }
  }
  options.insert(options.end(), extra.begin(), extra.end());
  return options;
}

void BackendTest::StartOrSkip(Mount& mount, const std::vector<std::string>& options,
                              const std::string& source) {
  const testing::AssertionResult started = mount.Start(options, source);
  if (started) return;
  if (MountFailuresAreFatal()) FAIL() << started.message();
  GTEST_SKIP() << "cudafs cannot mount here: " << started.message();
}

void FsTest::SetUp() {
  if (const auto dir = TestDirFromEnv()) {
    // One run is enough: the backends differ only on real mounts.
    if (backend() != "host") GTEST_SKIP() << "CUDAFS_TEST_DIR runs the host instance only";
    std::string pattern = *dir + "/test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr)
        << "mkdtemp in " << *dir << ": " << ErrnoName(errno);
    // Like the root of a fresh mount, so other users can work in it.
    ASSERT_SYS_OK(chmod(pattern.c_str(), 01777));
    root_ = pattern;
    test_dir_ = pattern;
    return;
  }
  BackendTest::SetUp();
  if (IsSkipped()) return;
  StartOrSkip(mount_, MountOptions());
  root_ = mount_.path();
  if (IsSkipped() || HasFatalFailure()) return;
  if (const uint64_t every = EnvOrDefault("CUDAFS_TEST_KILL_EVERY_MS", 0); every > 0) {
    killer_ = std::thread([this, every] {
      while (!stop_killing_) {
        // The root says who serves; asked while none does, it waits for
        // the successor, which then serves `every` ms before its death (a
        // start slower than that, a GPU's, left it none).
        char value[32] = {};
        const ssize_t n =
            getxattr(root_.c_str(), "user.cudafs.daemon", value, sizeof value - 1);
        const pid_t daemon = n > 0 ? static_cast<pid_t>(std::atoi(value)) : 0;
        std::this_thread::sleep_for(std::chrono::milliseconds(every));
        if (stop_killing_) break;
        if (daemon > 0 && kill(daemon, SIGKILL) == 0) ++kills_;
      }
    });
  }
}

void FsTest::TearDown() {
  if (test_dir_) {
    EXPECT_TRUE(ShellOk("rm -rf '" + *test_dir_ + "'"));
    return;
  }
  if (killer_.joinable()) {
    stop_killing_ = true;
    killer_.join();
    // Its last victim's successor serves.
    char value[32] = {};
    EXPECT_GT(getxattr(root_.c_str(), "user.cudafs.daemon", value, sizeof value - 1), 0)
        << "no successor serves after " << kills_ << " kills";
    std::fprintf(stderr, "[ killed the daemon %d times ]\n", kills_.load());
  } else if (const auto pid = mount_.daemon(); pid && !ProcessAlive(*pid)) {
    // A daemon that crashed leaves the mount answering ENOTCONN; say so
    // plainly instead of leaving it to the errors that follow.
    ADD_FAILURE() << "the cudafs daemon (pid " << *pid << ") died during the test";
  }
  mount_.Unmount();
}

testing::AssertionResult FsTest::Remount(const std::vector<std::string>& extra,
                                         const std::string& source) {
  mount_.Unmount();
  testing::AssertionResult started = mount_.Start(MountOptions(extra), source);
  root_ = mount_.path();
  return started;
}

std::string BackendName(const testing::TestParamInfo<std::string>& info) { return info.param; }

}  // namespace cudafs_test

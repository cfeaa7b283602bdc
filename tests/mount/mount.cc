#include "tests/mount/mount.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <utility>

#include "tests/mount/mount_table.h"
#include "tests/support/errno_check.h"
#include "tests/support/eventually.h"
#include "tests/support/fd.h"
#include "tests/support/processes.h"

#ifndef CUDAFS_BINARY
#error "CUDAFS_BINARY must name the built cudafs binary"
#endif
#ifndef CUDAFS_SOURCE_DIR
#error "CUDAFS_SOURCE_DIR must name the repository root"
#endif

namespace cudafs_test {

using namespace std::chrono_literals;

const char* const kBinary = [] {
  const char* binary = getenv("CUDAFS_TEST_BINARY");
  return binary != nullptr && *binary != '\0' ? binary : CUDAFS_BINARY;
}();
const char* const kSourceDir = CUDAFS_SOURCE_DIR;

std::optional<std::string> WhyCannotMount(const std::string& backend) {
  if (access(kBinary, X_OK) != 0) return std::string("no cudafs binary at ") + kBinary;
  Fd fuse(open("/dev/fuse", O_RDWR | O_CLOEXEC));
  if (!fuse.valid()) return "cannot open /dev/fuse: " + ErrnoName(errno);
  if (backend == "cuda") {
    static const bool has_gpu = RunCommand({kBinary, "--list-devices"}, 60s).exit_code == 0;
    if (!has_gpu) return std::string("no usable GPU (cudafs --list-devices failed)");
  }
  return std::nullopt;
}

bool LibfuseAtLeast(int major, int minor) {
  static const std::pair<int, int> built_with = [] {
    const std::string text = RunCommand({kBinary, "--version"}).out;
    const size_t at = text.find("libfuse ");
    std::pair<int, int> version{0, 0};
    if (at != std::string::npos) {
      std::sscanf(text.c_str() + at, "libfuse %d.%d", &version.first, &version.second);
    }
    return version;
  }();
  return built_with >= std::pair(major, minor);
}

bool UnmountAndWait(const std::string& mountpoint, std::optional<pid_t> daemon) {
  if (IsMounted(mountpoint)) RunCommand({"fusermount3", "-u", mountpoint});
  if (IsMounted(mountpoint)) RunCommand({"umount", "-l", mountpoint});
  const bool gone = !IsMounted(mountpoint);
  if (daemon) Eventually([&] { return !ProcessAlive(*daemon); }, 10s);
  return gone;
}

testing::AssertionResult Mount::Start(const std::vector<std::string>& options,
                                      const std::string& source,
                                      const std::vector<std::string>& extra_args) {
  Unmount();
  char path[] = "/tmp/cudafs-test-XXXXXX";
  if (mkdtemp(path) == nullptr) {
    return testing::AssertionFailure() << "mkdtemp: " << ErrnoName(errno);
  }
  path_ = path;
  std::vector<std::string> argv = {kBinary};
  if (!source.empty()) argv.push_back(source);
  argv.push_back(path_);
  if (!options.empty()) argv.insert(argv.end(), {"-o", Join(options, ",")});
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  // Starting the CUDA backend creates a context, which can take seconds.
  const CommandResult result = RunCommand(argv, 60s);
  const std::string command = Join(argv, " ");
  if (result.exit_code != 0) {
    return testing::AssertionFailure()
           << "`" << command << "` exited " << result.exit_code << ": " << result.err;
  }
  const std::optional<MountEntry> entry = FindMount(path_);
  if (!entry) {
    return testing::AssertionFailure()
           << "`" << command << "` exited 0 but nothing is mounted on " << path_;
  }
  if (entry->fstype != "fuse.cudafs") {
    return testing::AssertionFailure()
           << "mounted with type " << entry->fstype << ", expected fuse.cudafs";
  }
  daemon_ = FindDaemon(path_);
  return testing::AssertionSuccess();
}

bool Mount::Unmount() {
  if (path_.empty()) return true;
  const bool gone = UnmountAndWait(path_, daemon_);
  if (gone) rmdir(path_.c_str());
  path_.clear();
  daemon_.reset();
  return gone;
}

}  // namespace cudafs_test

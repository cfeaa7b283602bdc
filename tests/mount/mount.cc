#include "tests/mount/mount.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string_view>
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
#ifndef CUDAFS_FAKE_LIBCUDA_DIR
#error "CUDAFS_FAKE_LIBCUDA_DIR must name the folder of the fake libcuda.so.1"
#endif

namespace cudafs_test {

using namespace std::chrono_literals;

const char* const kBinary = [] {
  const char* binary = getenv("CUDAFS_TEST_BINARY");
  return binary != nullptr && *binary != '\0' ? binary : CUDAFS_BINARY;
}();
const char* const kSourceDir = CUDAFS_SOURCE_DIR;

namespace {

bool on_fake_gpus = false;

// Makes this process, and every process it starts from now on, drive the
// fake GPUs of tests/fake_libcuda, which share their memory through a
// state file of this process's own; nullopt when done, else why not.
std::optional<std::string> UseFakeGpus() {
  if (const char* use = getenv("CUDAFS_TEST_FAKE_GPUS"); use != nullptr && *use == '0') {
    return "CUDAFS_TEST_FAKE_GPUS=0";
  }
  if (std::string_view(CUDAFS_FAKE_LIBCUDA_DIR).empty()) return "not built (abseil is static here)";
  const std::string library = std::string(CUDAFS_FAKE_LIBCUDA_DIR) + "/libcuda.so.1";
  if (access(library.c_str(), R_OK) != 0) return "no fake driver at " + library;
  static char state[] = "/tmp/cudafs-fake-gpus-XXXXXX";
  const int fd = mkstemp(state);
  if (fd < 0) return "mkstemp: " + ErrnoName(errno);
  // Daemons of other users (a user's mount) share it too.
  fchmod(fd, 0666);
  close(fd);
  atexit([] { unlink(state); });
  setenv("CUDAFS_FAKE_CUDA_STATE", state, 1);
  const char* path = getenv("LD_LIBRARY_PATH");
  setenv("LD_LIBRARY_PATH",
         (std::string(CUDAFS_FAKE_LIBCUDA_DIR) + (path != nullptr ? std::string(":") + path : ""))
             .c_str(),
         1);
  // This process's own look-ups of the driver (free VRAM, a test holding
  // GPU memory) find it too: dlopen("libcuda.so.1") answers with what is
  // loaded under that SONAME.
  if (dlopen(library.c_str(), RTLD_NOW | RTLD_NODELETE) == nullptr) {
    return std::string("cannot load ") + library + ": " + dlerror();
  }
  on_fake_gpus = true;
  return std::nullopt;
}

}  // namespace

std::optional<std::string> WhyCannotMount(const std::string& backend) {
  if (access(kBinary, X_OK) != 0) return std::string("no cudafs binary at ") + kBinary;
  Fd fuse(open("/dev/fuse", O_RDWR | O_CLOEXEC));
  if (!fuse.valid()) return "cannot open /dev/fuse: " + ErrnoName(errno);
  if (backend == "cuda") {
    static const std::optional<std::string> why_not = []() -> std::optional<std::string> {
      auto has_gpu = [] { return RunCommand({kBinary, "--list-devices"}, 60s).exit_code == 0; };
      if (has_gpu()) return std::nullopt;
      if (const std::optional<std::string> why = UseFakeGpus()) {
        return "no usable GPU (cudafs --list-devices failed), and no fake one: " + *why;
      }
      if (!has_gpu()) return std::string("cudafs --list-devices fails on the fake GPUs");
      return std::nullopt;
    }();
    return why_not;
  }
  return std::nullopt;
}

bool OnFakeGpus() { return on_fake_gpus; }

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

bool DaemonHasSanitizer() {
  // The runtime's name in the binary: its soname among the needed
  // libraries where it is linked dynamically (GCC), its reports' words
  // where statically (Clang).
  static const bool sanitized = [] {
    std::ifstream binary(kBinary, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(binary)),
                            std::istreambuf_iterator<char>());
    for (const char* mark : {"libasan.so", "libtsan.so", "AddressSanitizer", "ThreadSanitizer"}) {
      if (bytes.find(mark) != std::string::npos) return true;
    }
    return false;
  }();
  return sanitized;
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

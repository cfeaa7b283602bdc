// The cudafs binary under test and a mount of it.
//
// The binary is CUDAFS_BINARY (the build's), or the one the environment
// variable CUDAFS_TEST_BINARY names: another build, or a copy on the GPU
// machine.
#ifndef CUDAFS_TESTS_MOUNT_MOUNT_H_
#define CUDAFS_TESTS_MOUNT_MOUNT_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace cudafs_test {

// The cudafs binary under test, and the repository it was built from.
extern const char* const kBinary;
extern const char* const kSourceDir;

// Why tests cannot mount `backend` here ("host", "cuda"), or nullopt if
// they can try. Without a GPU, the first ask for "cuda" sets up the fake
// GPUs of tests/fake_libcuda (one of 8 GiB, or CUDAFS_FAKE_GPUS) for this
// process and all it starts from then on, their memory shared through a
// state file of its own; CUDAFS_TEST_FAKE_GPUS=0 skips instead.
std::optional<std::string> WhyCannotMount(const std::string& backend);

// Whether the cuda backend runs on the fake GPUs (see WhyCannotMount).
bool OnFakeGpus();

// Why the tests of private copies of a file in GPU memory (cudafs_map
// without CUDAFS_MAP_WRITABLE) skip on the fake GPUs.
inline constexpr char kNoCopiesOnFakeGpus[] =
    "a copy's GPU memory is the caller's, which the daemon takes only as a descriptor of the "
    "NVIDIA driver (fs/share/descriptor_checks.cc); the fake's is a memfd";

// Whether the cudafs under test was built against libfuse `major.minor` or
// newer (what `cudafs --version` says): 3.18 brings FUSE over io_uring,
// direct I/O with mmap and FUSE_HANDLE_KILLPRIV_V2 (and with it atomic
// O_TRUNC); the fallback build against Debian 12's 3.14 has none of them.
bool LibfuseAtLeast(int major, int minor);

// Whether the cudafs under test was built with AddressSanitizer or
// ThreadSanitizer (it needs their runtime library). The test itself may be
// built otherwise: CI runs one build's mount tests against the daemons of
// the sanitizer builds (CUDAFS_TEST_BINARY).
bool DaemonHasSanitizer();

// Unmounts whatever is mounted on `mountpoint` (fusermount3 -u, else
// umount -l) and waits up to 10 s for `daemon`, which served it, to exit (it
// may hold device memory the next mount wants). Returns whether nothing is
// mounted there any more.
bool UnmountAndWait(const std::string& mountpoint, std::optional<pid_t> daemon);

// A cudafs mount on a fresh temporary directory, unmounted and removed on
// destruction.
class Mount {
 public:
  Mount() = default;
  Mount(const Mount&) = delete;
  Mount& operator=(const Mount&) = delete;
  ~Mount() { Unmount(); }

  // Runs `cudafs [source] MOUNTPOINT -o options` (extra_args appended) and
  // checks that it exits 0 with the mount in place.
  testing::AssertionResult Start(const std::vector<std::string>& options,
                                 const std::string& source = "",
                                 const std::vector<std::string>& extra_args = {});

  // UnmountAndWait, then removes the mountpoint. Returns whether the mount
  // is gone.
  bool Unmount();

  const std::string& path() const { return path_; }
  // The daemon found right after mounting.
  std::optional<pid_t> daemon() const { return daemon_; }

 private:
  std::string path_;
  std::optional<pid_t> daemon_;
};

}  // namespace cudafs_test

#endif  // CUDAFS_TESTS_MOUNT_MOUNT_H_

// The allocation interposer (libcudafs_preload.so, `cudafs run`) against a
// real mount: a GPU program that does not retry gets memory the mount
// holds, the files read the same afterwards, and a daemon that does not
// answer costs the program no more than the bound. On the fake GPUs
// (tests/fake_libcuda), whose memory daemon and program share; on a real
// GPU the benchmark does this at scale (bench/gpu_pressure.py).
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/mount/mount.h"
#include "tests/mount/mount_fixture.h"
#include "tests/support/file_io.h"
#include "tests/support/processes.h"

#ifndef CUDAFS_PRELOAD_LIBRARY
#error "CUDAFS_PRELOAD_LIBRARY must name libcudafs_preload.so"
#endif
#ifndef CUDAFS_ALLOCATION_PROGRAM
#error "CUDAFS_ALLOCATION_PROGRAM must name gpu_allocation_program"
#endif

namespace cudafs_test {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr int kFiles = 12;
constexpr uint64_t kFileBytes = 48 * kMiB;  // 576 MiB of the 1 GiB GPU

// One small fake GPU, so that a few hundred MiB of files fill it. Set
// before the fixture sets the fake GPUs up (the first cuda mount).
const bool kSmallGpu = [] {
  setenv("CUDAFS_FAKE_GPUS", "1G", 0);
  return true;
}();

class RoomTest : public BackendTest {
 protected:
  void SetUp() override {
    BackendTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    StartOrSkip(mount_, MountOptions({"size=900m"}));
    if (IsSkipped() || HasFatalFailure()) return;
    if (!OnFakeGpus()) GTEST_SKIP() << "on a real GPU: bench/gpu_pressure.py";
    for (int i = 0; i < kFiles; ++i) {
      ASSERT_TRUE(WriteFile(File(i), RandomBytes(kFileBytes, 100 + i)));
    }
  }

  std::string File(int i) const { return mount_.path() + "/f" + std::to_string(i); }

  // The program's allocation of `bytes` (reached as `mode` says), with
  // the interposer preloaded when `interposed`, asking this test's mount
  // only (tests running beside it mount, and stop daemons, too), and
  // `environment` more.
  CommandResult Allocate(const std::string& mode, uint64_t bytes, bool interposed,
                         const std::vector<std::string>& environment = {}) {
    std::vector<std::string> argv = {"env", "CUDAFS_ROOM_MOUNTS=" + mount_.path()};
    if (interposed) argv.push_back(std::string("LD_PRELOAD=") + CUDAFS_PRELOAD_LIBRARY);
    argv.insert(argv.end(), environment.begin(), environment.end());
    argv.insert(argv.end(), {CUDAFS_ALLOCATION_PROGRAM, mode, std::to_string(bytes)});
    return RunCommand(argv, 60s);
  }

  void ExpectFilesUnchanged() {
    for (int i = 0; i < kFiles; ++i) {
      EXPECT_TRUE(BytesEqual(ReadStored(File(i)).value_or(""), RandomBytes(kFileBytes, 100 + i)))
          << File(i);
    }
  }

  Mount mount_;
};

// Without the interposer the program fails at once, as PyTorch's
// allocator would; with it, by either way of reaching the driver, it gets
// the memory the mount held, and no file changes.
TEST_P(RoomTest, AProgramThatDoesNotRetryGetsTheMountsMemory) {
  const uint64_t wanted = 640 * kMiB;
  CommandResult result = Allocate("dlsym", wanted, /*interposed=*/false);
  EXPECT_EQ(result.exit_code, 3) << result.out << result.err;
  for (const std::string mode : {"dlsym", "proc"}) {
    SCOPED_TRACE(mode);
    result = Allocate(mode, wanted, /*interposed=*/true);
    EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
    EXPECT_EQ(result.out.rfind("allocated ", 0), 0u) << result.out;
  }
  ExpectFilesUnchanged();
}

// A daemon that does not answer (stopped) holds the program for the bound
// it was given, then the driver's own error comes back; once the daemon
// runs again, the mount and its files are as they were.
TEST_P(RoomTest, AStoppedDaemonCostsTheProgramOnlyTheBound) {
  ASSERT_TRUE(mount_.daemon().has_value());
  const pid_t daemon = *mount_.daemon();
  ASSERT_EQ(kill(daemon, SIGSTOP), 0);
  const auto start = std::chrono::steady_clock::now();
  const CommandResult result =
      Allocate("proc", 640 * kMiB, /*interposed=*/true, {"CUDAFS_ROOM_TIMEOUT=2"});
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_EQ(kill(daemon, SIGCONT), 0);
  EXPECT_EQ(result.exit_code, 3) << result.out << result.err;
  EXPECT_LT(took, 10s);
  ExpectFilesUnchanged();
}

// Where no cudafs mount is, nothing is asked: the error comes at once.
TEST_P(RoomTest, WithoutAMountTheErrorComesAtOnce) {
  const CommandResult result = Allocate("dlsym", 640 * kMiB, /*interposed=*/true,
                                        {"CUDAFS_ROOM_MOUNTS=/nowhere"});
  EXPECT_EQ(result.exit_code, 3) << result.out << result.err;
  ExpectFilesUnchanged();
}

INSTANTIATE_TEST_SUITE_P(Gpu, RoomTest, testing::Values("cuda"), BackendName);

}  // namespace
}  // namespace cudafs_test

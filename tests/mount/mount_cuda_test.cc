// Mount tests only a GPU can run: VRAM use follows what is stored, ENOSPC
// when the GPU's memory runs out below size= (without spill=), writes going
// to host memory instead (with it), recycled VRAM reads as zeros.
// They skip where cudafs has no CUDA device or the machine has no GPU.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "alloc/devices/cuda_device.h"
#include "tests/mount/mount.h"
#include "tests/mount/mount_fixture.h"
#include "tests/support/errno_check.h"
#include "tests/support/eventually.h"
#include "tests/support/fd.h"
#include "tests/support/file_io.h"

namespace cudafs_test {

using namespace std::chrono_literals;

namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;

uint64_t FreeVram() {
  absl::StatusOr<std::vector<cudafs::CudaDeviceInfo>> devices = cudafs::ListCudaDevices();
  if (!devices.ok() || devices->empty()) return 0;
  return (*devices)[0].free_bytes;
}

// Writes `size` bytes of `seed`'s pattern to `path` in 1 MiB requests.
testing::AssertionResult WriteLarge(const std::string& path, uint64_t size, uint64_t seed) {
  Fd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644));
  if (!fd.valid()) return testing::AssertionFailure() << "open " << path << ": " << ErrnoName(errno);
  const std::string chunk = RandomBytes(kMiB, seed);
  for (uint64_t done = 0; done < size; done += kMiB) {
    if (testing::AssertionResult ok = WriteAll(fd.get(), chunk, done); !ok) return ok;
  }
  if (fdatasync(fd.get()) != 0) return testing::AssertionFailure() << "fdatasync";
  return testing::AssertionSuccess();
}

class MountCudaTest : public BackendTest {
 protected:
  void SetUp() override {
    BackendTest::SetUp();
  }

  void StartCuda(const std::vector<std::string>& extra) {
    StartOrSkip(mount_, MountOptions(extra));
  }
  std::string Path(const std::string& name) const { return mount_.path() + "/" + name; }

  // Mounts with `extra` on GPU 0 while this process holds all of that GPU
  // but about `leave` bytes (hog_), both CUDA contexts made first: they
  // come with the first data and need memory too. The hog lets go at the
  // end of the test.
  void StartBesideHog(const std::vector<std::string>& extra, uint64_t leave) {
    absl::StatusOr<std::vector<int>> first = cudafs::ResolveCudaDevices("");
    ASSERT_TRUE(first.ok());
    absl::StatusOr<std::unique_ptr<cudafs::CudaDevice>> hog =
        cudafs::CudaDevice::Create(first->front(), 256 * kGiB);
    ASSERT_TRUE(hog.ok()) << hog.status();
    hog_ = *std::move(hog);
    StartCuda(extra);
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_TRUE(WriteLarge(Path("first"), kMiB, 9));
    const uint64_t granule = hog_->granule_size();
    ASSERT_TRUE(hog_->Commit(0, granule).ok());
    ASSERT_TRUE(hog_->Decommit(0, granule).ok());
    taken_ = (FreeVram() - leave) / granule * granule;
    ASSERT_TRUE(hog_->Commit(0, taken_).ok());
  }
  void TearDown() override {
    if (hog_ != nullptr && taken_ > 0) {
      EXPECT_TRUE(hog_->Decommit(0, taken_).ok());
    }
    BackendTest::TearDown();
  }

  Mount mount_;
  std::unique_ptr<cudafs::CudaDevice> hog_;
  uint64_t taken_ = 0;
};

// A mount holds nothing on the GPU until the first byte of data, and gives
// everything back, its context included, once nothing has been stored for
// gpu_idle.
TEST_P(MountCudaTest, AnEmptyMountHoldsNoGpuMemory) {
  const uint64_t before = FreeVram();
  StartCuda({"size=8g", "gpu_idle=1"});
  if (IsSkipped() || HasFatalFailure()) return;
  ASSERT_SYS_OK(mkdir(Path("dir").c_str(), 0755));
  Fd(open(Path("dir/empty").c_str(), O_WRONLY | O_CREAT, 0644));
  struct statvfs fs;
  ASSERT_SYS_OK(statvfs(mount_.path().c_str(), &fs));
  EXPECT_LE(before - FreeVram(), 16 * kMiB) << "an empty mount holds VRAM";
  ASSERT_TRUE(WriteLarge(Path("data"), 64 * kMiB, 1));
  EXPECT_GE(before - FreeVram(), 64 * kMiB);
  ASSERT_SYS_OK(unlink(Path("data").c_str()));
  EXPECT_TRUE(Eventually([&] { return before - FreeVram() <= 16 * kMiB; }, 5s))
      << "the context outlived gpu_idle=1";
  // And the next write makes it again.
  ASSERT_TRUE(WriteLarge(Path("again"), 4 * kMiB, 2));
  const std::optional<std::string> back = ReadFile(Path("again"));
  ASSERT_TRUE(back.has_value());
  std::string expected;
  for (int i = 0; i < 4; ++i) expected += RandomBytes(kMiB, 2);
  EXPECT_TRUE(BytesEqual(*back, expected));
}

TEST_P(MountCudaTest, VramUseFollowsFileContent) {
  // GPU 0's memory is what is measured (a device=all run of the suite
  // would spread the file over several).
  StartCuda({"size=8g", "device=0"});
  if (IsSkipped() || HasFatalFailure()) return;
  // The context comes with the first data: make it before measuring.
  ASSERT_TRUE(WriteLarge(Path("first"), kMiB, 9));
  const uint64_t empty = FreeVram();
  ASSERT_TRUE(WriteLarge(Path("big"), 1 * kGiB, 1));
  const uint64_t full = FreeVram();
  EXPECT_GE(empty - full, 1 * kGiB - 32 * kMiB) << "1 GiB stored but VRAM barely moved";
  EXPECT_LE(empty - full, 1 * kGiB + 64 * kMiB) << "storing 1 GiB took much more VRAM";
  ASSERT_SYS_OK(unlink(Path("big").c_str()));
  // FUSE may release the inode after unlink returns.
  EXPECT_TRUE(Eventually([&] { return FreeVram() + 32 * kMiB >= empty; }, 5s))
      << "VRAM not given back after unlink";
}

TEST_P(MountCudaTest, EnospcWhenTheGpuRunsOutBelowSize) {
  // Hold all but ~512 MiB of the GPU in this process, then mount a larger
  // filesystem on it, with no host memory to write to instead: it must
  // fail writes with ENOSPC, not corrupt anything.
  StartBesideHog({"size=4g", "device=0", "spill=0", "reserve=0"}, 512 * kMiB);
  if (IsSkipped() || HasFatalFailure()) return;

  ASSERT_TRUE(WriteLarge(Path("keep"), 64 * kMiB, 2));
  Fd fd(open(Path("fill").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644));
  ASSERT_TRUE(fd.valid());
  const std::string chunk = RandomBytes(kMiB, 3);
  uint64_t written = 0;
  int error = 0;
  while (written < 4 * kGiB) {
    const ssize_t n = pwrite(fd.get(), chunk.data(), chunk.size(), written);
    if (n < 0) {
      error = errno;
      break;
    }
    written += n;
  }
  if (error == 0 && fdatasync(fd.get()) != 0) error = errno;
  EXPECT_EQ(error, ENOSPC) << "wrote " << written << " bytes";
  EXPECT_LT(written, 1 * kGiB);
  fd.Reset();

  // Earlier data is intact; freeing space makes writes work again.
  const std::optional<std::string> kept = ReadFile(Path("keep"));
  ASSERT_TRUE(kept.has_value());
  std::string expected;
  const std::string pattern = RandomBytes(kMiB, 2);
  for (int i = 0; i < 64; ++i) expected += pattern;
  EXPECT_TRUE(BytesEqual(*kept, expected));
  ASSERT_SYS_OK(unlink(Path("fill").c_str()));
  EXPECT_TRUE(Eventually([&] { return WriteLarge(Path("again"), 64 * kMiB, 4); }, 5s));
}

// With host memory (spill=, on by default), a write the full GPU cannot
// take goes there instead, up to size=, and reads back intact.
TEST_P(MountCudaTest, WhenTheGpuIsFullWritesGoToHostMemory) {
  StartBesideHog({"size=2g", "device=0", "reserve=0"}, 256 * kMiB);
  if (IsSkipped() || HasFatalFailure()) return;

  ASSERT_TRUE(WriteLarge(Path("big"), 1024 * kMiB, 6));
  char value[256] = {};
  const ssize_t got = getxattr(Path("big").c_str(), "user.cudafs.where", value, sizeof value - 1);
  ASSERT_GT(got, 0) << strerror(errno);
  const std::string where(value, got);
  EXPECT_NE(where.find("host "), std::string::npos) << where;
  const std::optional<std::string> read = ReadFile(Path("big"));
  ASSERT_TRUE(read.has_value());
  std::string expected;
  const std::string pattern = RandomBytes(kMiB, 6);
  for (int i = 0; i < 1024; ++i) expected += pattern;
  EXPECT_TRUE(BytesEqual(*read, expected));
}

TEST_P(MountCudaTest, RecycledVramReadsAsZeros) {
  StartCuda({"size=2g"});
  if (IsSkipped() || HasFatalFailure()) return;
  ASSERT_TRUE(WriteLarge(Path("old"), 512 * kMiB, 5));
  ASSERT_SYS_OK(unlink(Path("old").c_str()));
  // A sparse file over the same VRAM: everything but the written bytes is 0.
  Fd fd(open(Path("new").c_str(), O_RDWR | O_CREAT, 0644));
  ASSERT_TRUE(fd.valid());
  ASSERT_SYS_OK(ftruncate(fd.get(), 512 * kMiB));
  for (uint64_t at = 4096 + 17; at < 512 * kMiB; at += 3 * kMiB + 4099) {
    ASSERT_TRUE(WriteAll(fd.get(), "x", at));
  }
  ASSERT_SYS_OK(fallocate(fd.get(), 0, 0, 256 * kMiB));
  std::string buffer(kMiB, '\0');
  for (uint64_t at = 0; at < 512 * kMiB; at += kMiB) {
    const std::optional<std::string> got = ReadAt(fd.get(), at, kMiB);
    ASSERT_TRUE(got.has_value());
    for (size_t i = 0; i < got->size(); ++i) {
      if ((*got)[i] == 0) continue;
      const uint64_t offset = at + i;
      ASSERT_EQ((*got)[i], 'x') << "old bytes at " << offset;
      ASSERT_EQ((offset - (4096 + 17)) % (3 * kMiB + 4099), 0u) << "stray byte at " << offset;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Gpu, MountCudaTest, testing::Values("cuda"), BackendName);

}  // namespace
}  // namespace cudafs_test

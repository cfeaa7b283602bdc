// Several CudaDevices pooled (PooledDevice) on the fake driver with two
// GPUs, so that CI checks what a device=all mount relies on: each GPU's
// context comes and goes on its own, host memory stays pinned while any GPU
// may copy from it, reserve= is honoured per GPU, a sticky error on one GPU
// leaves the other working, and exports name the GPU of each piece.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "alloc/devices/cuda_device.h"
#include "alloc/devices/pooled_device.h"
#include "gtest/gtest.h"
#include "tests/support/eventually.h"
#include "tests/support/fake_cuda_driver.h"

namespace cudafs {
namespace {

constexpr uint64_t kGranule = 2 * kMiB;

class CudaPoolTest : public testing::Test {
 protected:
  CudaPoolTest()
      : fake_({FakeGpuOptions{.name = "Fake GPU A", .pci_bus_id = "0000:65:00.0"},
               FakeGpuOptions{.name = "Fake GPU B", .pci_bus_id = "0000:66:00.0"}}) {}

  // Both GPUs pooled; `reserve` bytes of each kept free.
  std::unique_ptr<PooledDevice> Open(uint64_t reserve = 0,
                                     absl::Duration idle_release = absl::InfiniteDuration()) {
    std::vector<std::unique_ptr<Device>> gpus;
    for (int index = 0; index < 2; ++index) {
      absl::StatusOr<std::unique_ptr<CudaDevice>> gpu = CudaDevice::Create(
          fake_.driver(), index, kGiB,
          CudaDeviceOptions{.idle_release = idle_release, .reserve_bytes = reserve});
      EXPECT_TRUE(gpu.ok()) << gpu.status();
      if (!gpu.ok()) return nullptr;
      gpus.push_back(std::move(*gpu));
    }
    absl::StatusOr<std::unique_ptr<PooledDevice>> pool = PooledDevice::Create(std::move(gpus));
    EXPECT_TRUE(pool.ok()) << pool.status();
    return pool.ok() ? std::move(*pool) : nullptr;
  }

  static uint64_t SecondBase(const PooledDevice& pool) { return pool.parts()[1].range.offset; }

  // Waits up to 5 s for GPU `index` of `pool` to drop its context.
  static bool AwaitRelease(const PooledDevice& pool, int index) {
    const auto& gpu = static_cast<const CudaDevice&>(pool.member(index));
    return cudafs_test::Eventually([&] { return !gpu.stats().has_context; },
                                   std::chrono::seconds(5));
  }

  FakeCudaDriver fake_;
};

TEST_F(CudaPoolTest, EachGpuHoldsOnlyWhatIsStoredOnIt) {
  std::unique_ptr<PooledDevice> pool = Open();
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(fake_.stats().live_contexts, 0) << "no context before anything is stored";
  const uint64_t second = SecondBase(*pool);
  ASSERT_TRUE(pool->Commit(second, 2 * kGranule).ok());
  EXPECT_EQ(fake_.stats(0).physical_bytes, 0u);
  EXPECT_EQ(fake_.stats(1).physical_bytes, 2 * kGranule);
  EXPECT_EQ(fake_.stats(0).live_contexts, 0);

  // Pinned buffers serve both GPUs; a copy across goes through the host.
  char* buffer = static_cast<char*>(pool->AllocateHostBuffer(kMiB));
  ASSERT_NE(buffer, nullptr);
  std::memset(buffer, 'q', kMiB);
  ASSERT_TRUE(pool->Write({{second + 7, buffer, kMiB}}).ok());
  ASSERT_TRUE(pool->Commit(0, kGranule).ok());
  ASSERT_TRUE(pool->Copy({{5, second + 7, kMiB}}).ok());
  std::string back(kMiB, '\0');
  ASSERT_TRUE(pool->Read({{back.data(), 5, kMiB}}).ok());
  EXPECT_EQ(back, std::string(kMiB, 'q'));
  pool->FreeHostBuffer(buffer, kMiB);
  ASSERT_TRUE(pool->Decommit(0, kGranule).ok());
  ASSERT_TRUE(pool->Decommit(second, 2 * kGranule).ok());
}

// Host memory is pinned once for the process, under the context of the GPU
// that pinned it first, and the other GPU's copies take it as pinned (the
// driver's PORTABLE): so it stays pinned, that GPU's context with it, until
// no GPU that may copy from it holds a context. Unpinned under a copy in
// flight on the other GPU, it would be DMA from pageable memory.
TEST_F(CudaPoolTest, HostMemoryStaysPinnedWhileAnyGpuMayCopyFromIt) {
  std::unique_ptr<PooledDevice> pool = Open(/*reserve=*/0, /*idle_release=*/absl::Milliseconds(20));
  ASSERT_NE(pool, nullptr);
  const uint64_t second = SecondBase(*pool);
  ASSERT_TRUE(pool->Commit(0, kGranule).ok());
  char* buffer = static_cast<char*>(pool->AllocateHostBuffer(kMiB));
  ASSERT_NE(buffer, nullptr);
  std::vector<char> frames(kMiB);
  pool->RegisterHostMemory(frames.data(), frames.size());
  EXPECT_EQ(fake_.stats(0).registered_host_bytes, 2 * kMiB) << "pinned under GPU A's context";
  ASSERT_TRUE(pool->Commit(second, kGranule).ok());
  std::memset(buffer, 'b', kMiB);
  std::memset(frames.data(), 'f', kMiB);
  ASSERT_TRUE(pool->Write({{second, buffer, kMiB}, {second + kMiB, frames.data(), kMiB}}).ok());
  EXPECT_EQ(fake_.stats(1).pageable_host_copies, 0);

  // GPU A stores nothing and goes idle while GPU B goes on copying.
  ASSERT_TRUE(pool->Decommit(0, kGranule).ok());
  ASSERT_TRUE(AwaitRelease(*pool, 0));
  EXPECT_EQ(fake_.stats(0).physical_bytes, 0u);
  EXPECT_EQ(fake_.stats().registered_host_bytes, 2 * kMiB) << "GPU B may be copying from it";
  ASSERT_TRUE(pool->Write({{second + 5, frames.data(), kMiB}}).ok());
  ASSERT_TRUE(pool->Read({{buffer, second + 5, kMiB}}).ok());
  EXPECT_EQ(std::string(buffer, kMiB), std::string(kMiB, 'f'));
  EXPECT_EQ(fake_.stats(1).pageable_host_copies, 0) << "copies from pinned memory only";

  // GPU A comes back, B goes: the pins stay for A.
  ASSERT_TRUE(pool->Commit(0, kGranule).ok());
  ASSERT_TRUE(pool->Decommit(second, kGranule).ok());
  ASSERT_TRUE(AwaitRelease(*pool, 1));
  EXPECT_EQ(fake_.stats().registered_host_bytes, 2 * kMiB);
  ASSERT_TRUE(pool->Write({{7, buffer, kMiB}}).ok());
  ASSERT_TRUE(pool->Read({{frames.data(), 7, kMiB}}).ok());
  EXPECT_EQ(fake_.stats(0).pageable_host_copies, 0);

  // No GPU holds a context: nothing is pinned, nothing is left.
  ASSERT_TRUE(pool->Decommit(0, kGranule).ok());
  ASSERT_TRUE(AwaitRelease(*pool, 0));
  const FakeCudaDriver::Stats stats = fake_.stats();
  EXPECT_EQ(stats.live_contexts, 0);
  EXPECT_EQ(stats.registered_host_bytes, 0u);
  EXPECT_EQ(stats.leaked_at_destroy, 0);
  pool->UnregisterHostMemory(frames.data());
  pool->FreeHostBuffer(buffer, kMiB);
}

TEST_F(CudaPoolTest, ReserveKeepsEachGpusLastBytesForOtherPrograms) {
  const uint64_t total = FakeGpuOptions{}.total_bytes;
  std::unique_ptr<PooledDevice> pool = Open(/*reserve=*/kGiB);
  ASSERT_NE(pool, nullptr);
  // Another program takes all but 1 GiB + one granule of GPU B.
  fake_.set_used_by_others(1, total - kGiB - kGranule);
  const uint64_t second = SecondBase(*pool);
  ASSERT_TRUE(pool->Commit(second, kGranule).ok());
  EXPECT_TRUE(absl::IsResourceExhausted(pool->Commit(second + kGranule, kGranule)))
      << "the last GiB is the reserve";
  EXPECT_TRUE(pool->Commit(0, kGranule).ok()) << "GPU A has room";
  fake_.set_used_by_others(1, 0);
  EXPECT_TRUE(pool->Commit(second + kGranule, kGranule).ok()) << "freed by the other program";
  ASSERT_TRUE(pool->Decommit(0, kGranule).ok());
  ASSERT_TRUE(pool->Decommit(second, 2 * kGranule).ok());
}

TEST_F(CudaPoolTest, AStickyErrorOnOneGpuLeavesTheOtherWorking) {
  std::unique_ptr<PooledDevice> pool = Open();
  ASSERT_NE(pool, nullptr);
  const uint64_t second = SecondBase(*pool);
  ASSERT_TRUE(pool->Commit(0, kGranule).ok());
  ASSERT_TRUE(pool->Commit(second, kGranule).ok());
  std::string bytes(4096, 'a');
  ASSERT_TRUE(pool->Write({{0, bytes.data(), bytes.size()}}).ok());
  // Whichever copy call the device makes (batched where the driver has it).
  for (const char* copy : {"cuMemcpyAsync", "cuMemcpyBatchAsync"}) {
    fake_.FailNext(copy, cu::CUDA_ERROR_ILLEGAL_ADDRESS, 1, /*device=*/1);
  }
  EXPECT_TRUE(absl::IsInternal(pool->Write({{second, bytes.data(), bytes.size()}})));
  EXPECT_TRUE(absl::IsInternal(pool->Read({{bytes.data(), second, bytes.size()}})))
      << "GPU B's context is lost";
  std::string back(4096, '\0');
  ASSERT_TRUE(pool->Read({{back.data(), 0, back.size()}}).ok());
  EXPECT_EQ(back, std::string(4096, 'a'));
  ASSERT_TRUE(pool->Decommit(0, kGranule).ok());
  // As the Arena does: a lost context's memory goes with the context.
  pool->Decommit(second, kGranule).IgnoreError();
}

TEST_F(CudaPoolTest, ExportsNameTheGpuOfEachPiece) {
  std::unique_ptr<PooledDevice> pool = Open();
  ASSERT_NE(pool, nullptr);
  const uint64_t second = SecondBase(*pool);
  ASSERT_TRUE(pool->Commit(0, kGranule).ok());
  ASSERT_TRUE(pool->Commit(second, kGranule).ok());
  {
    const DeviceRange ranges[] = {{0, kGranule}, {second, kGranule}};
    absl::StatusOr<std::unique_ptr<ExportedMemory>> shared =
        pool->ExportShared(2 * kGranule, ranges);
    ASSERT_TRUE(shared.ok()) << shared.status();
    ASSERT_EQ((*shared)->pieces().size(), 2u);
    EXPECT_EQ((*shared)->pieces()[0].pci_bus_id, "0000:65:00.0");
    EXPECT_EQ((*shared)->pieces()[1].pci_bus_id, "0000:66:00.0");

    const DeviceToDevice copies[] = {{0, 0, kGranule}, {kGranule, second, 100}};
    absl::StatusOr<std::vector<Exporter::CopyPiece>> copy = pool->PlanCopy(kGranule + 100, copies);
    ASSERT_TRUE(copy.ok()) << copy.status();
    ASSERT_EQ(copy->size(), 2u);
    EXPECT_EQ((*copy)[0].pci_bus_id, "0000:65:00.0");
    EXPECT_EQ((*copy)[1].pci_bus_id, "0000:66:00.0")
        << "each piece copied on the GPU holding its bytes";
  }
  ASSERT_TRUE(pool->Decommit(0, kGranule).ok());
  ASSERT_TRUE(pool->Decommit(second, kGranule).ok());
}

TEST(CudaDeviceNamesTest, DeviceListsNameEveryGpuOnce) {
  FakeCudaDriver fake({FakeGpuOptions{.pci_bus_id = "0000:65:00.0"},
                       FakeGpuOptions{.pci_bus_id = "0000:66:00.0"},
                       FakeGpuOptions{.pci_bus_id = "0000:67:00.0"}});
  EXPECT_EQ(ResolveCudaDevices(fake.driver(), "").value(), std::vector<int>{0});
  EXPECT_EQ(ResolveCudaDevices(fake.driver(), "all").value(), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(ResolveCudaDevices(fake.driver(), "2+0000:65:00.0").value(),
            (std::vector<int>{2, 0}));
  EXPECT_EQ(ResolveCudaDevices(fake.driver(), "66:00.0,0").value(), (std::vector<int>{1, 0}));
  EXPECT_TRUE(absl::IsInvalidArgument(ResolveCudaDevices(fake.driver(), "1+1").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ResolveCudaDevices(fake.driver(), "0+3").status()));
  EXPECT_TRUE(
      absl::IsInvalidArgument(ResolveCudaDevices(fake.driver(), "0+ff:00.0").status()));
}

}  // namespace
}  // namespace cudafs

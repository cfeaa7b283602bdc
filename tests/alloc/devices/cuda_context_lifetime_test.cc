// CudaDevice on the fake driver (tests/support/fake_cuda_driver.h), so that
// CI, which has no GPU, checks what the device holds and when: no context
// until the first Commit, everything released once idle, pieces of physical
// memory, and failures that cost only the call that met them.
#include <sys/mman.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "alloc/devices/cuda_device.h"
#include "gtest/gtest.h"
#include "tests/support/eventually.h"
#include "tests/support/fake_cuda_driver.h"

namespace cudafs {
namespace {

constexpr uint64_t kGranule = 2 * kMiB;

class CudaContextLifetimeTest : public testing::Test {
 protected:
  std::unique_ptr<CudaDevice> Open(absl::Duration idle_release = absl::InfiniteDuration(),
                                   uint64_t arena_size = 1 * kGiB) {
    absl::StatusOr<std::unique_ptr<CudaDevice>> device = CudaDevice::Create(
        fake_.driver(), 0, arena_size, CudaDeviceOptions{.idle_release = idle_release});
    EXPECT_TRUE(device.ok()) << device.status();
    return device.ok() ? std::move(*device) : nullptr;
  }

  // Waits up to 5 s for the device to drop its context.
  static bool AwaitRelease(const CudaDevice& device) {
    return cudafs_test::Eventually([&] { return !device.stats().has_context; },
                                   std::chrono::seconds(5));
  }

  // Nothing made under any context is left.
  void ExpectNothingHeld() {
    const FakeCudaDriver::Stats stats = fake_.stats();
    EXPECT_EQ(stats.live_contexts, 0);
    EXPECT_EQ(stats.live_streams, 0);
    EXPECT_EQ(stats.live_modules, 0);
    EXPECT_EQ(stats.live_physical_allocations, 0);
    EXPECT_EQ(stats.reserved_bytes, 0u);
    EXPECT_EQ(stats.pinned_host_bytes, 0u);
    EXPECT_EQ(stats.registered_host_bytes, 0u);
    EXPECT_EQ(stats.leaked_at_destroy, 0) << "released the context with resources alive";
  }

  // Writes `length` bytes of `fill` at `offset` from `buffer` and reads them
  // back into pageable memory.
  static void RoundTrip(CudaDevice& device, char* buffer, uint64_t offset, size_t length,
                        char fill) {
    std::memset(buffer, fill, length);
    ASSERT_TRUE(device.Write({{offset, buffer, length}}).ok());
    std::string back(length, '\0');
    ASSERT_TRUE(device.Read({{back.data(), offset, length}}).ok());
    EXPECT_EQ(back, std::string(length, fill));
  }

  FakeCudaDriver fake_;
};

TEST_F(CudaContextLifetimeTest, NothingIsHeldUntilTheFirstCommit) {
  std::unique_ptr<CudaDevice> device = Open();
  ASSERT_NE(device, nullptr);
  char* buffer = static_cast<char*>(device->AllocateHostBuffer(kMiB));
  ASSERT_NE(buffer, nullptr);
  std::vector<char> foreign(kMiB);
  device->RegisterHostMemory(foreign.data(), foreign.size());
  EXPECT_FALSE(device->stats().has_context);
  EXPECT_EQ(fake_.calls("cuDevicePrimaryCtxRetain"), 0);
  ExpectNothingHeld();

  ASSERT_TRUE(device->Commit(0, kGranule).ok());
  EXPECT_TRUE(device->stats().has_context);
  EXPECT_EQ(fake_.stats().live_contexts, 1);
  // Both host ranges were pinned with the context.
  EXPECT_EQ(fake_.stats().registered_host_bytes, 2 * kMiB);
  RoundTrip(*device, buffer, 100, kMiB, 'x');
  RoundTrip(*device, foreign.data(), 100, kMiB, 'y');

  device->UnregisterHostMemory(foreign.data());
  device->FreeHostBuffer(buffer, kMiB);
  EXPECT_EQ(fake_.stats().registered_host_bytes, 0u);
}

TEST_F(CudaContextLifetimeTest, TheContextGoesOnceIdleAndComesBackWithTheNextCommit) {
  std::unique_ptr<CudaDevice> device = Open(absl::Milliseconds(20));
  ASSERT_NE(device, nullptr);
  char* buffer = static_cast<char*>(device->AllocateHostBuffer(kMiB));
  ASSERT_NE(buffer, nullptr);
  for (int round = 1; round <= 3; ++round) {
    ASSERT_TRUE(device->Commit(4 * kGranule, 3 * kGranule).ok());
    RoundTrip(*device, buffer, 4 * kGranule + 7, kMiB, static_cast<char>('a' + round));
    // Scattered pieces from the pinned buffer: the kernel of this context.
    std::vector<HostToDevice> pieces;
    for (uint64_t i = 0; i < 64; ++i) pieces.push_back({4 * kGranule + i * 8192, buffer, 512});
    ASSERT_TRUE(device->Write(pieces).ok());
    EXPECT_EQ(device->stats().scattered_writes, static_cast<uint64_t>(round));
    ASSERT_TRUE(device->Decommit(4 * kGranule, 3 * kGranule).ok());
    ASSERT_TRUE(AwaitRelease(*device)) << "round " << round;
    EXPECT_EQ(device->stats().contexts_created, static_cast<uint64_t>(round));
    EXPECT_EQ(fake_.stats().contexts_created, round);
    ExpectNothingHeld();
  }
  device->FreeHostBuffer(buffer, kMiB);
}

TEST_F(CudaContextLifetimeTest, StoredDataKeepsTheContext) {
  std::unique_ptr<CudaDevice> device = Open(absl::Milliseconds(1));
  ASSERT_NE(device, nullptr);
  ASSERT_TRUE(device->Commit(0, 2 * kGranule).ok());
  ASSERT_TRUE(device->Decommit(kGranule, kGranule).ok());
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_TRUE(device->stats().has_context);
  // Re-committing within the idle time keeps the same context.
  ASSERT_TRUE(device->Decommit(0, kGranule).ok());
  ASSERT_TRUE(device->Commit(0, kGranule).ok());
  EXPECT_EQ(device->stats().contexts_created, 1u);
}

TEST_F(CudaContextLifetimeTest, NeverMeansTheContextStays) {
  std::unique_ptr<CudaDevice> device = Open(absl::InfiniteDuration());
  ASSERT_NE(device, nullptr);
  ASSERT_TRUE(device->Commit(0, kGranule).ok());
  ASSERT_TRUE(device->Decommit(0, kGranule).ok());
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_TRUE(device->stats().has_context);
  device.reset();
  ExpectNothingHeld();
}

// A run of granules is backed by pieces of up to kMaxPieceBytes; a piece
// stays until all of it is decommitted, and its decommitted granules come
// back without a new allocation.
TEST_F(CudaContextLifetimeTest, LargeCommitsAreBackedByLargePieces) {
  std::unique_ptr<CudaDevice> device = Open();
  ASSERT_NE(device, nullptr);
  const uint64_t run = 3 * CudaDevice::kMaxPieceBytes;
  ASSERT_TRUE(device->Commit(0, run).ok());
  EXPECT_EQ(device->stats().pieces, 3u);
  EXPECT_EQ(fake_.stats().largest_create, CudaDevice::kMaxPieceBytes);
  EXPECT_EQ(fake_.stats().physical_bytes, run);

  // A granule in the middle of the first piece: the piece stays.
  const int creates = fake_.calls("cuMemCreate");
  ASSERT_TRUE(device->Decommit(4 * kGranule, kGranule).ok());
  EXPECT_EQ(fake_.stats().physical_bytes, run);
  ASSERT_TRUE(device->Commit(4 * kGranule, kGranule).ok());
  EXPECT_EQ(fake_.calls("cuMemCreate"), creates);
  // Data written before survives in granules never decommitted.
  std::string data(kGranule, 'd');
  ASSERT_TRUE(device->Write({{run - kGranule, data.data(), data.size()}}).ok());

  // The first piece whole: its memory goes.
  ASSERT_TRUE(device->Decommit(0, CudaDevice::kMaxPieceBytes).ok());
  EXPECT_EQ(fake_.stats().physical_bytes, run - CudaDevice::kMaxPieceBytes);
  EXPECT_EQ(device->stats().pieces, 2u);
  std::string back(kGranule, '\0');
  ASSERT_TRUE(device->Read({{back.data(), run - kGranule, back.size()}}).ok());
  EXPECT_EQ(back, data);
  // Runs of granules a piece already backs, and fresh ones between them.
  ASSERT_TRUE(device->Commit(0, 2 * kGranule).ok());
  EXPECT_EQ(device->stats().pieces, 3u);
  EXPECT_EQ(fake_.stats().largest_create, CudaDevice::kMaxPieceBytes);
  ASSERT_TRUE(device->Decommit(0, run).ok());
  EXPECT_EQ(fake_.stats().physical_bytes, 0u);
  EXPECT_EQ(device->stats().pieces, 0u);
}

// A piece emptied by one decommit is unmapped outside the device's lock;
// a commit of another of its granules meanwhile must not map over it (the
// driver refuses a mapping over a mapped range): it waits for the unmap.
TEST_F(CudaContextLifetimeTest, ACommitWaitsForThePieceItWouldMapOverToGo) {
  std::unique_ptr<CudaDevice> device = Open();
  ASSERT_NE(device, nullptr);
  ASSERT_TRUE(device->Commit(0, 2 * kGranule).ok());  // one piece of two granules
  ASSERT_TRUE(device->Decommit(kGranule, kGranule).ok());  // still mapped, for granule 0
  absl::Notification unmapping, go_on;
  fake_.OnCall("cuMemUnmap", [&] {
    unmapping.Notify();
    go_on.WaitForNotification();
  });
  std::thread decommit([&] { EXPECT_TRUE(device->Decommit(0, kGranule).ok()); });
  unmapping.WaitForNotification();
  fake_.OnCall("cuMemUnmap", nullptr);
  absl::Status committed;
  std::thread commit([&] { committed = device->Commit(kGranule, kGranule); });
  absl::SleepFor(absl::Milliseconds(50));
  go_on.Notify();
  decommit.join();
  commit.join();
  EXPECT_TRUE(committed.ok()) << committed;
  EXPECT_EQ(device->stats().pieces, 1u);
}

TEST_F(CudaContextLifetimeTest, OutOfVramFailsTheWholeCommitAndKeepsTheRest) {
  std::unique_ptr<CudaDevice> device = Open();
  ASSERT_NE(device, nullptr);
  ASSERT_TRUE(device->Commit(0, kGranule).ok());
  const char marker[] = "kept";
  ASSERT_TRUE(device->Write({{0, marker, sizeof marker}}).ok());
  fake_.set_vram_limit(48 * kMiB);
  absl::Status status = device->Commit(CudaDevice::kMaxPieceBytes, 2 * CudaDevice::kMaxPieceBytes);
  EXPECT_TRUE(absl::IsResourceExhausted(status)) << status;
  EXPECT_EQ(fake_.stats().physical_bytes, kGranule);
  EXPECT_EQ(device->stats().pieces, 1u);
  char out[sizeof marker] = {};
  ASSERT_TRUE(device->Read({{out, 0, sizeof out}}).ok());
  EXPECT_STREQ(out, marker);
}

// A context that cannot be made fails the Commit that needed it (ENOSPC for
// want of memory, EIO otherwise), leaves nothing behind, and the next
// Commit tries again.
TEST_F(CudaContextLifetimeTest, AContextThatCannotBeMadeFailsOnlyThatCommit) {
  std::unique_ptr<CudaDevice> device = Open();
  ASSERT_NE(device, nullptr);
  fake_.FailNext("cuDevicePrimaryCtxRetain", cu::CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_TRUE(absl::IsResourceExhausted(device->Commit(0, kGranule)));
  fake_.FailNext("cuDevicePrimaryCtxRetain", cu::CUDA_ERROR_DEVICE_UNAVAILABLE);
  EXPECT_TRUE(absl::IsInternal(device->Commit(0, kGranule)));
  // Half made: the streams cannot all be had.
  fake_.FailNext("cuStreamCreate", cu::CUDA_ERROR_UNKNOWN);
  EXPECT_TRUE(absl::IsInternal(device->Commit(0, kGranule)));
  EXPECT_FALSE(device->stats().has_context);
  ExpectNothingHeld();
  // A data call without a context is an error, not a crash.
  char byte = 0;
  EXPECT_FALSE(device->Write({{0, &byte, 1}}).ok());

  ASSERT_TRUE(device->Commit(0, kGranule).ok());
  EXPECT_EQ(device->stats().contexts_created, 1u);
  ASSERT_TRUE(device->Write({{0, &byte, 1}}).ok());
}

TEST_F(CudaContextLifetimeTest, DestroyingTheDeviceReleasesEverything) {
  {
    std::unique_ptr<CudaDevice> device = Open(absl::Seconds(60));
    ASSERT_NE(device, nullptr);
    char* buffer = static_cast<char*>(device->AllocateHostBuffer(kMiB));
    ASSERT_TRUE(device->Commit(0, 40 * kMiB).ok());
    RoundTrip(*device, buffer, 0, kMiB, 'z');
    device->FreeHostBuffer(buffer, kMiB);
  }
  ExpectNothingHeld();
}

// Commits, writes and decommits of disjoint ranges from several threads
// while the idle time is short enough that the context comes and goes
// between them: every round trip holds, and nothing leaks.
TEST_F(CudaContextLifetimeTest, ConcurrentUseWhileTheContextComesAndGoes) {
  std::unique_ptr<CudaDevice> device = Open(absl::Microseconds(100));
  ASSERT_NE(device, nullptr);
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      char* buffer = static_cast<char*>(device->AllocateHostBuffer(64 * kKiB));
      std::mt19937 rng(t);
      for (int i = 0; i < 200; ++i) {
        const uint64_t offset = (t * 8 + rng() % 8) * kGranule;
        if (!device->Commit(offset, kGranule).ok()) {
          ++failures;
          continue;
        }
        std::memset(buffer, t + i, 64 * kKiB);
        std::string back(64 * kKiB, '\0');
        if (!device->Write({{offset + 4096, buffer, 64 * kKiB}}).ok() ||
            !device->Read({{back.data(), offset + 4096, back.size()}}).ok() ||
            back != std::string(buffer, 64 * kKiB)) {
          ++failures;
        }
        if (!device->Decommit(offset, kGranule).ok()) ++failures;
        if (i % 50 == 0) absl::SleepFor(absl::Milliseconds(2));
      }
      device->FreeHostBuffer(buffer, 64 * kKiB);
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GE(device->stats().contexts_created, 1u);
  ASSERT_TRUE(AwaitRelease(*device));
  ExpectNothingHeld();
}

// FillCopy: the copy lands in the caller's allocation (here made through
// the fake by hand, as the client library makes it), zero but for the
// copies; the device imports it only while copying.
TEST_F(CudaContextLifetimeTest, ACopyFillsTheCallersAllocation) {
  std::unique_ptr<CudaDevice> device = Open(absl::Milliseconds(20));
  ASSERT_NE(device, nullptr);
  ASSERT_TRUE(device->Commit(0, kGranule).ok());
  const std::string data(100000, 'd');
  ASSERT_TRUE(device->Write({{4096, data.data(), data.size()}}).ok());
  absl::StatusOr<std::vector<Exporter::CopyPiece>> plan = device->exporter()->PlanCopy(kGranule + 5, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->size(), 1u);
  EXPECT_EQ((*plan)[0].kind, ExportedMemory::Kind::kCuda);
  EXPECT_EQ((*plan)[0].pci_bus_id, "0000:65:00.0") << "where the caller allocates";
  EXPECT_EQ((*plan)[0].bytes, 2 * kGranule) << "whole granules";

  const CudaDriver& cu = fake_.driver();
  cu::CUcontext caller;
  ASSERT_EQ(cu.cuDevicePrimaryCtxRetain(&caller, 0), cu::CUDA_SUCCESS);
  ASSERT_EQ(cu.cuCtxSetCurrent(caller), cu::CUDA_SUCCESS);
  cu::CUmemAllocationProp prop = {};
  prop.type = cu::CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location = {cu::CU_MEM_LOCATION_TYPE_DEVICE, 0};
  prop.requestedHandleTypes = cu::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  cu::CUmemGenericAllocationHandle handle;
  ASSERT_EQ(cu.cuMemCreate(&handle, 2 * kGranule, &prop, 0), cu::CUDA_SUCCESS);
  int memory = -1;
  ASSERT_EQ(cu.cuMemExportToShareableHandle(&memory, handle,
                                            cu::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
            cu::CUDA_SUCCESS);
  ASSERT_EQ(pwrite(memory, "stale", 5, 0), 5);
  ASSERT_TRUE(device->exporter()->FillCopy({{memory, 2 * kGranule}}, {{kMiB, 4096, data.size()}}).ok());
  void* view = mmap(nullptr, 2 * kGranule, PROT_READ, MAP_SHARED, memory, 0);
  ASSERT_NE(view, MAP_FAILED);
  const std::string_view bytes(static_cast<const char*>(view), 2 * kGranule);
  EXPECT_EQ(bytes.substr(kMiB, data.size()), data);
  EXPECT_EQ(bytes.substr(0, kMiB), std::string(kMiB, '\0')) << "the caller's bytes are zeroed";
  EXPECT_EQ(bytes.substr(kMiB + data.size()),
            std::string(2 * kGranule - kMiB - data.size(), '\0'));
  munmap(view, 2 * kGranule);
  // Too small, not whole granules, out of range, or not a CUDA allocation:
  // refused.
  EXPECT_TRUE(absl::IsInvalidArgument(device->exporter()->FillCopy({{memory, 4 * kGranule}}, {})));
  EXPECT_TRUE(absl::IsInvalidArgument(device->exporter()->FillCopy({{memory, kMiB}}, {})));
  EXPECT_FALSE(device->exporter()->FillCopy({{memory, 2 * kGranule}}, {{0, 2 * kGiB, 10}}).ok());
  const int not_cuda = memfd_create("not-cuda", MFD_CLOEXEC);
  ASSERT_EQ(ftruncate(not_cuda, 2 * kGranule), 0);
  EXPECT_TRUE(absl::IsInvalidArgument(device->exporter()->FillCopy({{not_cuda, 2 * kGranule}}, {})));
  close(not_cuda);
  close(memory);
  ASSERT_EQ(cu.cuMemRelease(handle), cu::CUDA_SUCCESS);
  ASSERT_EQ(cu.cuDevicePrimaryCtxRelease(0), cu::CUDA_SUCCESS);
  ASSERT_TRUE(device->Decommit(0, kGranule).ok());
  EXPECT_TRUE(AwaitRelease(*device));
  ExpectNothingHeld();
}

// ExportShared hands out the pieces themselves, only for ranges whose
// pieces lie inside them with every granule committed: a piece that a
// decommit left mapped for a neighbour's sake is not the range's own.
TEST_F(CudaContextLifetimeTest, SharedExportsAreThePiecesOfARangeOfItsOwn) {
  std::unique_ptr<CudaDevice> device = Open(absl::Milliseconds(20));
  ASSERT_NE(device, nullptr);
  constexpr uint64_t kLength = 8 * kGranule;
  ASSERT_TRUE(device->Commit(0, kLength).ok());
  EXPECT_TRUE(device->exporter()->can_share());
  EXPECT_TRUE(device->exporter()->Exclusive({0, kLength}));
  EXPECT_FALSE(device->exporter()->Exclusive({0, kGranule})) << "its piece reaches past it";
  EXPECT_TRUE(device->exporter()->Exclusive({0, 2 * kLength})) << "the piece lies inside";
  EXPECT_TRUE(absl::IsFailedPrecondition(device->exporter()->ExportShared(1, {{0, 2 * kLength}}).status()))
      << "not all committed";
  ASSERT_TRUE(device->Write({{kGranule + 7, "file", 4}}).ok());
  absl::StatusOr<std::unique_ptr<ExportedMemory>> exported =
      device->exporter()->ExportShared(kLength - 1, {{0, kLength}});
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_EQ((*exported)->size(), kLength - 1);
  ASSERT_EQ((*exported)->pieces().size(), 1u);
  const ExportedPiece piece = (*exported)->pieces()[0];
  EXPECT_EQ(piece.size, kLength);
  char* view =
      static_cast<char*>(mmap(nullptr, piece.size, PROT_READ | PROT_WRITE, MAP_SHARED, piece.fd, 0));
  ASSERT_NE(view, MAP_FAILED);
  EXPECT_EQ(std::string_view(view + kGranule + 7, 4), "file");
  std::memcpy(view, "importer", 8);
  std::string out(8, '?');
  ASSERT_TRUE(device->Read({{out.data(), 0, 8}}).ok());
  EXPECT_EQ(out, "importer");
  exported->reset();
  munmap(view, piece.size);

  // Half decommitted and committed again: the old piece backs it still,
  // and the half before, so neither half is a range of its own.
  ASSERT_TRUE(device->Decommit(kLength / 2, kLength / 2).ok());
  EXPECT_FALSE(device->exporter()->Exclusive({kLength / 2, kLength / 2})) << "free, but not fresh";
  ASSERT_TRUE(device->Commit(kLength / 2, kLength / 2).ok());
  EXPECT_FALSE(device->exporter()->Exclusive({kLength / 2, kLength / 2}));
  EXPECT_TRUE(absl::IsFailedPrecondition(
      device->exporter()->ExportShared(1, {{kLength / 2, kLength / 2}}).status()));
  ASSERT_TRUE(device->Decommit(0, kLength).ok());
  EXPECT_TRUE(AwaitRelease(*device));
  ExpectNothingHeld();
}

// A piece handed out is zeroed when the arena releases it: the importer's
// mapping keeps the memory (the daemon cannot take it back), but not the
// file's bytes, which a truncate or removal took from the file.
TEST_F(CudaContextLifetimeTest, SharedPiecesAreZeroedWhenReleased) {
  std::unique_ptr<CudaDevice> device = Open(absl::Milliseconds(20));
  ASSERT_NE(device, nullptr);
  constexpr uint64_t kLength = 2 * kGranule;
  ASSERT_TRUE(device->Commit(0, kLength).ok());
  ASSERT_TRUE(device->Write({{kGranule + 7, "file", 4}}).ok());
  absl::StatusOr<std::unique_ptr<ExportedMemory>> exported =
      device->exporter()->ExportShared(kLength, {{0, kLength}});
  ASSERT_TRUE(exported.ok()) << exported.status();
  ASSERT_EQ((*exported)->pieces().size(), 1u);
  const ExportedPiece piece = (*exported)->pieces()[0];
  char* view = static_cast<char*>(mmap(nullptr, piece.size, PROT_READ, MAP_SHARED, piece.fd, 0));
  ASSERT_NE(view, MAP_FAILED);
  exported->reset();
  ASSERT_TRUE(device->Decommit(0, kGranule).ok());
  EXPECT_EQ(std::string_view(view + kGranule + 7, 4), "file") << "the piece still backs a granule";
  ASSERT_TRUE(device->Decommit(kGranule, kGranule).ok());
  EXPECT_TRUE(std::string_view(view, piece.size) == std::string(piece.size, '\0'));
  munmap(view, piece.size);
  EXPECT_TRUE(AwaitRelease(*device));
  ExpectNothingHeld();
}

}  // namespace
}  // namespace cudafs

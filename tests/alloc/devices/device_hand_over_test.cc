#include "alloc/devices/device_hand_over.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "alloc/base/sizes.h"
#include "alloc/devices/cuda_device.h"
#include "alloc/devices/host_device.h"
#include "alloc/devices/null_device.h"
#include "alloc/devices/pooled_device.h"
#include "gtest/gtest.h"
#include "tests/support/device_bytes.h"
#include "tests/support/fake_cuda_driver.h"
#include "tests/support/open_descriptors.h"
#include "tests/support/random_pattern.h"

namespace cudafs {
namespace {

using cudafs_test::OpenDescriptors;

std::string Bytes(size_t length, uint32_t seed) {
  const std::vector<char> bytes = Pattern(length, seed);
  return std::string(bytes.begin(), bytes.end());
}

constexpr uint64_t kGpuArena = 256 * kMiB;
constexpr uint64_t kSpill = 64 * kMiB;

// Commits [offset, offset + bytes.size()) and writes `bytes` there.
void CommitAndWrite(Device& device, uint64_t offset, const std::string& bytes) {
  ASSERT_TRUE(device.Commit(offset, bytes.size()).ok());
  WriteAt(device, offset, bytes);
}

class DeviceHandOverTest : public testing::Test {
 protected:
  DeviceHandOverTest()
      : fake_({FakeGpuOptions{.name = "Fake GPU A", .pci_bus_id = "0000:65:00.0"},
               FakeGpuOptions{.name = "Fake GPU B", .pci_bus_id = "0000:66:00.0"}}) {}

  std::unique_ptr<CudaDevice> Gpu(int index, uint64_t reserve = 0) {
    return CudaDevice::Create(fake_.driver(), index, kGpuArena,
                              CudaDeviceOptions{.idle_release = absl::Seconds(7),
                                                .reserve_bytes = reserve})
        .value();
  }
  // Both GPUs, and host memory to spill to.
  std::unique_ptr<PooledDevice> Pool() {
    std::vector<std::unique_ptr<Device>> gpus;
    gpus.push_back(Gpu(0, 3 * kMiB));
    gpus.push_back(Gpu(1));
    return PooledDevice::Create(std::move(gpus),
                                HostDevice::Create(kSpill, HostDevice::Backing::kHugePages).value())
        .value();
  }

  FakeCudaDriver fake_;
};

// Files on both GPUs of a pool, one piece of which holds data only in
// some granules: the successor sees the same bytes at the same offsets,
// the same pieces, and the GPUs' memory is not taken twice.
TEST_F(DeviceHandOverTest, APoolOfGpusPassesWithEveryByteInPlace) {
  std::unique_ptr<PooledDevice> pool = Pool();
  const uint64_t second = pool->parts()[1].range.offset;
  const uint64_t granule = pool->granule_size();
  const std::string a = Bytes(5 * granule, 1);
  const std::string b = Bytes(3 * granule, 2);
  CommitAndWrite(*pool, 0, a);
  CommitAndWrite(*pool, second + 8 * granule, b);
  // Granule 1 uncommitted: its piece stays mapped, holding the others.
  ASSERT_TRUE(pool->Decommit(granule, granule).ok());
  const uint64_t free0 = pool->PartMemory(0)->free;
  const uint64_t free1 = pool->PartMemory(1)->free;

  absl::StatusOr<DeviceHandOver> handed = DeviceHandOver::Of(*pool);
  ASSERT_TRUE(handed.ok()) << handed.status();
  EXPECT_TRUE(handed->on_gpus());
  absl::StatusOr<std::unique_ptr<Device>> adopted = handed->Adopt(&fake_.driver());
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  EXPECT_TRUE(handed->fds().empty());
  Device& successor = **adopted;
  EXPECT_EQ(successor.arena_size(), pool->arena_size());
  EXPECT_EQ(successor.Describe(), pool->Describe());
  ASSERT_EQ(successor.parts().size(), 3u);
  EXPECT_TRUE(successor.parts()[2].spill);
  EXPECT_EQ(successor.PartMemory(0)->free, free0) << "imported, not made again";
  EXPECT_EQ(successor.PartMemory(1)->free, free1);

  // The predecessor ends: the memory stays, held by the successor.
  pool.reset();
  EXPECT_EQ(successor.PartMemory(0)->free, free0);
  EXPECT_EQ(successor.PartMemory(1)->free, free1);
  EXPECT_EQ(ReadBack(successor, 0, granule), a.substr(0, granule));
  EXPECT_EQ(ReadBack(successor, 2 * granule, 3 * granule), a.substr(2 * granule));
  EXPECT_EQ(ReadBack(successor, second + 8 * granule, b.size()), b);
  // And hands it on again: the driver exports no handle imported, so
  // the successor kept the descriptors.
  absl::StatusOr<DeviceHandOver> again = DeviceHandOver::Of(successor);
  ASSERT_TRUE(again.ok()) << again.status();
  absl::StatusOr<std::unique_ptr<Device>> third = again->Adopt(&fake_.driver());
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_EQ(ReadBack(**third, second + 8 * granule, b.size()), b);
  third->reset();
  EXPECT_EQ(successor.PartMemory(1)->free, free1);

  // The successor's table is the predecessor's: committing the handed
  // granules again maps nothing, and freeing them all frees the memory.
  const int creates = fake_.calls("cuMemCreate");
  ASSERT_TRUE(successor.Commit(0, granule).ok());
  ASSERT_TRUE(successor.Commit(second + 8 * granule, b.size()).ok());
  EXPECT_EQ(fake_.calls("cuMemCreate"), creates);
  ASSERT_TRUE(successor.Decommit(0, 5 * granule).ok());
  ASSERT_TRUE(successor.Decommit(second + 8 * granule, b.size()).ok());
  EXPECT_EQ(fake_.stats().physical_bytes, 0u);
}

TEST_F(DeviceHandOverTest, AGpuKeepsItsOptions) {
  std::unique_ptr<CudaDevice> gpu = Gpu(1, 5 * kMiB);
  CommitAndWrite(*gpu, 0, Bytes(gpu->granule_size(), 3));
  absl::StatusOr<DeviceHandOver> handed = DeviceHandOver::Of(*gpu);
  ASSERT_TRUE(handed.ok()) << handed.status();
  absl::StatusOr<std::unique_ptr<Device>> adopted = handed->Adopt(&fake_.driver());
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  auto* successor = dynamic_cast<CudaDevice*>(adopted->get());
  ASSERT_NE(successor, nullptr);
  EXPECT_EQ(successor->pci_bus_id(), "0000:66:00.0");
  EXPECT_EQ(successor->options().reserve_bytes, 5 * kMiB);
  EXPECT_EQ(successor->options().idle_release, absl::Seconds(7));
  EXPECT_EQ(ReadBack(*successor, 0, gpu->granule_size()),
            Bytes(gpu->granule_size(), 3));
}

TEST_F(DeviceHandOverTest, AnEmptyGpuPassesWithoutAContext) {
  std::unique_ptr<CudaDevice> gpu = Gpu(0);
  absl::StatusOr<DeviceHandOver> handed = DeviceHandOver::Of(*gpu);
  ASSERT_TRUE(handed.ok()) << handed.status();
  EXPECT_TRUE(handed->fds().empty());
  absl::StatusOr<std::unique_ptr<Device>> adopted = handed->Adopt(&fake_.driver());
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  EXPECT_EQ(fake_.stats().live_contexts, 0);
}

TEST_F(DeviceHandOverTest, HostMemoryPassesAsItsMemfd) {
  std::unique_ptr<HostDevice> host = HostDevice::Create(16 * kMiB).value();
  const std::string bytes = Bytes(2 * kMiB, 4);
  CommitAndWrite(*host, 4 * kMiB, bytes);
  absl::StatusOr<DeviceHandOver> handed = DeviceHandOver::Of(*host);
  ASSERT_TRUE(handed.ok()) << handed.status();
  EXPECT_FALSE(handed->on_gpus());
  absl::StatusOr<std::unique_ptr<Device>> adopted = handed->Adopt(&fake_.driver());
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  host.reset();
  EXPECT_EQ(ReadBack(**adopted, 4 * kMiB, bytes.size()), bytes);
}

TEST_F(DeviceHandOverTest, FilesInSpilledHostMemoryDoNotPass) {
  std::unique_ptr<PooledDevice> pool = Pool();
  CommitAndWrite(*pool, pool->parts()[2].range.offset, Bytes(kMiB, 5));
  CommitAndWrite(*pool, 0, Bytes(kMiB, 6));
  const int before = OpenDescriptors();  // the fake's VRAM is memfds
  absl::StatusOr<DeviceHandOver> handed = DeviceHandOver::Of(*pool);
  EXPECT_TRUE(absl::IsFailedPrecondition(handed.status())) << handed.status();
  EXPECT_NE(handed.status().message().find("host memory the GPUs spilled to"), std::string::npos);
  EXPECT_EQ(OpenDescriptors(), before) << "the GPU's exported pieces are closed";
}

TEST_F(DeviceHandOverTest, MemoryThatCannotPassIsRefusedWithNoDescriptorLeft) {
  NullDevice null(64 * kMiB);
  EXPECT_TRUE(absl::IsFailedPrecondition(DeviceHandOver::Of(null).status()));
  std::unique_ptr<HostDevice> anonymous =
      HostDevice::Create(16 * kMiB, HostDevice::Backing::kHugePages).value();
  EXPECT_TRUE(absl::IsFailedPrecondition(DeviceHandOver::Of(*anonymous).status()));

  std::unique_ptr<PooledDevice> pool = Pool();
  const uint64_t second = pool->parts()[1].range.offset;
  CommitAndWrite(*pool, 0, Bytes(kMiB, 7));
  CommitAndWrite(*pool, second, Bytes(kMiB, 8));
  const int before = OpenDescriptors();
  fake_.FailNext("cuMemExportToShareableHandle", cu::CUDA_ERROR_NOT_SUPPORTED, 1, /*device=*/1);
  EXPECT_FALSE(DeviceHandOver::Of(*pool).ok());
  EXPECT_EQ(OpenDescriptors(), before);
}

// A keeper's hold (survive=on): taken while the GPUs held nothing, it
// follows each piece mapped and released since, and a successor adopting
// it finds every byte stored since in place; pieces released are let go.
TEST_F(DeviceHandOverTest, AHoldFollowsThePiecesMappedAndReleasedSince) {
  std::vector<std::unique_ptr<Device>> gpus;
  gpus.push_back(Gpu(0));
  gpus.push_back(Gpu(1));
  std::unique_ptr<PooledDevice> pool = PooledDevice::Create(std::move(gpus)).value();
  absl::StatusOr<DeviceHandOver> held = DeviceHandOver::Of(*pool);
  ASSERT_TRUE(held.ok()) << held.status();
  std::vector<DeviceHandOver::PieceChange> changes;
  ASSERT_TRUE(DeviceHandOver::WatchPieces(
                  *pool, [&](const DeviceHandOver::PieceChange& change) { changes.push_back(change); })
                  .ok());
  const uint64_t second = pool->parts()[1].range.offset;
  const uint64_t granule = pool->granule_size();
  const std::string a = Bytes(3 * granule, 12);
  const std::string b = Bytes(2 * granule, 13);
  CommitAndWrite(*pool, 0, a);
  CommitAndWrite(*pool, second + 4 * granule, b);
  CommitAndWrite(*pool, 10 * granule, Bytes(granule, 14));
  ASSERT_TRUE(pool->Decommit(10 * granule, granule).ok());
  ASSERT_EQ(changes.size(), 4u);
  EXPECT_TRUE(changes[0].mapped && changes[0].gpu == 0 && changes[0].piece.offset == 0);
  EXPECT_TRUE(changes[1].mapped && changes[1].gpu == 1 && changes[1].piece.offset == 4 * granule);
  EXPECT_TRUE(!changes[3].mapped && changes[3].gpu == 0 && changes[3].piece.offset == 10 * granule);
  const int before = OpenDescriptors();
  for (const DeviceHandOver::PieceChange& change : changes) {
    ASSERT_TRUE(held->Apply(change).ok());
  }
  EXPECT_EQ(OpenDescriptors(), before - 1) << "the released piece's descriptor is closed";
  EXPECT_EQ(held->fds().size(), 2u);
  // A piece at an offset the daemon released without saying, and a GPU
  // the layout lacks.
  ASSERT_TRUE(held->Apply({.gpu = 0, .mapped = false, .piece = {.offset = 77 * granule}}).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(
      held->Apply({.gpu = 2, .mapped = true, .piece = {.offset = 0, .length = granule,
                                                     .committed = 1, .fd = dup(0)}})));
  EXPECT_EQ(OpenDescriptors(), before - 1);
  absl::StatusOr<std::unique_ptr<Device>> adopted = held->Adopt(&fake_.driver());
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  EXPECT_EQ(ReadBack(**adopted, 0, a.size()), a);
  EXPECT_EQ(ReadBack(**adopted, second + 4 * granule, b.size()), b);
}

// A mapped piece replaces those it overlaps (released by a daemon that died
// before saying so).
TEST_F(DeviceHandOverTest, AMappedPieceReplacesThoseItOverlaps) {
  std::unique_ptr<CudaDevice> gpu = Gpu(0);
  absl::StatusOr<DeviceHandOver> held = DeviceHandOver::Of(*gpu);
  ASSERT_TRUE(held.ok()) << held.status();
  std::vector<DeviceHandOver::PieceChange> changes;
  ASSERT_TRUE(DeviceHandOver::WatchPieces(
                  *gpu, [&](const DeviceHandOver::PieceChange& change) { changes.push_back(change); })
                  .ok());
  const uint64_t granule = gpu->granule_size();
  CommitAndWrite(*gpu, 0, Bytes(granule, 15));
  CommitAndWrite(*gpu, granule, Bytes(granule, 16));
  ASSERT_EQ(changes.size(), 2u);
  for (const DeviceHandOver::PieceChange& change : changes) ASSERT_TRUE(held->Apply(change).ok());
  const std::string bytes = Bytes(2 * granule, 17);
  ASSERT_TRUE(gpu->Decommit(0, 2 * granule).ok());
  EXPECT_EQ(changes.size(), 4u);
  changes.clear();  // the releases lost
  CommitAndWrite(*gpu, 0, bytes);
  ASSERT_EQ(changes.size(), 1u);
  ASSERT_TRUE(held->Apply(changes[0]).ok());
  EXPECT_EQ(held->fds().size(), 1u);
  absl::StatusOr<std::unique_ptr<Device>> adopted = held->Adopt(&fake_.driver());
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  EXPECT_EQ(ReadBack(**adopted, 0, bytes.size()), bytes);
}

TEST_F(DeviceHandOverTest, APoolThatSpillsToHostMemoryCannotBeWatched) {
  std::unique_ptr<PooledDevice> pool = Pool();
  const absl::Status watched =
      DeviceHandOver::WatchPieces(*pool, [](const DeviceHandOver::PieceChange&) {});
  EXPECT_TRUE(absl::IsFailedPrecondition(watched)) << watched;
  EXPECT_NE(watched.message().find("spill=0"), std::string::npos);
  std::unique_ptr<HostDevice> host = HostDevice::Create(16 * kMiB).value();
  EXPECT_TRUE(absl::IsFailedPrecondition(
      DeviceHandOver::WatchPieces(*host, [](const DeviceHandOver::PieceChange&) {})));
}

// A successor that fails to take the memory holds none of it, and leaves
// the predecessor's as it was.
TEST_F(DeviceHandOverTest, ASuccessorThatCannotMapTheMemoryHoldsNoneOfIt) {
  std::unique_ptr<PooledDevice> pool = Pool();
  const uint64_t second = pool->parts()[1].range.offset;
  const std::string bytes = Bytes(4 * kMiB, 9);
  CommitAndWrite(*pool, 0, bytes);
  CommitAndWrite(*pool, second, bytes);
  const FakeCudaDriver::Stats stats = fake_.stats();
  const int before = OpenDescriptors();
  absl::StatusOr<DeviceHandOver> handed = DeviceHandOver::Of(*pool);
  ASSERT_TRUE(handed.ok()) << handed.status();
  fake_.FailNext("cuMemMap", cu::CUDA_ERROR_OUT_OF_MEMORY, 1, /*device=*/1);
  EXPECT_FALSE(handed->Adopt(&fake_.driver()).ok());
  EXPECT_EQ(OpenDescriptors(), before);
  EXPECT_EQ(fake_.stats().physical_bytes, stats.physical_bytes);
  EXPECT_EQ(fake_.stats().mapped_bytes, stats.mapped_bytes);
  EXPECT_EQ(ReadBack(*pool, second, bytes.size()), bytes);
}

// Pieces no arena could have held (overlapping, out of order, past the
// arena, holding no data) are refused before any is mapped, their
// descriptors closed.
TEST_F(DeviceHandOverTest, PiecesNoArenaCouldHoldAreRefusedAndClosed) {
  std::unique_ptr<CudaDevice> gpu = Gpu(0);
  const uint64_t granule = gpu->granule_size();
  CommitAndWrite(*gpu, 0, Bytes(4 * granule, 11));
  absl::StatusOr<DeviceHandOver> handed = DeviceHandOver::Of(*gpu);
  ASSERT_TRUE(handed.ok()) << handed.status();
  ASSERT_FALSE(handed->fds().empty());
  const int fd = handed->fds().front();
  const int before = OpenDescriptors();
  using Piece = CudaDevice::HandedPiece;
  for (const std::vector<Piece>& bad : std::vector<std::vector<Piece>>{
           {{0, 2 * granule, 3, false, -1}, {granule, granule, 1, false, -1}},
           {{2 * granule, granule, 1, false, -1}, {0, granule, 1, false, -1}},
           {{kGpuArena, granule, 1, false, -1}},
           {{0, granule, 0, false, -1}},
           {{granule / 2, granule, 1, false, -1}}}) {
    std::vector<Piece> given = bad;
    for (Piece& piece : given) piece.fd = dup(fd);
    std::unique_ptr<CudaDevice> successor = Gpu(0);
    EXPECT_TRUE(absl::IsInvalidArgument(successor->AdoptPieces(given)));
    EXPECT_EQ(successor->stats().pieces, 0u);
    EXPECT_EQ(OpenDescriptors(), before);
  }
}

TEST_F(DeviceHandOverTest, ALayoutThatDoesNotMatchItsDescriptorsIsRefusedAndClosed) {
  std::unique_ptr<CudaDevice> gpu = Gpu(0);
  CommitAndWrite(*gpu, 0, Bytes(kMiB, 10));
  absl::StatusOr<DeviceHandOver> handed = DeviceHandOver::Of(*gpu);
  ASSERT_TRUE(handed.ok()) << handed.status();
  const std::string layout = handed->layout();
  std::vector<int> fds;
  for (const int fd : handed->fds()) fds.push_back(dup(fd));
  const auto copy_of_fds = [&] {
    std::vector<int> copy;
    for (const int fd : fds) copy.push_back(dup(fd));
    return copy;
  };
  const int before = OpenDescriptors();
  // Cut short, one descriptor too many, another kind, another GPU.
  for (const auto& [bad, extra] : std::vector<std::pair<std::string, bool>>{
           {layout.substr(0, layout.size() - 1), false},
           {layout, true},
           {"Z" + layout.substr(1), false},
           {std::string("P\1") + layout + "\0", false}}) {
    std::vector<int> given = copy_of_fds();
    if (extra) given.push_back(open("/dev/null", O_RDONLY | O_CLOEXEC));
    DeviceHandOver wrong(bad, std::move(given));
    EXPECT_TRUE(absl::IsInvalidArgument(wrong.Adopt(&fake_.driver()).status()));
    EXPECT_EQ(OpenDescriptors(), before);
  }
  std::string elsewhere = layout;
  elsewhere.replace(elsewhere.find("0000:65:00.0"), 12, "0000:99:00.0");
  EXPECT_TRUE(absl::IsUnavailable(
      DeviceHandOver(elsewhere, copy_of_fds()).Adopt(&fake_.driver()).status()));
  EXPECT_EQ(OpenDescriptors(), before);
  for (const int fd : fds) close(fd);
}

}  // namespace
}  // namespace cudafs

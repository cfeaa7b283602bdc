// RoomKeeper (fs/room/room_keeper.h) over a Filesystem whose arena pools
// fake GPUs (tests/support/fake_cuda_driver.h, so that other programs'
// memory can be simulated) and a host memory spill part, driven round by
// round with a fake clock. Moving data must never change what a file
// reads nor what df reports.
#include "fs/room/room_keeper.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "alloc/base/errors.h"
#include "alloc/base/sizes.h"
#include "alloc/devices/cuda_device.h"
#include "alloc/devices/host_device.h"
#include "alloc/devices/pooled_device.h"
#include "alloc/devices/spill_device.h"
#include "alloc/storage/arena.h"
#include "fs/core/filesystem.h"
#include "gtest/gtest.h"
#include "tests/support/eventually.h"
#include "tests/support/fake_cuda_driver.h"
#include "tests/support/recording_device.h"
#include "tests/support/test_seed.h"

namespace cudafs {
namespace {

using cudafs_test::Eventually;

constexpr uint64_t kMinBlock = 4096;

// The bytes of file `index`: different in every file and at every offset.
std::string Content(int index, uint64_t size) {
  static const std::string* const noise = [] {
    auto* bytes = new std::string(40 * kMiB, '\0');
    uint64_t state = 0x9e3779b97f4a7c15;
    for (char& byte : *bytes) {
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      byte = static_cast<char>(state);
    }
    return bytes;
  }();
  const uint64_t start = static_cast<uint64_t>(index) * 4099 % (8 * kMiB);
  EXPECT_LE(start + size, noise->size());
  return noise->substr(start, size);
}

// What Where's attribute says: bytes by place.
std::map<std::string, uint64_t> ParseWhere(const std::string& text) {
  std::map<std::string, uint64_t> places;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    const std::vector<absl::string_view> fields = absl::StrSplit(line, ' ');
    uint64_t bytes = 0;
    if (fields.size() != 2 || !absl::SimpleAtoi(fields[1], &bytes)) {
      ADD_FAILURE() << "not \"PLACE BYTES\": " << line;
      continue;
    }
    places[std::string(fields[0])] += bytes;
  }
  return places;
}

// The files of a mount and their expected bytes.
class Mount {
 public:
  Mount(std::unique_ptr<PooledDevice> pool, uint64_t cache_bytes) : pool_(std::move(pool)) {
    arena_ = std::make_unique<Arena>(pool_.get(), kMinBlock);
    placement_ = std::make_unique<Placement>(arena_.get());
    FilesystemConfig config;
    config.cache_bytes = cache_bytes;
    fs_ = std::make_unique<Filesystem>(arena_.get(), config);
  }

  Filesystem& fs() { return *fs_; }
  Arena& arena() { return *arena_; }
  Placement& placement() { return *placement_; }
  PooledDevice& pool() { return *pool_; }

  // A new file of `size` bytes, written in one large write and then a
  // small one (which a write-back cache holds) over part of it.
  InodeNumber Write(const std::string& name, uint64_t size) {
    absl::StatusOr<struct stat> st = fs_->Create(kRootInode, name, 0644, O_RDWR, Caller::Root());
    if (!st.ok()) {
      ADD_FAILURE() << "Create " << name << ": " << st.status();
      return 0;
    }
    const InodeNumber ino = st->st_ino;
    std::string bytes = Content(static_cast<int>(files_.size()), size);
    if (!WriteAt(ino, 0, bytes)) return 0;
    if (size > 5000) {
      const std::string small = "small write of " + name;
      if (!WriteAt(ino, 4101, small)) return 0;
      bytes.replace(4101, small.size(), small);
    }
    fs_->Release(ino);
    files_[ino] = std::move(bytes);
    return ino;
  }

  // Writes `bytes` at `offset` of file `ino`, and expects them there.
  bool Overwrite(InodeNumber ino, uint64_t offset, const std::string& bytes) {
    if (!WriteAt(ino, offset, bytes)) return false;
    std::string& expected = files_.at(ino);
    if (expected.size() < offset + bytes.size()) expected.resize(offset + bytes.size(), '\0');
    expected.replace(offset, bytes.size(), bytes);
    return true;
  }

  // Unlinks file `name` (`ino`) and drops Create's lookup reference.
  void Remove(const std::string& name, InodeNumber ino) {
    const absl::Status status = fs_->Unlink(kRootInode, name);
    ASSERT_TRUE(status.ok()) << status;
    fs_->Forget(ino, 1);
    files_.erase(ino);
  }

  bool WriteAt(InodeNumber ino, uint64_t offset, const std::string& bytes) {
    absl::StatusOr<size_t> written =
        fs_->Write(ino, offset, bytes.data(), bytes.size(), /*append=*/false, Caller::Root());
    if (!written.ok() || *written != bytes.size()) {
      ADD_FAILURE() << "Write of " << bytes.size() << " bytes at " << offset << ": "
                    << (written.ok() ? absl::OkStatus() : written.status());
      return false;
    }
    return true;
  }

  // Reads all of `ino` and compares it with what was written.
  void ExpectIntact(InodeNumber ino) {
    const std::string& expected = files_.at(ino);
    std::string got(expected.size() + 1, '\x7f');
    absl::StatusOr<size_t> read = fs_->Read(ino, 0, got.size(), got.data());
    ASSERT_TRUE(read.ok()) << read.status();
    got.resize(*read);
    ASSERT_EQ(got.size(), expected.size()) << "inode " << ino;
    EXPECT_TRUE(got == expected) << "inode " << ino << " reads other bytes than were written";
  }
  void ExpectAllIntact() {
    for (const auto& [ino, bytes] : files_) ExpectIntact(ino);
  }

  std::map<std::string, uint64_t> Where(InodeNumber ino) {
    absl::StatusOr<std::string> text = fs_->GetExtendedAttribute(ino, kWhereAttribute);
    if (!text.ok()) {
      ADD_FAILURE() << "getxattr " << kWhereAttribute << ": " << text.status();
      return {};
    }
    return ParseWhere(*text);
  }
  // Bytes all files hold in `place`.
  uint64_t BytesIn(const std::string& place) {
    uint64_t bytes = 0;
    for (const auto& [ino, unused] : files_) {
      const std::map<std::string, uint64_t> where = Where(ino);
      if (auto it = where.find(place); it != where.end()) bytes += it->second;
    }
    return bytes;
  }
  uint64_t AllocatedBytes(InodeNumber ino) {
    absl::StatusOr<struct stat> st = fs_->GetAttributes(ino);
    EXPECT_TRUE(st.ok()) << st.status();
    return st.ok() ? static_cast<uint64_t>(st->st_blocks) * 512 : 0;
  }

  // df's used bytes.
  uint64_t UsedBytes() {
    const struct statvfs st = fs_->StatFs();
    return (st.f_blocks - st.f_bfree) * st.f_frsize;
  }
  uint64_t PartUsed(size_t part) const { return arena_->Stats().parts.at(part).used; }

  const std::map<InodeNumber, std::string>& files() const { return files_; }

 private:
  std::unique_ptr<PooledDevice> pool_;
  std::unique_ptr<Arena> arena_;
  std::unique_ptr<Placement> placement_;
  std::unique_ptr<Filesystem> fs_;
  std::map<InodeNumber, std::string> files_;
};

// ---------------------------------------------------------------------------
// Without CUDA: pools of host memory stand in for GPUs that report no
// memory.

std::unique_ptr<PooledDevice> HostPool(int members, uint64_t spill_bytes) {
  std::vector<std::unique_ptr<Device>> devices;
  for (int i = 0; i < members; ++i) {
    absl::StatusOr<std::unique_ptr<HostDevice>> device = HostDevice::Create(64 * kMiB);
    EXPECT_TRUE(device.ok()) << device.status();
    if (!device.ok()) return nullptr;
    devices.push_back(std::move(*device));
  }
  std::unique_ptr<Device> spill;
  if (spill_bytes > 0) {
    absl::StatusOr<std::unique_ptr<HostDevice>> device = HostDevice::Create(spill_bytes);
    EXPECT_TRUE(device.ok()) << device.status();
    if (!device.ok()) return nullptr;
    spill = std::move(*device);
  }
  absl::StatusOr<std::unique_ptr<PooledDevice>> pool =
      PooledDevice::Create(std::move(devices), std::move(spill));
  EXPECT_TRUE(pool.ok()) << pool.status();
  return pool.ok() ? std::move(*pool) : nullptr;
}

TEST(RoomKeeperOnHostMemoryTest, AMountWithoutHostMemoryToMoveToKeepsNothingAndRefusesMakeRoom) {
  std::unique_ptr<PooledDevice> pool = HostPool(2, /*spill_bytes=*/0);
  ASSERT_NE(pool, nullptr);
  Mount mount(std::move(pool), 0);
  const InodeNumber ino = mount.Write("f", 3 * kMiB);
  RoomKeeper keeper(&mount.fs(), &mount.placement(), RoomKeeper::Options{});
  EXPECT_FALSE(keeper.active());
  keeper.Round();
  EXPECT_TRUE(absl::IsFailedPrecondition(keeper.MakeRoom(kMiB, /*hold=*/true)));
  EXPECT_TRUE(absl::IsFailedPrecondition(keeper.MakeRoom(std::nullopt, /*hold=*/true)));
  EXPECT_EQ(keeper.stats().moved_out_bytes, 0u);
  EXPECT_EQ(keeper.stats().moved_back_bytes, 0u);
  mount.ExpectIntact(ino);
}

TEST(RoomKeeperOnHostMemoryTest, DataInHostMemoryComesBackAfterSettleToAGpuWhoseMemoryIsUnseen) {
  std::unique_ptr<PooledDevice> pool = HostPool(1, /*spill_bytes=*/64 * kMiB);
  ASSERT_NE(pool, nullptr);
  Mount mount(std::move(pool), 0);
  std::vector<InodeNumber> files;
  for (int i = 0; i < 4; ++i) files.push_back(mount.Write("f" + std::to_string(i), 4 * kMiB));
  const uint64_t used = mount.UsedBytes();
  const size_t spill = mount.arena().part_count() - 1;
  ASSERT_TRUE(mount.arena().IsSpillPart(spill));
  ASSERT_EQ(mount.pool().PartMemory(0), std::nullopt);
  const uint64_t moved =
      mount.fs().MoveData(0, {spill}, UINT64_MAX, Filesystem::MoveOrder::kLeastRecentlyUsed);
  EXPECT_EQ(moved, 16 * kMiB);
  EXPECT_EQ(mount.PartUsed(0), 0u);

  absl::Time now = absl::FromUnixSeconds(1'000'000);
  RoomKeeper keeper(&mount.fs(), &mount.placement(),
                    {.settle = absl::Seconds(2),
                     .return_per_round = 4 * kMiB,
                     .hold = absl::Seconds(10),
                     .clock = [&now] { return now; }});
  ASSERT_TRUE(keeper.active());
  keeper.Round();
  now += absl::Seconds(1);
  keeper.Round();
  EXPECT_EQ(keeper.stats().moved_back_bytes, 0u) << "before settle";
  now += absl::Seconds(1);
  for (int round = 0; round < 8 && mount.PartUsed(spill) > 0; ++round) {
    const uint64_t before = keeper.stats().moved_back_bytes;
    keeper.Round();
    EXPECT_LE(keeper.stats().moved_back_bytes - before, 4 * kMiB);
  }
  EXPECT_EQ(mount.PartUsed(spill), 0u);
  EXPECT_EQ(keeper.stats().moved_back_bytes, 16 * kMiB);
  EXPECT_EQ(mount.UsedBytes(), used);
  mount.ExpectAllIntact();
}

// A file's last use counts whole seconds: files used after this are newer
// than all used before.
void SleepToNextSecond() {
  const absl::Time now = absl::Now();
  absl::SleepFor(absl::FromUnixSeconds(absl::ToUnixSeconds(now) + 1) + absl::Milliseconds(20) -
                 now);
}

constexpr uint64_t kVram = kGiB;
constexpr uint64_t kReserve = 128 * kMiB;
constexpr uint64_t kFileBytes = 8 * kMiB;
// Chunks go a second after the last data (ahead_idle), each released in
// turn; under ThreadSanitizer a release of 256 MiB takes seconds.
constexpr std::chrono::seconds kReleaseTimeout(30);
constexpr uint64_t kReturnPerRound = 16 * kMiB;
constexpr absl::Duration kSettle = absl::Seconds(2);
constexpr absl::Duration kHold = absl::Seconds(10);

// With or without a write-back cache (its size).
class RoomKeeperTest : public testing::TestWithParam<uint64_t> {
 protected:
  RoomKeeperTest()
      : fake_({FakeGpuOptions{
                   .name = "Fake GPU A", .pci_bus_id = "0000:65:00.0", .total_bytes = kVram},
               FakeGpuOptions{
                   .name = "Fake GPU B", .pci_bus_id = "0000:66:00.0", .total_bytes = kVram}}) {}

  // `gpus` fake GPUs of 1 GiB keeping kReserve free, with `spill_bytes` of
  // host memory (0: none), recorded (spill_host_).
  void Build(int gpus, uint64_t spill_bytes = 512 * kMiB) {
    std::vector<std::unique_ptr<Device>> members;
    for (int index = 0; index < gpus; ++index) {
      absl::StatusOr<std::unique_ptr<CudaDevice>> gpu = CudaDevice::Create(
          fake_.driver(), index, 512 * kMiB,
          CudaDeviceOptions{.idle_release = absl::InfiniteDuration(), .reserve_bytes = kReserve});
      ASSERT_TRUE(gpu.ok()) << gpu.status();
      members.push_back(std::move(*gpu));
    }
    std::unique_ptr<Device> spill;
    if (spill_bytes > 0) {
      absl::StatusOr<std::unique_ptr<HostDevice>> host = HostDevice::Create(spill_bytes);
      ASSERT_TRUE(host.ok()) << host.status();
      auto recorded = std::make_unique<RecordingDevice>(std::move(*host));
      spill_host_ = recorded.get();
      spill = std::move(recorded);
    }
    absl::StatusOr<std::unique_ptr<PooledDevice>> pool =
        PooledDevice::Create(std::move(members), std::move(spill));
    ASSERT_TRUE(pool.ok()) << pool.status();
    mount_ = std::make_unique<Mount>(std::move(*pool), GetParam());
    keeper_ = std::make_unique<RoomKeeper>(&mount_->fs(), &mount_->placement(),
                                           RoomKeeper::Options{.settle = kSettle,
                                                               .return_per_round = kReturnPerRound,
                                                               .hold = kHold,
                                                               .clock = [this] { return now_; }});
  }

  // `count` files of kFileBytes.
  std::vector<InodeNumber> WriteFiles(int count) {
    std::vector<InodeNumber> files;
    for (int i = 0; i < count; ++i) {
      files.push_back(mount_->Write("f" + std::to_string(mount_->files().size()), kFileBytes));
    }
    return files;
  }

  void Read(InodeNumber ino) { mount_->ExpectIntact(ino); }

  // Other programs take GPU `gpu`'s memory until `free` bytes are left.
  void LeaveFree(int gpu, uint64_t free) {
    const uint64_t ours = fake_.stats(gpu).physical_bytes;
    ASSERT_LE(ours + free, kVram);
    fake_.set_used_by_others(gpu, kVram - ours - free);
  }
  uint64_t Free(int gpu) {
    const std::optional<Device::GpuMemory> memory = mount_->pool().PartMemory(gpu);
    EXPECT_TRUE(memory.has_value()) << "GPU " << gpu << " holds no context";
    return memory ? memory->free : 0;
  }

  size_t SpillPart() const { return mount_->arena().part_count() - 1; }
  const SpillDevice& Spill() const {
    return dynamic_cast<const SpillDevice&>(mount_->pool().member(SpillPart()));
  }
  // Host memory the spill part pinned: what is registered with the driver
  // but the write-back cache's frames, which are while a context is.
  uint64_t Pinned() const {
    const FakeCudaDriver::Stats stats = fake_.stats();
    return stats.registered_host_bytes - (stats.live_contexts > 0 ? GetParam() : 0);
  }
  // Whether the chunks pinned ahead of a move went once it ended: none
  // is flagged so, and less than two chunks' worth is pinned beyond the
  // data (what the chunks holding data, which may be two, have free).
  bool NothingPinnedAhead() const {
    return Eventually(
        [this] {
          return Spill().ahead_chunks() == 0 &&
                 Pinned() < mount_->PartUsed(SpillPart()) + 2 * SpillDevice::kChunk;
        },
        kReleaseTimeout);
  }
  std::string Gpu(int index) const { return "gpu" + std::to_string(index); }

  FakeCudaDriver fake_;
  absl::Time now_ = absl::FromUnixSeconds(1'000'000);
  std::unique_ptr<Mount> mount_;
  std::unique_ptr<RoomKeeper> keeper_;
  RecordingDevice* spill_host_ = nullptr;
};

TEST_P(RoomKeeperTest, NothingMovesWhileEveryGpuHasItsReserveFree) {
  Build(1);
  const std::vector<InodeNumber> files = WriteFiles(8);
  ASSERT_GE(Free(0), kReserve);
  for (int round = 0; round < 5; ++round) {
    keeper_->Round();
    now_ += absl::Seconds(10);
  }
  EXPECT_EQ(keeper_->stats().moved_out_bytes, 0u);
  EXPECT_EQ(keeper_->stats().moved_back_bytes, 0u);
  for (const InodeNumber ino : files) {
    EXPECT_EQ(mount_->Where(ino),
              (std::map<std::string, uint64_t>{{"gpu0", mount_->AllocatedBytes(ino)}}));
  }
  EXPECT_EQ(mount_->PartUsed(SpillPart()), 0u);
}

// At rest the keeper asks a calm GPU (twice its reserve free) once per
// calm interval and sleeps in between; anything that may need doing brings
// the short interval back.
TEST_P(RoomKeeperTest, RoundsComeOftenOnlyWhileSomethingMayNeedDoing) {
  Build(1);
  WriteFiles(8);
  const RoomKeeper::Options defaults;
  EXPECT_EQ(keeper_->Round(), defaults.calm_interval);
  const int asked = fake_.calls("cuMemGetInfo");
  now_ += absl::Milliseconds(300);
  EXPECT_EQ(keeper_->Round(), defaults.calm_interval - absl::Milliseconds(300));
  EXPECT_EQ(fake_.calls("cuMemGetInfo"), asked) << "a calm GPU was asked again too soon";
  now_ += defaults.calm_interval - absl::Milliseconds(300);
  EXPECT_EQ(keeper_->Round(), defaults.calm_interval);
  EXPECT_GT(fake_.calls("cuMemGetInfo"), asked);

  LeaveFree(0, kReserve + kReserve / 2);  // not calm, not under pressure
  now_ += defaults.calm_interval;
  EXPECT_EQ(keeper_->Round(), defaults.interval);
  EXPECT_EQ(keeper_->stats().moved_out_bytes, 0u);
  LeaveFree(0, kReserve / 2);
  now_ += defaults.interval;
  EXPECT_EQ(keeper_->Round(), defaults.interval);
  EXPECT_GT(keeper_->stats().moved_out_bytes, 0u);
}

// By default host memory for a GPU's reserve (no more than it holds, at
// most kNearReady) is pinned ahead only while the GPU has less than twice
// its reserve free, and let go once the GPUs hold nothing: an idle mount
// on a GPU with room pins nothing.
TEST_P(RoomKeeperTest, HostMemoryIsKeptReadyOnlyWhileAGpuHoldingDataIsNearItsReserve) {
  Build(1);
  const SpillDevice& spill = Spill();
  keeper_->Round();
  EXPECT_EQ(Pinned(), 0u) << "nothing on the GPU";
  std::vector<InodeNumber> files = WriteFiles(1);
  for (int round = 0; round < 3; ++round) {
    now_ += absl::Seconds(1);
    keeper_->Round();
  }
  EXPECT_EQ(Pinned(), 0u) << "the GPU has room: nothing is kept ready";

  LeaveFree(0, 2 * kReserve - kFileBytes);  // another program takes most of the GPU
  for (int i = 0; i < 3; ++i) {
    files.push_back(WriteFiles(1).front());
    now_ += absl::Seconds(1);
    keeper_->Round();
    EXPECT_EQ(Pinned(), 0u) << "nothing is pinned while data is written";
  }
  ASSERT_GE(Free(0), kReserve);
  now_ += absl::Seconds(1);
  keeper_->Round();
  EXPECT_GE(spill.ready_bytes(), 4 * kFileBytes)
      << "as much as the GPU holds, below its reserve";
  EXPECT_EQ(Pinned(), SpillDevice::kChunk);

  // Pressure: the files leave for the ready memory, and come back.
  LeaveFree(0, kReserve / 2);
  now_ += absl::Seconds(1);
  keeper_->Round();
  EXPECT_EQ(mount_->BytesIn("gpu0"), 0u);
  EXPECT_TRUE(Eventually([&] { return Pinned() == SpillDevice::kChunk; }))
      << "what was pinned ahead of the move went: no more host memory was needed";
  mount_->ExpectAllIntact();

  for (size_t i = 0; i < files.size(); ++i) mount_->Remove("f" + std::to_string(i), files[i]);
  now_ += absl::Seconds(1);
  keeper_->Round();
  // Chunks pinned ahead of the move go on their own clock (a thread on a
  // machine with many cores may pin them after the check above).
  EXPECT_TRUE(Eventually([&] { return Pinned() == 0; }))
      << "the GPUs hold nothing: no memory is kept";
}

// Options::ready (spill_ready=) sets how much is kept ready, the reserves
// regardless: none, or more, so that all the GPU holds leaves into ready
// memory.
TEST_P(RoomKeeperTest, HostMemoryKeptReadyIsWhatReadyAsksFor) {
  Build(1);
  const auto keeper = [this](uint64_t ready) {
    return std::make_unique<RoomKeeper>(
        &mount_->fs(), &mount_->placement(),
        RoomKeeper::Options{.settle = kSettle, .ready = ready, .clock = [this] { return now_; }});
  };
  const auto& spill = dynamic_cast<const SpillDevice&>(mount_->pool().member(SpillPart()));
  WriteFiles(40);
  keeper_ = keeper(0);
  for (int round = 0; round < 3; ++round) {
    now_ += absl::Seconds(1);
    keeper_->Round();
  }
  EXPECT_EQ(Pinned(), 0u) << "spill_ready=0 keeps none";

  keeper_ = keeper(2 * SpillDevice::kChunk);
  for (int round = 0; round < 3; ++round) {
    now_ += absl::Seconds(1);
    keeper_->Round();
  }
  EXPECT_EQ(Pinned(), 2 * SpillDevice::kChunk) << "as much as the GPU holds, at most";
  EXPECT_GE(spill.ready_bytes(), 40 * kFileBytes);

  LeaveFree(0, kReserve / 2);
  now_ += absl::Seconds(1);
  keeper_->Round();
  EXPECT_GT(mount_->BytesIn("host"), 0u);
  EXPECT_EQ(Pinned(), 2 * SpillDevice::kChunk) << "the move took only ready memory";
  mount_->ExpectAllIntact();
}

TEST_P(RoomKeeperTest, PressureMovesTheLeastRecentlyUsedFilesToHostMemoryUntilTheReserveIsFree) {
  Build(1);
  const std::vector<InodeNumber> files = WriteFiles(16);
  SleepToNextSecond();
  for (int i = 0; i < 4; ++i) Read(files[i]);
  const uint64_t used = mount_->UsedBytes();
  ASSERT_EQ(mount_->BytesIn("gpu0"), 16 * kFileBytes);

  LeaveFree(0, 96 * kMiB);
  keeper_->Round();
  // The reserve's shortfall (32 MiB) and half the reserve past it.
  EXPECT_GE(keeper_->stats().moved_out_bytes, 96 * kMiB);
  EXPECT_LE(keeper_->stats().moved_out_bytes, 12 * kFileBytes);
  EXPECT_GE(Free(0), kReserve);
  EXPECT_EQ(mount_->BytesIn("host"), keeper_->stats().moved_out_bytes);
  EXPECT_EQ(mount_->PartUsed(SpillPart()), keeper_->stats().moved_out_bytes);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(mount_->Where(files[i]), (std::map<std::string, uint64_t>{{"gpu0", kFileBytes}}))
        << "file " << i << " was read last";
  }
  EXPECT_EQ(mount_->UsedBytes(), used) << "a move changes no file's size on disk";
  mount_->ExpectAllIntact();

  keeper_->Round();
  EXPECT_EQ(keeper_->stats().moved_out_bytes, mount_->BytesIn("host"))
      << "the reserve is free: nothing more moves";
}

TEST_P(RoomKeeperTest, DataComesBackAfterSettleMostRecentlyUsedFirstAndAtMostReturnPerRound) {
  Build(1);
  const std::vector<InodeNumber> files = WriteFiles(16);
  SleepToNextSecond();
  for (int i = 0; i < 4; ++i) Read(files[i]);
  const uint64_t used = mount_->UsedBytes();
  LeaveFree(0, 96 * kMiB);
  keeper_->Round();
  const uint64_t out = keeper_->stats().moved_out_bytes;
  ASSERT_EQ(out, 12 * kFileBytes);
  mount_->ExpectAllIntact();
  SleepToNextSecond();
  Read(files[6]);
  Read(files[9]);
  ASSERT_EQ(mount_->Where(files[6]), (std::map<std::string, uint64_t>{{"host", kFileBytes}}));
  ASSERT_EQ(mount_->Where(files[9]), (std::map<std::string, uint64_t>{{"host", kFileBytes}}));

  fake_.set_used_by_others(0, 0);
  keeper_->Round();
  now_ += kSettle - absl::Milliseconds(1);
  keeper_->Round();
  EXPECT_EQ(keeper_->stats().moved_back_bytes, 0u) << "the GPU has not had room for settle yet";
  now_ += absl::Milliseconds(1);
  keeper_->Round();
  EXPECT_EQ(keeper_->stats().moved_back_bytes, kReturnPerRound);
  EXPECT_EQ(mount_->Where(files[6]), (std::map<std::string, uint64_t>{{"gpu0", kFileBytes}}))
      << "used most recently";
  EXPECT_EQ(mount_->Where(files[9]), (std::map<std::string, uint64_t>{{"gpu0", kFileBytes}}))
      << "used most recently";
  mount_->ExpectAllIntact();

  int rounds = 1;
  while (mount_->PartUsed(SpillPart()) > 0 && rounds < 20) {
    const uint64_t before = keeper_->stats().moved_back_bytes;
    keeper_->Round();
    ++rounds;
    EXPECT_LE(keeper_->stats().moved_back_bytes - before, kReturnPerRound);
  }
  EXPECT_EQ(rounds, static_cast<int>(out / kReturnPerRound));
  EXPECT_EQ(mount_->PartUsed(SpillPart()), 0u);
  EXPECT_EQ(keeper_->stats().moved_back_bytes, out);
  EXPECT_EQ(mount_->BytesIn("gpu0"), 16 * kFileBytes);
  EXPECT_EQ(mount_->BytesIn("host"), 0u);
  EXPECT_EQ(mount_->UsedBytes(), used);
  mount_->ExpectAllIntact();
}

TEST_P(RoomKeeperTest, DataComesBackOnlyWhileTheReturnLeavesHalfTheReserveSpare) {
  Build(1);
  WriteFiles(16);
  LeaveFree(0, 96 * kMiB);
  keeper_->Round();
  ASSERT_EQ(mount_->BytesIn("host"), 12 * kFileBytes);
  // Room for the reserve, not for half of it again.
  LeaveFree(0, kReserve + kReserve / 2);
  for (int round = 0; round < 3; ++round) {
    keeper_->Round();
    now_ += kSettle;
  }
  EXPECT_EQ(keeper_->stats().moved_back_bytes, 0u);
  // 8 MiB past that: one file.
  LeaveFree(0, kReserve + kReserve / 2 + kFileBytes);
  keeper_->Round();
  now_ += kSettle;
  keeper_->Round();
  keeper_->Round();
  EXPECT_EQ(keeper_->stats().moved_back_bytes, kFileBytes);
  EXPECT_GE(Free(0), kReserve + kReserve / 2);
  mount_->ExpectAllIntact();
}

TEST_P(RoomKeeperTest, PressureOnOneGpuMovesDataToAnotherGpuWithRoomBeforeHostMemory) {
  Build(2);
  const std::vector<InodeNumber> files = WriteFiles(32);
  const uint64_t used = mount_->UsedBytes();
  const uint64_t on_first = mount_->BytesIn("gpu0");
  const uint64_t on_second = mount_->BytesIn("gpu1");
  ASSERT_EQ(on_first + on_second, 32 * kFileBytes);
  ASSERT_GE(on_first, 100 * kMiB) << "large files are spread over both GPUs";

  LeaveFree(0, 96 * kMiB);
  keeper_->Round();
  const uint64_t moved = keeper_->stats().moved_out_bytes;
  EXPECT_GE(moved, 96 * kMiB);
  EXPECT_GE(Free(0), kReserve);
  EXPECT_EQ(mount_->BytesIn("host"), 0u);
  EXPECT_EQ(mount_->PartUsed(SpillPart()), 0u);
  EXPECT_EQ(mount_->BytesIn("gpu0"), on_first - moved);
  EXPECT_EQ(mount_->BytesIn("gpu1"), on_second + moved);
  EXPECT_EQ(mount_->UsedBytes(), used);
  mount_->ExpectAllIntact();
}

TEST_P(RoomKeeperTest, PressureOnEveryGpuMovesDataToHostMemory) {
  Build(2);
  WriteFiles(32);
  const uint64_t used = mount_->UsedBytes();
  LeaveFree(0, 96 * kMiB);
  LeaveFree(1, 96 * kMiB);
  keeper_->Round();
  EXPECT_GE(Free(0), kReserve);
  EXPECT_GE(Free(1), kReserve);
  EXPECT_GE(mount_->BytesIn("host"), 2 * 96 * kMiB);
  EXPECT_EQ(mount_->BytesIn("host"), keeper_->stats().moved_out_bytes);
  EXPECT_EQ(mount_->UsedBytes(), used);
  mount_->ExpectAllIntact();
}

TEST_P(RoomKeeperTest, MakeRoomReturnsOnceTheSizeAskedForIsFreeOnEveryGpu) {
  Build(2);
  WriteFiles(32);
  const uint64_t used = mount_->UsedBytes();
  LeaveFree(0, 50 * kMiB);
  LeaveFree(1, 80 * kMiB);
  const absl::Status status = keeper_->MakeRoom(150 * kMiB, /*hold=*/true);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_GE(Free(0), 150 * kMiB);
  EXPECT_GE(Free(1), 150 * kMiB);
  EXPECT_EQ(mount_->BytesIn("host"), keeper_->stats().moved_out_bytes);
  EXPECT_LT(keeper_->stats().moved_out_bytes, 32 * kFileBytes) << "only what was needed";
  EXPECT_EQ(keeper_->stats().make_room_calls, 1u);
  EXPECT_EQ(mount_->UsedBytes(), used);
  mount_->ExpectAllIntact();
}

TEST_P(RoomKeeperTest, MakeRoomForEverythingMovesEveryMovableByteToHostMemory) {
  Build(2);
  const std::vector<InodeNumber> files = WriteFiles(32);
  const uint64_t used = mount_->UsedBytes();
  const absl::Status status = keeper_->MakeRoom(std::nullopt, /*hold=*/true);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(mount_->PartUsed(0), 0u);
  EXPECT_EQ(mount_->PartUsed(1), 0u);
  EXPECT_EQ(keeper_->stats().moved_out_bytes, 32 * kFileBytes);
  for (const InodeNumber ino : files) {
    EXPECT_EQ(mount_->Where(ino), (std::map<std::string, uint64_t>{{"host", kFileBytes}}));
  }
  EXPECT_EQ(fake_.stats().physical_bytes, 0u) << "the GPUs' memory went back to the driver";
  EXPECT_EQ(mount_->UsedBytes(), used);
  mount_->ExpectAllIntact();
}

// A make-room holds the keeper for as long as its moves take (seconds on
// a GPU); the counters, which --stats reads, answer meanwhile.
TEST_P(RoomKeeperTest, StatsAnswerWhileAMakeRoomRuns) {
  Build(1);
  WriteFiles(4);
  absl::Notification asking;
  absl::Notification resume;
  std::atomic<bool> armed = true;
  // The make-room's first question to the driver waits until let go.
  fake_.OnCall("cuMemGetInfo", [&] {
    if (!armed.exchange(false)) return;
    asking.Notify();
    resume.WaitForNotification();
  });
  std::thread make_room([&] { EXPECT_TRUE(keeper_->MakeRoom(std::nullopt, /*hold=*/true).ok()); });
  asking.WaitForNotification();
  absl::Notification answered;
  uint64_t calls_seen = 0;
  std::thread reader([&] {
    calls_seen = keeper_->stats().make_room_calls;
    answered.Notify();
  });
  const bool in_time = answered.WaitForNotificationWithTimeout(absl::Seconds(10));
  resume.Notify();
  make_room.join();
  reader.join();
  fake_.OnCall("cuMemGetInfo", nullptr);
  EXPECT_TRUE(in_time) << "stats() waited for the make-room to end";
  EXPECT_EQ(calls_seen, 1u) << "the running make-room is counted";
  EXPECT_EQ(keeper_->stats().moved_out_bytes, 4 * kFileBytes);
  mount_->ExpectAllIntact();
}

TEST_P(RoomKeeperTest, MadeRoomIsHeldForHoldThenDataComesBack) {
  Build(1);
  WriteFiles(8);
  ASSERT_TRUE(keeper_->MakeRoom(std::nullopt, /*hold=*/true).ok());
  ASSERT_EQ(mount_->BytesIn("host"), 8 * kFileBytes);
  keeper_->Round();
  now_ += kSettle;
  keeper_->Round();
  now_ += kHold - kSettle - absl::Milliseconds(1);
  keeper_->Round();
  EXPECT_EQ(keeper_->stats().moved_back_bytes, 0u) << "held, though the GPU has room";
  EXPECT_EQ(mount_->BytesIn("host"), 8 * kFileBytes);
  now_ += absl::Milliseconds(1);
  for (int round = 0; round < 10; ++round) keeper_->Round();
  EXPECT_EQ(keeper_->stats().moved_back_bytes, 8 * kFileBytes);
  EXPECT_EQ(mount_->BytesIn("gpu0"), 8 * kFileBytes);
  mount_->ExpectAllIntact();
}

// Room made for a program stays free while it starts: files written during
// the hold go to host memory, and to the GPU again once it is over.
TEST_P(RoomKeeperTest, WritesDuringTheHoldLeaveTheRoomFree) {
  Build(1);
  WriteFiles(4);
  ASSERT_TRUE(keeper_->MakeRoom(std::nullopt, /*hold=*/true).ok());
  const InodeNumber during = WriteFiles(1).front();
  EXPECT_EQ(mount_->Where(during), (std::map<std::string, uint64_t>{{"host", kFileBytes}}));
  now_ += kHold;
  keeper_->Round();
  const InodeNumber after = WriteFiles(1).front();
  EXPECT_EQ(mount_->Where(after), (std::map<std::string, uint64_t>{{"gpu0", kFileBytes}}));
  mount_->ExpectAllIntact();
}

// Room made without a hold (what other users than the owner ask for)
// takes nothing away for longer than any pressure does: new files go to
// the GPU, and moved data comes back once the GPU has had room for settle.
TEST_P(RoomKeeperTest, RoomMadeWithoutAHoldIsNotHeld) {
  Build(1);
  WriteFiles(8);
  ASSERT_TRUE(keeper_->MakeRoom(std::nullopt, /*hold=*/false).ok());
  ASSERT_EQ(mount_->BytesIn("host"), 8 * kFileBytes);
  const InodeNumber during = WriteFiles(1).front();
  EXPECT_EQ(mount_->Where(during), (std::map<std::string, uint64_t>{{"gpu0", kFileBytes}}));
  keeper_->Round();
  now_ += kSettle;
  for (int round = 0; round < 10; ++round) keeper_->Round();
  EXPECT_EQ(keeper_->stats().moved_back_bytes, 8 * kFileBytes);
  EXPECT_EQ(mount_->BytesIn("gpu0"), 9 * kFileBytes);
  mount_->ExpectAllIntact();
}

TEST_P(RoomKeeperTest, MakeRoomSaysResourceExhaustedWhenHostMemoryIsFullAndLosesNothing) {
  Build(1, /*spill_bytes=*/32 * kMiB);
  const std::vector<InodeNumber> files = WriteFiles(16);
  const uint64_t used = mount_->UsedBytes();
  LeaveFree(0, 50 * kMiB);
  const absl::Status status = keeper_->MakeRoom(500 * kMiB, /*hold=*/true);
  EXPECT_TRUE(absl::IsResourceExhausted(status)) << status;
  EXPECT_LE(mount_->PartUsed(SpillPart()), 32 * kMiB);
  EXPECT_EQ(mount_->BytesIn("host"), mount_->PartUsed(SpillPart()));
  EXPECT_EQ(mount_->BytesIn("host") + mount_->BytesIn("gpu0"), 16 * kFileBytes);
  EXPECT_EQ(mount_->UsedBytes(), used);
  mount_->ExpectAllIntact();
}

TEST_P(RoomKeeperTest, MakeRoomForEverythingWithHostMemoryFullLosesNothing) {
  Build(1, /*spill_bytes=*/32 * kMiB);
  WriteFiles(16);
  const uint64_t used = mount_->UsedBytes();
  keeper_->MakeRoom(std::nullopt, /*hold=*/true).IgnoreError();
  EXPECT_EQ(mount_->PartUsed(SpillPart()), 32 * kMiB);
  EXPECT_EQ(mount_->BytesIn("host"), 32 * kMiB);
  EXPECT_EQ(mount_->BytesIn("gpu0"), 16 * kFileBytes - 32 * kMiB);
  EXPECT_EQ(mount_->UsedBytes(), used);
  mount_->ExpectAllIntact();
}

// "all" is every byte that can move: host memory filling up first is a
// failure to say, not success.
TEST_P(RoomKeeperTest, MakeRoomForEverythingSaysResourceExhaustedWhenHostMemoryIsFull) {
  Build(1, /*spill_bytes=*/32 * kMiB);
  WriteFiles(16);
  const absl::Status status = keeper_->MakeRoom(std::nullopt, /*hold=*/true);
  ASSERT_GT(mount_->BytesIn("gpu0"), 0u);
  EXPECT_TRUE(absl::IsResourceExhausted(status))
      << "data is left on the GPU for want of host memory, yet MakeRoom(all) says " << status;
}

// A move through several chunks of host memory, pinned ahead of it while
// it runs: the host refusing memory in the middle stops it with nothing
// lost, and nothing stays pinned ahead afterwards.
TEST_P(RoomKeeperTest, TheHostRefusingMemoryInTheMiddleOfAPipelinedMoveLosesNothing) {
  Build(1, /*spill_bytes=*/kGiB);
  WriteFiles(40);
  const uint64_t used = mount_->UsedBytes();
  // A first move fills part of chunk 0; then the host refuses any more
  // memory (so that neither the moves nor the pin-ahead threads get the
  // next chunk). Chunk 0 is ready before it: a move prefers ready memory,
  // and a chunk pinned ahead while chunk 0 was still being pinned would
  // otherwise take some of the data.
  ASSERT_FALSE(mount_->placement().KeepReady(SpillDevice::kChunk));
  ASSERT_EQ(mount_->fs().MoveData(0, {SpillPart()}, 8 * kFileBytes,
                                  Filesystem::MoveOrder::kLeastRecentlyUsed),
            8 * kFileBytes);
  mount_->placement().KeepReady(0);
  ASSERT_TRUE(NothingPinnedAhead());
  // And the chunks pinned ahead are released, not just being released: a
  // chunk still pinned would take the move's data without a commit.
  ASSERT_TRUE(Eventually([this] { return Pinned() == SpillDevice::kChunk; }, kReleaseTimeout))
      << Pinned() << " bytes pinned";
  spill_host_->FailCommitsBeyond(0);
  const absl::Status status = keeper_->MakeRoom(std::nullopt, /*hold=*/false);
  EXPECT_TRUE(absl::IsResourceExhausted(status)) << status;
  EXPECT_GT(mount_->BytesIn("host"), 8 * kFileBytes) << "the rest of chunk 0 took data";
  EXPECT_LE(mount_->PartUsed(SpillPart()), SpillDevice::kChunk);
  EXPECT_EQ(mount_->BytesIn("host"), mount_->PartUsed(SpillPart()));
  EXPECT_EQ(mount_->BytesIn("host") + mount_->BytesIn("gpu0"), 40 * kFileBytes);
  EXPECT_EQ(mount_->UsedBytes(), used);
  EXPECT_TRUE(NothingPinnedAhead());
  mount_->ExpectAllIntact();

  spill_host_->AllowCommits();
  ASSERT_TRUE(keeper_->MakeRoom(std::nullopt, /*hold=*/false).ok());
  EXPECT_EQ(mount_->BytesIn("gpu0"), 0u);
  EXPECT_EQ(mount_->UsedBytes(), used);
  EXPECT_TRUE(NothingPinnedAhead());
  mount_->ExpectAllIntact();
  for (const std::string& violation : spill_host_->violations()) ADD_FAILURE() << violation;
}

// Copies the driver fails, and host memory it refuses to register, in the
// middle of a pipelined move: the files whose copies failed stay where
// they were, and move on the next pass.
TEST_P(RoomKeeperTest, CopiesAndRegistrationsFailingInTheMiddleOfAPipelinedMoveLoseNothing) {
  Build(1, /*spill_bytes=*/kGiB);
  WriteFiles(40);
  const uint64_t used = mount_->UsedBytes();
  fake_.FailNext("cuMemcpyAsync", cu::CUDA_ERROR_INVALID_VALUE, 3);
  fake_.FailNext("cuMemHostRegister", cu::CUDA_ERROR_NOT_SUPPORTED, 1);
  ASSERT_TRUE(keeper_->MakeRoom(std::nullopt, /*hold=*/false).ok());
  EXPECT_EQ(mount_->BytesIn("gpu0"), 0u);
  EXPECT_EQ(mount_->BytesIn("host"), 40 * kFileBytes);
  EXPECT_EQ(mount_->UsedBytes(), used);
  EXPECT_TRUE(NothingPinnedAhead());
  mount_->ExpectAllIntact();
}

TEST_P(RoomKeeperTest, AMountWithoutHostMemoryHasNothingToKeep) {
  Build(1, /*spill_bytes=*/0);
  WriteFiles(4);
  EXPECT_FALSE(keeper_->active());
  LeaveFree(0, kReserve / 4);
  keeper_->Round();
  EXPECT_EQ(keeper_->stats().moved_out_bytes, 0u);
  EXPECT_TRUE(absl::IsFailedPrecondition(keeper_->MakeRoom(100 * kMiB, /*hold=*/true)));
  EXPECT_EQ(mount_->BytesIn("gpu0"), 4 * kFileBytes);
  mount_->ExpectAllIntact();
}

TEST_P(RoomKeeperTest, AFileMappedByAnotherProcessNeverMoves) {
  Build(1);
  const std::vector<InodeNumber> files = WriteFiles(4);
  absl::StatusOr<std::unique_ptr<ExportedMemory>> exported = mount_->fs().ExportShared(files[1]);
  ASSERT_TRUE(exported.ok()) << exported.status();
  const uint64_t shared_bytes = mount_->AllocatedBytes(files[1]);
  ASSERT_EQ(mount_->Where(files[1]), (std::map<std::string, uint64_t>{{"gpu0", shared_bytes}}));

  LeaveFree(0, 32 * kMiB);
  keeper_->Round();
  EXPECT_EQ(mount_->Where(files[1]), (std::map<std::string, uint64_t>{{"gpu0", shared_bytes}}));
  EXPECT_EQ(keeper_->stats().moved_out_bytes, 3 * kFileBytes);
  const absl::Status status = keeper_->MakeRoom(std::nullopt, /*hold=*/true);
  EXPECT_EQ(mount_->Where(files[1]), (std::map<std::string, uint64_t>{{"gpu0", shared_bytes}}));
  EXPECT_EQ(mount_->BytesIn("host"), 3 * kFileBytes);
  mount_->ExpectAllIntact();
}

TEST_P(RoomKeeperTest, WritesWhileAnotherProgramHoldsTheReserveGoToHostMemory) {
  Build(1);
  const std::vector<InodeNumber> before = WriteFiles(2);
  LeaveFree(0, kReserve / 2);
  const InodeNumber large = mount_->Write("large", 24 * kMiB);
  const InodeNumber small = mount_->Write("small", 3000);
  ASSERT_NE(large, 0u);
  ASSERT_NE(small, 0u);
  ASSERT_TRUE(mount_->fs().Fsync(large).ok());
  ASSERT_TRUE(mount_->fs().Fsync(small).ok());
  EXPECT_GE(mount_->Where(large)["host"], 20 * kMiB);
  EXPECT_EQ(mount_->Where(large)["gpu0"] + mount_->Where(large)["host"],
            mount_->AllocatedBytes(large));
  EXPECT_LT(Free(0), kReserve);
  mount_->ExpectAllIntact();

  fake_.set_used_by_others(0, 0);
  keeper_->Round();
  now_ += kSettle;
  for (int round = 0; round < 10; ++round) keeper_->Round();
  EXPECT_EQ(mount_->PartUsed(SpillPart()), 0u);
  EXPECT_EQ(mount_->BytesIn("host"), 0u);
  mount_->ExpectAllIntact();
}

TEST_P(RoomKeeperTest, AGpuWithLessThanHalfItsReserveSpareTakesNoDataFromAnother) {
  Build(2);
  WriteFiles(32);
  const uint64_t on_second = mount_->BytesIn("gpu1");
  LeaveFree(1, kReserve + kReserve / 4);
  LeaveFree(0, 96 * kMiB);
  keeper_->Round();
  EXPECT_GE(Free(0), kReserve);
  EXPECT_EQ(mount_->BytesIn("gpu1"), on_second);
  EXPECT_EQ(mount_->BytesIn("host"), keeper_->stats().moved_out_bytes);
  EXPECT_GE(mount_->BytesIn("host"), 96 * kMiB);
  mount_->ExpectAllIntact();
}

TEST_P(RoomKeeperTest, NewWritesToAFileInHostMemoryGoToTheGpuOnceItHasRoom) {
  Build(1);
  const std::vector<InodeNumber> files = WriteFiles(16);
  LeaveFree(0, 32 * kMiB);
  keeper_->Round();
  ASSERT_EQ(mount_->Where(files[0]), (std::map<std::string, uint64_t>{{"host", kFileBytes}}));
  fake_.set_used_by_others(0, 0);
  ASSERT_TRUE(mount_->Overwrite(files[0], kFileBytes, Content(99, kFileBytes)));
  EXPECT_EQ(mount_->Where(files[0]),
            (std::map<std::string, uint64_t>{{"gpu0", kFileBytes}, {"host", kFileBytes}}));
  EXPECT_EQ(keeper_->stats().moved_back_bytes, 0u);
  mount_->ExpectAllIntact();
}

TEST_P(RoomKeeperTest, RemovingAFileInHostMemoryGivesItsHostMemoryBack) {
  Build(1);
  const std::vector<InodeNumber> files = WriteFiles(4);
  ASSERT_TRUE(keeper_->MakeRoom(std::nullopt, /*hold=*/true).ok());
  const uint64_t used = mount_->UsedBytes();
  ASSERT_EQ(mount_->PartUsed(SpillPart()), 4 * kFileBytes);
  mount_->Remove("f2", files[2]);
  EXPECT_EQ(mount_->PartUsed(SpillPart()), 3 * kFileBytes);
  EXPECT_EQ(mount_->UsedBytes(), used - kFileBytes);
  mount_->ExpectAllIntact();
}

TEST_P(RoomKeeperTest, MappingAFileInHostMemoryBringsItBackToAGpu) {
  Build(1);
  const std::vector<InodeNumber> files = WriteFiles(4);
  ASSERT_TRUE(keeper_->MakeRoom(std::nullopt, /*hold=*/true).ok());
  ASSERT_EQ(mount_->Where(files[1]), (std::map<std::string, uint64_t>{{"host", kFileBytes}}));
  absl::StatusOr<std::unique_ptr<ExportedMemory>> exported = mount_->fs().ExportShared(files[1]);
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_EQ(mount_->Where(files[1]),
            (std::map<std::string, uint64_t>{{"gpu0", mount_->AllocatedBytes(files[1])}}));
  ASSERT_TRUE(keeper_->MakeRoom(std::nullopt, /*hold=*/true).ok());
  EXPECT_EQ(mount_->Where(files[1]),
            (std::map<std::string, uint64_t>{{"gpu0", mount_->AllocatedBytes(files[1])}}));
  mount_->ExpectAllIntact();
}

TEST_P(RoomKeeperTest, MappingAFileInHostMemoryFailsWithEnospcWhileTheGpuHasNoRoom) {
  Build(1);
  const std::vector<InodeNumber> files = WriteFiles(4);
  ASSERT_TRUE(keeper_->MakeRoom(std::nullopt, /*hold=*/true).ok());
  const uint64_t used = mount_->UsedBytes();
  LeaveFree(0, kReserve / 2);
  absl::StatusOr<std::unique_ptr<ExportedMemory>> exported = mount_->fs().ExportShared(files[1]);
  EXPECT_EQ(ToErrno(exported.status()), ENOSPC) << exported.status();
  EXPECT_EQ(mount_->Where(files[1]), (std::map<std::string, uint64_t>{{"host", kFileBytes}}));
  EXPECT_EQ(mount_->UsedBytes(), used);
  mount_->ExpectAllIntact();
}

TEST_P(RoomKeeperTest, RoundsAndMakeRoomWhileFilesAreWrittenLoseNothing) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  Build(2);
  const std::vector<InodeNumber> files = WriteFiles(8);
  std::vector<std::string> models;
  for (const InodeNumber ino : files) {
    std::string model(kFileBytes + 1, '\0');
    absl::StatusOr<size_t> read = mount_->fs().Read(ino, 0, model.size(), model.data());
    ASSERT_TRUE(read.ok()) << read.status();
    model.resize(*read);
    models.push_back(std::move(model));
  }
  std::atomic<bool> done{false};
  std::string failure;
  std::thread writer([&] {
    std::mt19937_64 rng(seed);
    for (int op = 0; op < 400 && failure.empty(); ++op) {
      const size_t f = rng() % files.size();
      std::string& model = models[f];
      const uint64_t offset = rng() % (model.size() + kMiB);
      const uint64_t length = rng() % 2 ? 1 + rng() % 5000 : 1 + rng() % (3 * kMiB);
      if (rng() % 3 == 0) {
        std::string got(length, '\x7f');
        absl::StatusOr<size_t> read = mount_->fs().Read(files[f], offset, length, got.data());
        if (!read.ok()) {
          failure = "read: " + read.status().ToString();
          break;
        }
        got.resize(*read);
        if (got != (offset >= model.size() ? "" : model.substr(offset, length))) {
          failure = "read " + std::to_string(length) + " at " + std::to_string(offset) +
                    " of file " + std::to_string(f) + " differs from what was written";
        }
        continue;
      }
      std::string bytes(length, '\0');
      for (char& byte : bytes) byte = static_cast<char>('a' + op % 26);
      absl::StatusOr<size_t> written =
          mount_->fs().Write(files[f], offset, bytes.data(), bytes.size(), false, Caller::Root());
      if (!written.ok() || *written != length) {
        failure = "write of " + std::to_string(length) + " at " + std::to_string(offset) + ": " +
                  (written.ok() ? std::string("short") : written.status().ToString());
        break;
      }
      if (model.size() < offset + length) model.resize(offset + length, '\0');
      model.replace(offset, length, bytes);
    }
    done = true;
  });
  std::mt19937_64 rng(seed ^ 0x700d);
  int rounds = 0;
  while (!done) {
    switch (rng() % 5) {
      case 0:
        LeaveFree(static_cast<int>(rng() % 2), 16 * kMiB + rng() % (kReserve * 2));
        break;
      case 1:
        fake_.set_used_by_others(static_cast<int>(rng() % 2), 0);
        break;
      case 2:
        keeper_->MakeRoom(rng() % 2 ? std::optional<uint64_t>() : 600 * kMiB, /*hold=*/true)
            .IgnoreError();
        break;
      default:
        break;
    }
    keeper_->Round();
    now_ += absl::Milliseconds(rng() % 3000);
    ++rounds;
  }
  writer.join();
  ASSERT_EQ(failure, "");
  EXPECT_GT(keeper_->stats().moved_out_bytes, 0u);
  uint64_t allocated = 0;
  for (size_t f = 0; f < files.size(); ++f) {
    std::string got(models[f].size() + 1, '\x7f');
    absl::StatusOr<size_t> read = mount_->fs().Read(files[f], 0, got.size(), got.data());
    ASSERT_TRUE(read.ok()) << read.status();
    got.resize(*read);
    EXPECT_TRUE(got == models[f]) << "file " << f;
    allocated += mount_->AllocatedBytes(files[f]);
  }
  EXPECT_EQ(mount_->UsedBytes(), allocated) << "after " << rounds << " rounds";
}

TEST_P(RoomKeeperTest, APrivateCopyOfAFileInHostMemoryIsMadeFromTheGpuAfterBringingItBack) {
  Build(1);
  const std::vector<InodeNumber> files = WriteFiles(4);
  ASSERT_TRUE(keeper_->MakeRoom(std::nullopt, /*hold=*/true).ok());
  absl::StatusOr<Filesystem::CopyPlan> plan = mount_->fs().PlanCopy(files[2]);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->size, kFileBytes);
  for (const Exporter::CopyPiece& piece : plan->pieces) {
    EXPECT_EQ(piece.kind, ExportedMemory::Kind::kCuda);
  }
  EXPECT_EQ(mount_->Where(files[2]), (std::map<std::string, uint64_t>{{"gpu0", kFileBytes}}));
  EXPECT_EQ(mount_->Where(files[1]), (std::map<std::string, uint64_t>{{"host", kFileBytes}}));
  mount_->ExpectAllIntact();
}

TEST_P(RoomKeeperTest, APrivateCopyOfAFileInHostMemoryFailsWithEnospcWhenTheGpuHasNoRoomForIt) {
  Build(1);
  const std::vector<InodeNumber> files = WriteFiles(4);
  ASSERT_TRUE(keeper_->MakeRoom(std::nullopt, /*hold=*/true).ok());
  LeaveFree(0, kReserve / 2);
  absl::StatusOr<Filesystem::CopyPlan> plan = mount_->fs().PlanCopy(files[2]);
  EXPECT_EQ(ToErrno(plan.status()), ENOSPC) << plan.status();
  EXPECT_EQ(mount_->Where(files[2]), (std::map<std::string, uint64_t>{{"host", kFileBytes}}));
  mount_->ExpectAllIntact();
}

TEST_P(RoomKeeperTest, APrivateCopyIsNeverPlannedInHostMemoryWhenTheGpuHasRoomForPartOfTheFile) {
  Build(1);
  const std::vector<InodeNumber> files = WriteFiles(4);
  ASSERT_TRUE(keeper_->MakeRoom(std::nullopt, /*hold=*/true).ok());
  LeaveFree(0, kReserve + kFileBytes / 2);
  absl::StatusOr<Filesystem::CopyPlan> plan = mount_->fs().PlanCopy(files[2]);
  if (plan.ok()) {
    for (const Exporter::CopyPiece& piece : plan->pieces) {
      EXPECT_EQ(piece.kind, ExportedMemory::Kind::kCuda)
          << "a piece of " << piece.bytes << " bytes planned in host memory; the file is "
          << testing::PrintToString(mount_->Where(files[2]));
    }
  } else {
    EXPECT_EQ(ToErrno(plan.status()), ENOSPC) << plan.status();
  }
  mount_->ExpectAllIntact();
}

INSTANTIATE_TEST_SUITE_P(Cache, RoomKeeperTest, testing::Values(uint64_t{0}, 8 * kMiB),
                         [](const testing::TestParamInfo<uint64_t>& info) {
                           return info.param == 0 ? "WithoutCache" : "WithWriteBackCache";
                         });

}  // namespace
}  // namespace cudafs

#include "alloc/devices/pooled_device.h"

#include <sys/mman.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "alloc/devices/faulty_device.h"
#include "alloc/devices/host_device.h"
#include "gtest/gtest.h"

namespace cudafs {
namespace {

constexpr uint64_t kGranule = HostDevice::kGranule;
constexpr uint64_t kMemberSize = 64 * kMiB;

std::unique_ptr<Device> Host(uint64_t size = kMemberSize) {
  return HostDevice::Create(size).value();
}

// Two host devices; the second behind a FaultyDevice the test can turn on.
struct Pool {
  Pool() {
    std::vector<std::unique_ptr<Device>> members;
    members.push_back(Host());
    auto faulty = std::make_unique<FaultyDevice>(Host());
    second = faulty.get();
    members.push_back(std::move(faulty));
    device = PooledDevice::Create(std::move(members)).value();
    second_base = device->parts()[1].offset;
  }
  std::unique_ptr<PooledDevice> device;
  FaultyDevice* second = nullptr;
  uint64_t second_base = 0;
};

std::string ReadBack(Device& device, uint64_t offset, size_t length) {
  std::string bytes(length, '\0');
  const DeviceToHost read{bytes.data(), offset, length};
  EXPECT_TRUE(device.Read({&read, 1}).ok());
  return bytes;
}

void WriteAt(Device& device, uint64_t offset, const std::string& bytes) {
  const HostToDevice write{offset, bytes.data(), bytes.size()};
  ASSERT_TRUE(device.Write({&write, 1}).ok());
}

TEST(PooledDeviceTest, MembersAreDisjointPartsOnGibBoundaries) {
  Pool pool;
  const std::vector<DeviceRange> parts = pool.device->parts();
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].offset, 0u);
  EXPECT_EQ(parts[0].length, kMemberSize);
  EXPECT_EQ(parts[1].offset, PooledDevice::kMemberAlignment);
  EXPECT_EQ(pool.device->arena_size(), parts[1].offset + parts[1].length);
  EXPECT_EQ(pool.device->DescribePart(1), "faulty host memory");
  EXPECT_EQ(pool.device->Describe(), "2 devices: host memory; faulty host memory");
  // A decorator over the pool (fault injection) shows the same parts.
  const FaultyDevice wrapped(pool.device.get());
  ASSERT_EQ(wrapped.parts().size(), 2u);
  EXPECT_EQ(wrapped.parts()[1].offset, parts[1].offset);
  EXPECT_EQ(wrapped.DescribePart(1), "faulty host memory");
}

TEST(PooledDeviceTest, RefusesMembersOfDifferentGranules) {
  class Coarse final : public DeviceWrapper {
   public:
    using DeviceWrapper::DeviceWrapper;
    uint64_t granule_size() const override { return 2 * kGranule; }
  };
  std::vector<std::unique_ptr<Device>> members;
  members.push_back(Host());
  members.push_back(std::make_unique<Coarse>(Host()));
  EXPECT_TRUE(absl::IsInvalidArgument(PooledDevice::Create(std::move(members)).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(PooledDevice::Create({}).status()));
}

TEST(PooledDeviceTest, DataGoesToTheMemberOwningItsRangeAtThatMembersOffsets) {
  Pool pool;
  ASSERT_TRUE(pool.device->Commit(0, kGranule).ok());
  ASSERT_TRUE(pool.device->Commit(pool.second_base + kGranule, kGranule).ok());
  // One batch spanning both members.
  const std::string first(5000, 'a');
  const std::string second(7000, 'b');
  const HostToDevice writes[] = {{100, first.data(), first.size()},
                                 {pool.second_base + kGranule + 300, second.data(), second.size()}};
  ASSERT_TRUE(pool.device->Write(writes).ok());
  EXPECT_EQ(ReadBack(pool.device->member(0), 100, first.size()), first);
  EXPECT_EQ(ReadBack(pool.device->member(1), kGranule + 300, second.size()), second);
  EXPECT_EQ(ReadBack(*pool.device, pool.second_base + kGranule + 300, second.size()), second);

  const DeviceRange zeros[] = {{100, 10}, {pool.second_base + kGranule + 300, 10}};
  ASSERT_TRUE(pool.device->Zero(zeros).ok());
  EXPECT_EQ(ReadBack(*pool.device, 100, 10), std::string(10, '\0'));
  EXPECT_EQ(ReadBack(*pool.device, pool.second_base + kGranule + 300, 10), std::string(10, '\0'));
}

TEST(PooledDeviceTest, RangesOutsideOneMemberAreRefused) {
  Pool pool;
  // The gap between the members, and a range running off the first.
  EXPECT_TRUE(absl::IsInternal(pool.device->Commit(kMemberSize, kGranule)));
  EXPECT_TRUE(absl::IsInternal(pool.device->Commit(kMemberSize - kGranule, 2 * kGranule)));
  const DeviceRange straddling{kMemberSize - 10, 20};
  EXPECT_TRUE(absl::IsInternal(pool.device->Zero({&straddling, 1})));
  EXPECT_FALSE(pool.device->Exclusive({kMemberSize - kGranule, 2 * kGranule}));
}

TEST(PooledDeviceTest, CopiesWithinAndAcrossMembers) {
  Pool pool;
  ASSERT_TRUE(pool.device->Commit(0, 4 * kGranule).ok());
  ASSERT_TRUE(pool.device->Commit(pool.second_base, 4 * kGranule).ok());
  std::string bytes(3 * kGranule, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7 + i / 4096);
  WriteAt(*pool.device, 0, bytes);
  // Across (larger than the bounce buffer), and within the second member.
  const DeviceToDevice across{pool.second_base + 5, 0, bytes.size()};
  ASSERT_TRUE(pool.device->Copy({&across, 1}).ok());
  EXPECT_EQ(ReadBack(*pool.device, pool.second_base + 5, bytes.size()), bytes);
  const DeviceToDevice within{pool.second_base + kGranule * 3 + 1, pool.second_base + 5, 4096};
  ASSERT_TRUE(pool.device->Copy({&within, 1}).ok());
  EXPECT_EQ(ReadBack(*pool.device, pool.second_base + kGranule * 3 + 1, 4096),
            bytes.substr(0, 4096));
}

TEST(PooledDeviceTest, AFailingMemberFailsOnlyWhatTouchesIt) {
  Pool pool;
  ASSERT_TRUE(pool.device->Commit(0, kGranule).ok());
  ASSERT_TRUE(pool.device->Commit(pool.second_base, kGranule).ok());
  WriteAt(*pool.device, 0, "first");
  WriteAt(*pool.device, pool.second_base, "second");
  pool.second->SetPlan({.probability = 1});
  std::string out(6, '\0');
  const DeviceToHost on_second{out.data(), pool.second_base, 6};
  EXPECT_TRUE(absl::IsInternal(pool.device->Read({&on_second, 1})));
  EXPECT_EQ(ReadBack(*pool.device, 0, 5), "first");
  const HostToDevice write{0, "again", 5};
  EXPECT_TRUE(pool.device->Write({&write, 1}).ok());
}

// A private copy goes into pieces of the caller's memory, one per run of
// granules whose bytes one member holds, each filled by that member.
TEST(PooledDeviceTest, PrivateCopiesArePiecesOfEachMemberInFileOrder) {
  Pool pool;
  ASSERT_TRUE(pool.device->Commit(0, 2 * kGranule).ok());
  ASSERT_TRUE(pool.device->Commit(pool.second_base, 2 * kGranule).ok());
  const std::string head(kGranule, 'h');
  const std::string tail(kGranule + 100, 't');
  WriteAt(*pool.device, kGranule, head);
  WriteAt(*pool.device, pool.second_base, tail);
  // A file: [0, G) from the first member, a hole, then [2G, 3G + 100)
  // from the second.
  const uint64_t size = 3 * kGranule + 100;
  const DeviceToDevice copies[] = {{2 * kGranule, pool.second_base, tail.size()},
                                   {0, kGranule, head.size()}};
  absl::StatusOr<std::vector<Device::CopyPiece>> plan = pool.device->PlanCopy(size, copies);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->size(), 2u);
  EXPECT_EQ((*plan)[0].bytes, 2 * kGranule) << "the first member's run: its bytes and the hole";
  EXPECT_GE((*plan)[1].bytes, kGranule + 100);
  std::vector<Device::CopyMemory> memory;
  for (const Device::CopyPiece& piece : *plan) {
    EXPECT_EQ(piece.kind, ExportedMemory::Kind::kHost);
    const int fd = memfd_create("copy", MFD_CLOEXEC);
    ASSERT_EQ(ftruncate(fd, static_cast<off_t>(piece.bytes)), 0);
    ASSERT_EQ(pwrite(fd, "stale", 5, 0), 5);
    memory.push_back({fd, piece.bytes});
  }
  ASSERT_TRUE(pool.device->FillCopy(memory, copies).ok());
  std::string filled;
  for (const Device::CopyMemory& piece : memory) {
    std::string bytes(piece.bytes, '?');
    EXPECT_EQ(pread(piece.fd, bytes.data(), piece.bytes, 0), static_cast<ssize_t>(piece.bytes));
    filled += bytes;
  }
  EXPECT_EQ(filled.substr(0, size), head + std::string(kGranule, '\0') + tail);
  EXPECT_EQ(filled.substr(size), std::string(filled.size() - size, '\0'));
  // Pieces that are not what the plan asks (the bytes moved since).
  EXPECT_TRUE(absl::IsFailedPrecondition(pool.device->FillCopy({memory.data(), 1}, copies)));
  for (const Device::CopyMemory& piece : memory) close(piece.fd);

  // Bytes of both inside one granule cannot be cut apart.
  const DeviceToDevice mixed[] = {{0, kGranule, 100}, {100, pool.second_base, 100}};
  EXPECT_TRUE(absl::IsUnimplemented(pool.device->PlanCopy(200, mixed).status()));
}

TEST(PooledDeviceTest, SharedExportsAreEachMembersOwnMemory) {
  Pool pool;
  ASSERT_TRUE(pool.device->Commit(0, kGranule).ok());
  ASSERT_TRUE(pool.device->Commit(pool.second_base + kGranule, kGranule).ok());
  WriteAt(*pool.device, 0, std::string(kGranule, 'x'));
  WriteAt(*pool.device, pool.second_base + kGranule, std::string(kGranule, 'y'));
  ASSERT_TRUE(pool.device->can_share());
  ASSERT_TRUE(pool.device->Exclusive({pool.second_base + kGranule, kGranule}));
  const DeviceRange ranges[] = {{0, kGranule}, {pool.second_base + kGranule, kGranule}};
  absl::StatusOr<std::unique_ptr<ExportedMemory>> exported =
      pool.device->ExportShared(2 * kGranule - 7, ranges);
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_EQ((*exported)->size(), 2 * kGranule - 7);
  ASSERT_EQ((*exported)->pieces().size(), 2u);
  // The second piece is the second member's memory itself.
  const ExportedPiece& piece = (*exported)->pieces()[1];
  void* view = mmap(nullptr, piece.size, PROT_READ | PROT_WRITE, MAP_SHARED, piece.fd, 0);
  ASSERT_NE(view, MAP_FAILED);
  EXPECT_EQ(static_cast<const char*>(view)[5], 'y');
  std::memcpy(view, "through the mapping", 19);
  munmap(view, piece.size);
  EXPECT_EQ(ReadBack(*pool.device, pool.second_base + kGranule, 19), "through the mapping");
}

}  // namespace
}  // namespace cudafs

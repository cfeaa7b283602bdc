#include "alloc/devices/pooled_device.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "alloc/devices/cuda_device.h"
#include "alloc/devices/faulty_device.h"
#include "alloc/devices/host_device.h"
#include "alloc/devices/spill_readiness.h"
#include "gtest/gtest.h"
#include "tests/support/device_bytes.h"
#include "tests/support/fake_cuda_driver.h"
#include "tests/support/recording_device.h"

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
    second_base = device->parts()[1].range.offset;
  }
  std::unique_ptr<PooledDevice> device;
  FaultyDevice* second = nullptr;
  uint64_t second_base = 0;
};


TEST(PooledDeviceTest, MembersAreDisjointPartsOnGibBoundaries) {
  Pool pool;
  const std::vector<DevicePart> parts = pool.device->parts();
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].range.offset, 0u);
  EXPECT_EQ(parts[0].range.length, kMemberSize);
  EXPECT_EQ(parts[1].range.offset, PooledDevice::kMemberAlignment);
  EXPECT_EQ(pool.device->arena_size(), parts[1].range.offset + parts[1].range.length);
  EXPECT_EQ(parts[1].description, "faulty host memory");
  EXPECT_EQ(parts[1].place, "host");
  EXPECT_EQ(pool.device->place(), "host,host");
  EXPECT_EQ(pool.device->Describe(), "2 devices: host memory; faulty host memory");
  // A decorator over the pool (fault injection) shows the same parts.
  const FaultyDevice wrapped(pool.device.get());
  ASSERT_EQ(wrapped.parts().size(), 2u);
  EXPECT_EQ(wrapped.parts()[1].range.offset, parts[1].range.offset);
  EXPECT_EQ(wrapped.parts()[1].description, "faulty host memory");
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
  absl::StatusOr<std::vector<Exporter::CopyPiece>> plan = pool.device->PlanCopy(size, copies);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->size(), 2u);
  EXPECT_EQ((*plan)[0].bytes, 2 * kGranule) << "the first member's run: its bytes and the hole";
  EXPECT_GE((*plan)[1].bytes, kGranule + 100);
  std::vector<Exporter::CopyMemory> memory;
  for (const Exporter::CopyPiece& piece : *plan) {
    EXPECT_EQ(piece.kind, ExportedMemory::Kind::kHost);
    // The caller's own pages, written (the device writes into no page it
    // would have to allocate), and stale.
    const int fd = memfd_create("copy", MFD_CLOEXEC);
    const std::string stale(piece.bytes, 's');
    ASSERT_EQ(pwrite(fd, stale.data(), stale.size(), 0), static_cast<ssize_t>(stale.size()));
    memory.push_back({fd, piece.bytes});
  }
  ASSERT_TRUE(pool.device->FillCopy(memory, copies).ok());
  std::string filled;
  for (const Exporter::CopyMemory& piece : memory) {
    std::string bytes(piece.bytes, '?');
    EXPECT_EQ(pread(piece.fd, bytes.data(), piece.bytes, 0), static_cast<ssize_t>(piece.bytes));
    filled += bytes;
  }
  EXPECT_EQ(filled.substr(0, size), head + std::string(kGranule, '\0') + tail);
  EXPECT_EQ(filled.substr(size), std::string(filled.size() - size, '\0'));
  // Pieces that are not what the plan asks (the bytes moved since).
  EXPECT_TRUE(absl::IsFailedPrecondition(pool.device->FillCopy({memory.data(), 1}, copies)));
  for (const Exporter::CopyMemory& piece : memory) close(piece.fd);

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

// A member whose memory is not this process's (a GPU's): copies to and
// from it go through Read and Write.
class WithoutHostView final : public DeviceWrapper {
 public:
  using DeviceWrapper::DeviceWrapper;
  char* HostView(uint64_t /*offset*/) override { return nullptr; }
};

// Two host devices without a HostView as the GPUs, and a host device as the
// spill member; each member's calls recorded.
struct SpillPool {
  SpillPool() {
    std::vector<std::unique_ptr<Device>> members;
    for (RecordingDevice*& gpu : gpus) {
      auto recording = std::make_unique<RecordingDevice>(Host());
      gpu = recording.get();
      members.push_back(std::make_unique<WithoutHostView>(std::move(recording)));
    }
    auto recording = std::make_unique<RecordingDevice>(Host());
    spill = recording.get();
    device = PooledDevice::Create(std::move(members), std::move(recording)).value();
    for (const DevicePart& part : device->parts()) {
      EXPECT_TRUE(device->Commit(part.range.offset, 8 * kGranule).ok());
    }
  }
  ~SpillPool() {
    for (const DevicePart& part : device->parts()) {
      EXPECT_TRUE(device->Decommit(part.range.offset, 8 * kGranule).ok());
    }
    for (const RecordingDevice* member : {gpus[0], gpus[1], spill}) {
      for (const std::string& violation : member->violations()) ADD_FAILURE() << violation;
    }
  }
  uint64_t base(size_t part) const { return device->parts()[part].range.offset; }

  std::unique_ptr<PooledDevice> device;
  RecordingDevice* gpus[2] = {nullptr, nullptr};
  RecordingDevice* spill = nullptr;
};

std::string Bytes(size_t length, uint32_t seed) {
  std::string bytes(length, '\0');
  uint32_t x = seed * 2654435761u + 1;
  for (char& byte : bytes) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    byte = static_cast<char>(x);
  }
  return bytes;
}

TEST(PooledDeviceSpillTest, TheSpillIsTheLastPartAndTheOnlySpillPart) {
  std::vector<std::unique_ptr<Device>> gpus;
  gpus.push_back(Host());
  gpus.push_back(Host(2 * kMemberSize));
  absl::StatusOr<std::unique_ptr<PooledDevice>> pool =
      PooledDevice::Create(std::move(gpus), Host(3 * kMemberSize));
  ASSERT_TRUE(pool.ok()) << pool.status();
  const PooledDevice& device = **pool;
  const std::vector<DevicePart> parts = device.parts();
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[1].range.length, 2 * kMemberSize);
  EXPECT_EQ(parts[2].range.offset, 2 * PooledDevice::kMemberAlignment);
  EXPECT_EQ(parts[2].range.length, 3 * kMemberSize) << "the spill device's own arena";
  EXPECT_EQ(device.arena_size(), parts[2].range.offset + parts[2].range.length);
  EXPECT_FALSE(device.parts()[0].spill);
  EXPECT_FALSE(device.parts()[1].spill);
  EXPECT_TRUE(device.parts()[2].spill);
  for (size_t part = 0; part < parts.size(); ++part) {
    EXPECT_EQ(device.parts()[part].place, "host") << part;
    EXPECT_FALSE(device.PartMemory(part).has_value()) << "part " << part << " is no GPU";
  }
  EXPECT_EQ(device.Describe(), "3 devices: host memory; host memory; host memory");
  // Seen through a decorator, as the arena of a mount with fault injection.
  const FaultyDevice wrapped(pool->get());
  EXPECT_TRUE(wrapped.parts()[2].spill);
  EXPECT_FALSE(wrapped.parts()[1].spill);
  EXPECT_EQ(wrapped.parts()[2].place, "host");
}

TEST(PooledDeviceSpillTest, WithoutASpillNoPartIsOne) {
  Pool pool;
  ASSERT_EQ(pool.device->parts().size(), 2u);
  EXPECT_FALSE(pool.device->parts()[0].spill);
  EXPECT_FALSE(pool.device->parts()[1].spill);

  std::vector<std::unique_ptr<Device>> one;
  one.push_back(Host());
  std::unique_ptr<PooledDevice> alone = PooledDevice::Create(std::move(one)).value();
  ASSERT_EQ(alone->parts().size(), 1u);
  EXPECT_FALSE(alone->parts()[0].spill);
  EXPECT_EQ(pool.device->spill_readiness(), nullptr) << "no host memory to keep ready";
  EXPECT_EQ(alone->spill_readiness(), nullptr);
}

// The pool keeps its spill member's memory ready, and answers at its own
// offsets where that memory is: in the spill part only.
TEST(PooledDeviceSpillTest, HostMemoryIsKeptReadyInTheSpillPartOnly) {
  std::vector<std::unique_ptr<Device>> gpus;
  gpus.push_back(Host());
  std::unique_ptr<PooledDevice> pool = PooledDevice::Create(std::move(gpus), Host()).value();
  SpillReadiness* ready = pool->spill_readiness();
  ASSERT_NE(ready, nullptr);
  const uint64_t spill = pool->parts()[1].range.offset;
  EXPECT_EQ(ready->ready_bytes(), 0u);
  EXPECT_FALSE(ready->IsReady(spill, kGranule)) << "nothing asked yet";
  ready->KeepReady(kGranule);
  EXPECT_GE(ready->ready_bytes(), kGranule);
  EXPECT_TRUE(ready->IsReady(spill, kGranule));
  EXPECT_FALSE(ready->IsReady(0, kGranule)) << "the GPU's memory is never kept ready";
  EXPECT_FALSE(ready->IsReady(spill - kGranule, 2 * kGranule)) << "across two parts";
  ready->KeepReady(0);
  EXPECT_EQ(ready->ready_bytes(), 0u);
  EXPECT_FALSE(ready->IsReady(spill, kGranule));
}

TEST(PooledDeviceSpillTest, RefusesASpillOfAnotherGranuleOrWithoutGpus) {
  class Coarse final : public DeviceWrapper {
   public:
    using DeviceWrapper::DeviceWrapper;
    uint64_t granule_size() const override { return 2 * kGranule; }
  };
  std::vector<std::unique_ptr<Device>> gpus;
  gpus.push_back(Host());
  EXPECT_TRUE(absl::IsInvalidArgument(
      PooledDevice::Create(std::move(gpus), std::make_unique<Coarse>(Host())).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(PooledDevice::Create({}, Host()).status()));
}

// One GPU and a spill make a pool of two parts, the spill the second.
TEST(PooledDeviceSpillTest, OneGpuAndASpillAreTwoParts) {
  std::vector<std::unique_ptr<Device>> gpus;
  gpus.push_back(Host());
  std::unique_ptr<PooledDevice> pool =
      PooledDevice::Create(std::move(gpus), Host()).value();
  ASSERT_EQ(pool->parts().size(), 2u);
  EXPECT_FALSE(pool->parts()[0].spill);
  EXPECT_TRUE(pool->parts()[1].spill);
}

// A copy between a GPU and the spill goes between the GPU and the spill's
// own memory: one transfer on the GPU, none on the spill device; larger
// than a staging buffer, of an odd length at odd offsets.
TEST(PooledDeviceSpillTest, CopiesBetweenAGpuAndTheSpillGoStraightBothWays) {
  SpillPool pool;
  const uint64_t spill = pool.base(2);
  const uint64_t gpu = pool.base(1);
  const std::string bytes = Bytes(9 * kMiB + 12345, 1);
  WriteAt(*pool.device, gpu + 3, bytes);
  WriteAt(*pool.device, spill, std::string(10 * kMiB, 's'));
  const uint64_t gpu_reads = pool.gpus[1]->read_batches();
  const uint64_t spill_writes = pool.spill->write_batches();

  const DeviceToDevice out{spill + 1001, gpu + 3, bytes.size()};
  ASSERT_TRUE(pool.device->Copy({&out, 1}).ok());
  EXPECT_EQ(ReadBack(*pool.device, spill + 1001, bytes.size()), bytes);
  EXPECT_EQ(ReadBack(*pool.device, spill, 1001), std::string(1001, 's')) << "before the copy";
  EXPECT_EQ(ReadBack(*pool.device, spill + 1001 + bytes.size(), 4096), std::string(4096, 's'))
      << "after the copy";
  EXPECT_EQ(pool.gpus[1]->read_batches(), gpu_reads + 1);
  EXPECT_EQ(pool.spill->write_batches(), spill_writes) << "the spill's memory was not written";

  // Back into the other GPU, at another odd offset.
  const uint64_t other = pool.base(0);
  WriteAt(*pool.device, other, std::string(10 * kMiB, 'g'));
  const uint64_t gpu_writes = pool.gpus[0]->write_batches();
  const uint64_t spill_reads = pool.spill->read_batches();
  const DeviceToDevice in{other + 77, spill + 1001, bytes.size()};
  ASSERT_TRUE(pool.device->Copy({&in, 1}).ok());
  EXPECT_EQ(ReadBack(*pool.device, other + 77, bytes.size()), bytes);
  EXPECT_EQ(ReadBack(*pool.device, other, 77), std::string(77, 'g'));
  EXPECT_EQ(ReadBack(*pool.device, other + 77 + bytes.size(), 4096), std::string(4096, 'g'));
  EXPECT_EQ(pool.gpus[0]->write_batches(), gpu_writes + 1);
  EXPECT_EQ(pool.spill->read_batches(), spill_reads) << "the spill's memory was not read";
}

TEST(PooledDeviceSpillTest, SmallCopiesBetweenAGpuAndTheSpillInOneBatch) {
  SpillPool pool;
  const uint64_t spill = pool.base(2);
  const std::string first = Bytes(4097, 2);
  const std::string second = Bytes(3, 3);
  WriteAt(*pool.device, pool.base(0) + 10, first);
  WriteAt(*pool.device, spill + 5 * kGranule, second);
  // Out to the spill, in from it, and within a GPU, all in one batch.
  const DeviceToDevice copies[] = {{spill + kGranule - 1, pool.base(0) + 10, first.size()},
                                   {pool.base(1) + 7, spill + 5 * kGranule, second.size()},
                                   {pool.base(0) + 2 * kGranule, pool.base(0) + 10, 100}};
  ASSERT_TRUE(pool.device->Copy(copies).ok());
  EXPECT_EQ(ReadBack(*pool.device, spill + kGranule - 1, first.size()), first)
      << "across a granule boundary of the spill";
  EXPECT_EQ(ReadBack(*pool.device, pool.base(1) + 7, second.size()), second);
  EXPECT_EQ(ReadBack(*pool.device, pool.base(0) + 2 * kGranule, 100), first.substr(0, 100));
}

// Between two GPUs, the bounce buffer still carries the bytes.
TEST(PooledDeviceSpillTest, CopiesBetweenTwoGpusStillWork) {
  SpillPool pool;
  const std::string bytes = Bytes(5 * kMiB + 3, 4);
  WriteAt(*pool.device, pool.base(0) + 1, bytes);
  const DeviceToDevice across{pool.base(1) + 2, pool.base(0) + 1, bytes.size()};
  ASSERT_TRUE(pool.device->Copy({&across, 1}).ok());
  EXPECT_EQ(ReadBack(*pool.device, pool.base(1) + 2, bytes.size()), bytes);
}

// A GPU of the fake driver and host memory as its spill: each part names
// its place, only the GPU's reports its memory (and only while it holds a
// context), and bytes cross between the two both ways.
TEST(PooledDeviceSpillTest, AFakeGpuAndItsSpill) {
  FakeCudaDriver fake({FakeGpuOptions{.name = "Fake GPU A", .pci_bus_id = "0000:65:00.0"},
                       FakeGpuOptions{.name = "Fake GPU B", .pci_bus_id = "0000:66:00.0"}});
  std::vector<std::unique_ptr<Device>> gpus;
  absl::StatusOr<std::unique_ptr<CudaDevice>> gpu = CudaDevice::Create(
      fake.driver(), 1, kGiB,
      CudaDeviceOptions{.idle_release = absl::InfiniteDuration(), .reserve_bytes = 3 * kMiB});
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  gpus.push_back(std::move(*gpu));
  absl::StatusOr<std::unique_ptr<PooledDevice>> created =
      PooledDevice::Create(std::move(gpus), Host());
  ASSERT_TRUE(created.ok()) << created.status();
  PooledDevice& pool = **created;
  EXPECT_EQ(pool.parts()[0].place, "gpu1");
  EXPECT_EQ(pool.parts()[1].place, "host");
  EXPECT_FALSE(pool.parts()[0].spill);
  EXPECT_TRUE(pool.parts()[1].spill);
  EXPECT_FALSE(pool.PartMemory(0).has_value()) << "no context yet";
  EXPECT_EQ(fake.stats().live_contexts, 0) << "asking made a context";

  const uint64_t spill = pool.parts()[1].range.offset;
  ASSERT_TRUE(pool.Commit(0, 4 * kGranule).ok());
  ASSERT_TRUE(pool.Commit(spill, 4 * kGranule).ok());
  fake.set_used_by_others(1, 100 * kMiB);
  const std::optional<Device::GpuMemory> memory = pool.PartMemory(0);
  ASSERT_TRUE(memory.has_value());
  EXPECT_EQ(memory->total, FakeGpuOptions{}.total_bytes);
  EXPECT_EQ(memory->free, FakeGpuOptions{}.total_bytes - 100 * kMiB - fake.stats(1).physical_bytes);
  EXPECT_EQ(memory->reserve, 3 * kMiB);
  EXPECT_FALSE(pool.PartMemory(1).has_value());

  const std::string bytes = Bytes(5 * kMiB + 777, 5);
  WriteAt(pool, 5, bytes);
  const DeviceToDevice out{spill + 11, 5, bytes.size()};
  ASSERT_TRUE(pool.Copy({&out, 1}).ok());
  EXPECT_EQ(ReadBack(pool.member(1), 11, bytes.size()), bytes);
  const DeviceToDevice in{2 * kMiB + 1, spill + 11, bytes.size()};
  ASSERT_TRUE(pool.Copy({&in, 1}).ok());
  EXPECT_EQ(ReadBack(pool, 2 * kMiB + 1, bytes.size()), bytes);
  ASSERT_TRUE(pool.Decommit(0, 4 * kGranule).ok());
  ASSERT_TRUE(pool.Decommit(spill, 4 * kGranule).ok());
}

}  // namespace
}  // namespace cudafs

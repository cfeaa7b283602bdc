// CudaDevice against a real GPU. Every test skips where the machine has no
// usable GPU (CI).
#include "alloc/devices/cuda_device.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/support/free_vram.h"

namespace cudafs {
namespace {

class CudaDeviceTest : public testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::vector<int>> first = ResolveCudaDevices("");
    if (!first.ok()) GTEST_SKIP() << "no usable GPU: " << first.status().message();
    index_ = first->front();
  }

  std::unique_ptr<CudaDevice> Open(uint64_t size) {
    absl::StatusOr<std::unique_ptr<CudaDevice>> device = CudaDevice::Create(index_, size);
    EXPECT_TRUE(device.ok()) << device.status();
    return device.ok() ? std::move(*device) : nullptr;
  }

  int index_ = 0;
};

TEST_F(CudaDeviceTest, OpeningTakesNoContextAndNoMemory) {
  const uint64_t before = FreeVram(index_);
  std::unique_ptr<CudaDevice> device = Open(16 * kGiB);
  ASSERT_NE(device, nullptr);
  EXPECT_EQ(device->arena_size() % device->granule_size(), 0u);
  EXPECT_GE(device->arena_size(), 16 * kGiB);
  EXPECT_FALSE(device->stats().has_context);
  EXPECT_LT(static_cast<int64_t>(before - FreeVram(index_)), static_cast<int64_t>(64 * kMiB));
}

// The context comes with the first Commit and goes, with everything made
// under it, once nothing has been committed for the idle time; host buffers
// made before, during and after stay usable throughout.
TEST_F(CudaDeviceTest, TheContextComesWithTheFirstCommitAndGoesWhenIdle) {
  absl::StatusOr<std::unique_ptr<CudaDevice>> opened = CudaDevice::Create(
      index_, 1 * kGiB, CudaDeviceOptions{.idle_release = absl::Milliseconds(200)});
  ASSERT_TRUE(opened.ok()) << opened.status();
  CudaDevice& device = **opened;
  char* early = static_cast<char*>(device.AllocateHostBuffer(kMiB));
  ASSERT_NE(early, nullptr);
  for (int round = 0; round < 2; ++round) {
    const uint64_t before = FreeVram(index_);
    ASSERT_TRUE(device.Commit(0, 64 * kMiB).ok());
    EXPECT_TRUE(device.stats().has_context);
    EXPECT_EQ(device.stats().pieces, 64 * kMiB / CudaDevice::kMaxPieceBytes);
    EXPECT_GE(before - FreeVram(index_), 64 * kMiB);
    std::memset(early, 'a' + round, kMiB);
    ASSERT_TRUE(device.Write({{12345, early, kMiB}}).ok());
    std::string back(kMiB, '\0');
    ASSERT_TRUE(device.Read({{back.data(), 12345, kMiB}}).ok());
    EXPECT_EQ(back, std::string(kMiB, static_cast<char>('a' + round)));
    ASSERT_TRUE(device.Decommit(0, 64 * kMiB).ok());
    absl::SleepFor(absl::Milliseconds(600));
    EXPECT_FALSE(device.stats().has_context) << "round " << round;
    EXPECT_EQ(device.stats().contexts_created, static_cast<uint64_t>(round + 1));
    EXPECT_GE(FreeVram(index_) + 8 * kMiB, before) << "VRAM not returned, round " << round;
  }
  device.FreeHostBuffer(early, kMiB);
}

TEST_F(CudaDeviceTest, CommitTakesVramAndDecommitGivesItBack) {
  std::unique_ptr<CudaDevice> device = Open(8 * kGiB);
  ASSERT_NE(device, nullptr);
  const uint64_t before = FreeVram(index_);
  ASSERT_TRUE(device->Commit(0, 2 * kGiB).ok());
  const uint64_t committed = FreeVram(index_);
  EXPECT_GE(before - committed, 2 * kGiB - 64 * kMiB);
  ASSERT_TRUE(device->Decommit(0, 2 * kGiB).ok());
  EXPECT_GE(FreeVram(index_) + 64 * kMiB, before);
}

TEST_F(CudaDeviceTest, CopiesRoundTripInEveryDirection) {
  std::unique_ptr<CudaDevice> device = Open(1 * kGiB);
  ASSERT_NE(device, nullptr);
  const uint64_t granule = device->granule_size();
  ASSERT_TRUE(device->Commit(0, 4 * granule).ok());
  const size_t length = 3 * granule + 12345;  // crosses granules, odd size
  char* pinned = static_cast<char*>(device->AllocateHostBuffer(length));
  ASSERT_NE(pinned, nullptr);
  std::mt19937_64 rng(1);
  for (size_t i = 0; i < length; ++i) pinned[i] = static_cast<char>(rng());
  const std::string expected(pinned, length);

  ASSERT_TRUE(device->Write({{100, pinned, length}}).ok());
  std::string back(length, '\0');
  ASSERT_TRUE(device->Read({{back.data(), 100, length}}).ok());  // pageable
  EXPECT_EQ(back, expected);

  // Device to device, then read the copy into pinned memory.
  ASSERT_TRUE(device->Copy({{granule / 2, 100, 4096}}).ok());
  std::memset(pinned, 0, length);
  ASSERT_TRUE(device->Read({{pinned, granule / 2, 4096}}).ok());
  EXPECT_EQ(std::string(pinned, 4096), expected.substr(0, 4096));

  // A batch of small scattered copies.
  std::vector<HostToDevice> writes;
  std::string small(64 * 512, '\0');
  for (size_t i = 0; i < 64; ++i) {
    std::fill_n(small.data() + i * 512, 512, static_cast<char>('a' + i % 26));
    writes.push_back({i * 8192 + 7, small.data() + i * 512, 512});
  }
  ASSERT_TRUE(device->Write(writes).ok());
  for (size_t i = 0; i < 64; ++i) {
    char out[512];
    ASSERT_TRUE(device->Read({{out, i * 8192 + 7, sizeof out}}).ok());
    EXPECT_EQ(std::string(out, sizeof out), small.substr(i * 512, 512)) << i;
  }
  // The same pieces moved on the device and read back in batches, into
  // pinned and pageable memory, in reverse order.
  std::vector<DeviceToDevice> moves;
  for (size_t i = 0; i < 64; ++i) moves.push_back({granule + i * 4099, i * 8192 + 7, 512});
  ASSERT_TRUE(device->Copy(moves).ok());
  std::string pageable_back(64 * 512, '\0');
  std::vector<DeviceToHost> reads;
  for (size_t i = 64; i-- > 0;) {
    char* into = i % 2 == 0 ? pinned + i * 512 : pageable_back.data() + i * 512;
    reads.push_back({into, granule + i * 4099, 512});
  }
  ASSERT_TRUE(device->Read(reads).ok());
  for (size_t i = 0; i < 64; ++i) {
    const char* got = i % 2 == 0 ? pinned + i * 512 : pageable_back.data() + i * 512;
    EXPECT_EQ(std::string(got, 512), small.substr(i * 512, 512)) << i;
  }

  ASSERT_TRUE(device->Zero({{100, 1000}}).ok());
  ASSERT_TRUE(device->Read({{back.data(), 100, 1000}}).ok());
  EXPECT_EQ(back.substr(0, 1000), std::string(1000, '\0'));
  device->FreeHostBuffer(pinned, length);
}

// Many small pieces from pinned memory go through the scatter kernel: every
// piece lands, nothing between them changes, on the kernel's 16-byte path
// and its byte path alike; batches it does not take still work.
TEST_F(CudaDeviceTest, ScatteredWritesLandEveryPieceAndNothingElse) {
  std::unique_ptr<CudaDevice> device = Open(1 * kGiB);
  ASSERT_NE(device, nullptr);
  const uint64_t region = 3 * device->granule_size();
  ASSERT_TRUE(device->Commit(0, region).ok());
  std::mt19937_64 rng(7);
  std::string expected(region, '\0');
  for (char& c : expected) c = static_cast<char>(rng());
  ASSERT_TRUE(device->Write({{0, expected.data(), region}}).ok());

  constexpr size_t kStaging = 4 << 20;
  char* staging = static_cast<char*>(device->AllocateHostBuffer(kStaging));
  ASSERT_NE(staging, nullptr);
  for (size_t i = 0; i < kStaging; ++i) staging[i] = static_cast<char>(rng());
  // Distinct 4 KiB slots of the region in random order; some pieces are a
  // whole aligned page, others odd (unaligned start or length).
  std::vector<uint64_t> slots(region / 4096);
  for (size_t i = 0; i < slots.size(); ++i) slots[i] = i;
  std::shuffle(slots.begin(), slots.end(), rng);
  const auto scatter = [&](size_t count) {
    std::vector<HostToDevice> pieces;
    size_t used = 0;
    for (size_t i = 0; i < count; ++i) {
      const bool odd = i % 5 == 0;
      const uint64_t offset = slots[i] * 4096 + (odd ? 1 + rng() % 100 : 0);
      const size_t length = odd ? 1 + rng() % 3000 : 4096;
      pieces.push_back({offset, staging + used, length});
      expected.replace(offset, length, staging + used, length);
      used += length;
    }
    return pieces;
  };

  const uint64_t before = device->stats().scattered_writes;
  ASSERT_TRUE(device->Write(scatter(1000)).ok());
  EXPECT_EQ(device->stats().scattered_writes, before + 1);
  std::string back(region, '\0');
  ASSERT_TRUE(device->Read({{back.data(), 0, region}}).ok());
  EXPECT_TRUE(back == expected) << "first difference at byte "
                                << std::mismatch(back.begin(), back.end(), expected.begin())
                                           .first -
                                       back.begin();

  // More pieces than one launch takes: the copies path, same result.
  std::shuffle(slots.begin(), slots.end(), rng);
  std::vector<HostToDevice> many;
  for (size_t i = 0; i < 4097; ++i) {
    const uint64_t offset = slots[i % slots.size()] * 4096 + 32 + i / slots.size() * 64;
    many.push_back({offset, staging + i * 16, 16});
    expected.replace(offset, 16, staging + i * 16, 16);
  }
  ASSERT_TRUE(device->Write(many).ok());
  // Pageable sources, which the GPU may not reach: copies too.
  std::string pageable(8 * 64, '\0');
  for (char& c : pageable) c = static_cast<char>(rng());
  std::vector<HostToDevice> from_pageable;
  for (size_t i = 0; i < 8; ++i) {
    from_pageable.push_back({slots[i] * 4096 + 1000, pageable.data() + i * 64, 64});
    expected.replace(slots[i] * 4096 + 1000, 64, pageable, i * 64, 64);
  }
  ASSERT_TRUE(device->Write(from_pageable).ok());
  // Large pieces, which the copy engines move faster: copies too.
  std::vector<HostToDevice> large;
  for (size_t i = 0; i < 4; ++i) {
    const uint64_t offset = i * (region / 4);
    large.push_back({offset, staging + i * 256 * 1024, 256 * 1024});
    expected.replace(offset, 256 * 1024, staging + i * 256 * 1024, 256 * 1024);
  }
  ASSERT_TRUE(device->Write(large).ok());
  EXPECT_EQ(device->stats().scattered_writes, before + 1);
  ASSERT_TRUE(device->Read({{back.data(), 0, region}}).ok());
  EXPECT_TRUE(back == expected);
  device->FreeHostBuffer(staging, kStaging);
}

TEST_F(CudaDeviceTest, OutOfRangeCopiesFailWithoutTouchingTheGpu) {
  std::unique_ptr<CudaDevice> device = Open(64 * kMiB);
  ASSERT_NE(device, nullptr);
  char byte = 0;
  EXPECT_FALSE(device->Write({{device->arena_size(), &byte, 1}}).ok());
  EXPECT_FALSE(device->Read({{&byte, device->arena_size() - 1, 2}}).ok());
  EXPECT_FALSE(device->Commit(device->arena_size(), device->granule_size()).ok());
}

// size= may exceed the GPU's memory; committing past what exists fails
// with ResourceExhausted (ENOSPC), keeps what was committed and its data.
TEST_F(CudaDeviceTest, CommittingMoreThanTheGpuHasIsResourceExhausted) {
  absl::StatusOr<uint64_t> total = CudaTotalMemory(index_);
  ASSERT_TRUE(total.ok());
  std::unique_ptr<CudaDevice> device = Open(*total + 8 * kGiB);
  ASSERT_NE(device, nullptr);
  const uint64_t granule = device->granule_size();
  const char marker[] = "still here";
  ASSERT_TRUE(device->Commit(0, granule).ok());
  ASSERT_TRUE(device->Write({{0, marker, sizeof marker}}).ok());
  uint64_t committed = granule;
  absl::Status status;
  // 1 GiB at a time, all or nothing per call.
  while ((status = device->Commit(committed, 512 * granule)).ok()) committed += 512 * granule;
  EXPECT_TRUE(absl::IsResourceExhausted(status)) << status;
  EXPECT_LE(committed, *total);
  EXPECT_GE(committed, *total / 2);  // nothing else should hold half the GPU
  char out[sizeof marker] = {};
  ASSERT_TRUE(device->Read({{out, 0, sizeof out}}).ok());
  EXPECT_STREQ(out, marker);
  // The failed call left nothing behind: freeing one granule lets one in.
  ASSERT_TRUE(device->Decommit(committed - granule, granule).ok());
  EXPECT_TRUE(device->Commit(committed - granule, granule).ok());
  ASSERT_TRUE(device->Decommit(0, committed).ok());
}

TEST(CudaDeviceNames, UnknownDevicesAreInvalidArgument) {
  absl::StatusOr<std::vector<int>> first = ResolveCudaDevices("");
  if (!first.ok()) GTEST_SKIP() << "no usable GPU: " << first.status().message();
  EXPECT_TRUE(absl::IsInvalidArgument(ResolveCudaDevices("999").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ResolveCudaDevices("-1").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ResolveCudaDevices("ffff:ff:1f.7").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ResolveCudaDevices("0+0").status()));
  absl::StatusOr<std::vector<CudaDeviceInfo>> devices = ListCudaDevices();
  ASSERT_TRUE(devices.ok());
  ASSERT_FALSE(devices->empty());
  // Bus ids resolve to their own index.
  for (const CudaDeviceInfo& info : *devices) {
    absl::StatusOr<std::vector<int>> by_bus = ResolveCudaDevices(info.pci_bus_id);
    ASSERT_TRUE(by_bus.ok()) << info.pci_bus_id << ": " << by_bus.status();
    EXPECT_EQ(*by_bus, std::vector<int>{info.index});
    EXPECT_GT(info.total_bytes, 0u);
    EXPECT_LE(info.free_bytes, info.total_bytes);
  }
}

}  // namespace
}  // namespace cudafs

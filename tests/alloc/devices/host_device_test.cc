#include "alloc/devices/host_device.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "alloc/base/errors.h"
#include "gtest/gtest.h"
#include "tests/support/random_pattern.h"

namespace cudafs {
namespace {

constexpr uint64_t kGranule = HostDevice::kGranule;

std::unique_ptr<HostDevice> MakeDevice(uint64_t size,
                                       HostDevice::Backing backing = HostDevice::Backing::kMemfd) {
  absl::StatusOr<std::unique_ptr<HostDevice>> device = HostDevice::Create(size, backing);
  EXPECT_TRUE(device.ok()) << device.status();
  return device.ok() ? std::move(*device) : nullptr;
}

std::vector<char> ReadBack(HostDevice& device, uint64_t offset, size_t length) {
  std::vector<char> bytes(length);
  absl::Status status = device.Read({DeviceToHost{bytes.data(), offset, length}});
  EXPECT_TRUE(status.ok()) << status;
  return bytes;
}

// Bytes of memory the one live arena holds, as the kernel counts them
// (HostDevice exposes no accounting of its own, and the kernel's is the one
// that matters: the memory held should follow what is committed). A memfd:
// its blocks, found among this process's descriptors (nullopt unless
// exactly one arena's is there). Anonymous memory: its pages in memory.
std::optional<uint64_t> HeldBytes(HostDevice& device, HostDevice::Backing backing) {
  if (backing == HostDevice::Backing::kHugePages) {
    const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    std::vector<unsigned char> pages(device.arena_size() / page);
    if (mincore(device.HostView(0), device.arena_size(), pages.data()) != 0) return std::nullopt;
    return page * static_cast<uint64_t>(std::count_if(pages.begin(), pages.end(),
                                                      [](unsigned char p) { return p & 1; }));
  }
  std::optional<uint64_t> bytes;
  int found = 0;
  for (const std::filesystem::directory_entry& fd :
       std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code error;
    const std::string target = std::filesystem::read_symlink(fd.path(), error).string();
    struct stat st;
    if (error || target.rfind("/memfd:cudafs-arena", 0) != 0 || stat(fd.path().c_str(), &st) != 0) {
      continue;
    }
    ++found;
    bytes = static_cast<uint64_t>(st.st_blocks) * 512;
  }
  return found == 1 ? bytes : std::nullopt;
}

// The tests every backing must pass.
class HostDeviceBackingTest : public ::testing::TestWithParam<HostDevice::Backing> {
 protected:
  std::unique_ptr<HostDevice> Make(uint64_t size) { return MakeDevice(size, GetParam()); }
};

TEST(HostDeviceTest, CreateRoundsTheArenaUpToAGranule) {
  std::unique_ptr<HostDevice> device = MakeDevice(1);
  ASSERT_NE(device, nullptr);
  EXPECT_EQ(device->arena_size(), kGranule);
  EXPECT_EQ(device->granule_size(), kGranule);
  EXPECT_FALSE(device->Describe().empty());

  device = MakeDevice(3 * kGranule + 1);
  ASSERT_NE(device, nullptr);
  EXPECT_EQ(device->arena_size(), 4 * kGranule);

  device = MakeDevice(5 * kGranule);
  ASSERT_NE(device, nullptr);
  EXPECT_EQ(device->arena_size(), 5 * kGranule);
}

TEST(HostDeviceTest, CreateRejectsAnEmptyArena) {
  absl::StatusOr<std::unique_ptr<HostDevice>> device = HostDevice::Create(0);
  EXPECT_TRUE(absl::IsInvalidArgument(device.status())) << device.status();
}

// Adopt: a second device over the first one's memfd sees its bytes, and
// committing them again (fallocate) keeps them.
TEST(HostDeviceTest, AdoptKeepsTheBytesOfTheMemfdItTakesOver) {
  std::unique_ptr<HostDevice> first = HostDevice::Create(4 * HostDevice::kGranule).value();
  ASSERT_TRUE(first->Commit(HostDevice::kGranule, HostDevice::kGranule).ok());
  const std::string bytes = "kept across processes";
  ASSERT_TRUE(first->Write({{HostDevice::kGranule + 100, bytes.data(), bytes.size()}}).ok());
  absl::StatusOr<std::unique_ptr<HostDevice>> second = HostDevice::Adopt(dup(first->memory()));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ((*second)->arena_size(), first->arena_size());
  first.reset();  // its process is gone; its decommits never come
  ASSERT_TRUE((*second)->Commit(HostDevice::kGranule, HostDevice::kGranule).ok());
  std::string read(bytes.size(), '\0');
  ASSERT_TRUE((*second)->Read({{read.data(), HostDevice::kGranule + 100, read.size()}}).ok());
  EXPECT_EQ(read, bytes);
}

TEST(HostDeviceTest, AdoptRefusesWhatIsNoArena) {
  EXPECT_TRUE(absl::IsInvalidArgument(HostDevice::Adopt(open("/dev/null", O_RDWR)).status()));
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  EXPECT_TRUE(absl::IsInvalidArgument(HostDevice::Adopt(fds[0]).status()));
  close(fds[1]);
  const int empty = memfd_create("empty", MFD_CLOEXEC);
  EXPECT_TRUE(absl::IsInvalidArgument(HostDevice::Adopt(empty).status()));
  EXPECT_FALSE(HostDevice::Adopt(-1).ok());
}

TEST_P(HostDeviceBackingTest, CommitMakesGranulesResidentAndDecommitGivesThemBack) {
  constexpr uint64_t kGranules = 13;
  std::unique_ptr<HostDevice> device = Make(kGranules * kGranule);
  ASSERT_NE(device, nullptr);
  std::optional<uint64_t> held = HeldBytes(*device, GetParam());
  ASSERT_TRUE(held.has_value()) << "the arena's memory is not found";
  EXPECT_EQ(*held, 0u) << "a reserved arena must not hold memory";

  ASSERT_TRUE(device->Commit(2 * kGranule, 4 * kGranule).ok());
  ASSERT_TRUE(device->Commit(9 * kGranule, kGranule).ok());
  // At least what was committed (transparent huge pages may round up).
  held = HeldBytes(*device, GetParam());
  ASSERT_TRUE(held.has_value());
  const uint64_t before = *held;
  EXPECT_GE(before, 5 * kGranule);

  ASSERT_TRUE(device->Decommit(3 * kGranule, 2 * kGranule).ok());
  held = HeldBytes(*device, GetParam());
  ASSERT_TRUE(held.has_value());
  EXPECT_LE(*held, before - 2 * kGranule);
  EXPECT_GE(*held, 3 * kGranule);

  ASSERT_TRUE(device->Decommit(0, kGranules * kGranule).ok());
  EXPECT_EQ(HeldBytes(*device, GetParam()), 0u);
}

TEST_P(HostDeviceBackingTest, DecommittedMemoryReadsBackAsZerosAfterRecommit) {
  std::unique_ptr<HostDevice> device = Make(4 * kGranule);
  ASSERT_NE(device, nullptr);
  ASSERT_TRUE(device->Commit(0, 4 * kGranule).ok());
  const std::vector<char> data = Pattern(4 * kGranule, 1);
  ASSERT_TRUE(device->Write({HostToDevice{0, data.data(), data.size()}}).ok());

  ASSERT_TRUE(device->Decommit(kGranule, 2 * kGranule).ok());
  ASSERT_TRUE(device->Commit(kGranule, 2 * kGranule).ok());

  const std::vector<char> after = ReadBack(*device, 0, 4 * kGranule);
  // The granules left committed keep their bytes...
  EXPECT_EQ(std::memcmp(after.data(), data.data(), kGranule), 0);
  EXPECT_EQ(std::memcmp(after.data() + 3 * kGranule, data.data() + 3 * kGranule, kGranule), 0);
  // ...and the recommitted ones are fresh memory: the old bytes are gone.
  const std::vector<char> zeros(2 * kGranule, 0);
  EXPECT_EQ(std::memcmp(after.data() + kGranule, zeros.data(), zeros.size()), 0);
}

// HostView (a pool copies through it) and the transfers reach the same
// bytes, in the arena's memory as in a range shared and then taken back.
TEST_P(HostDeviceBackingTest, TheViewAndTransfersSeeTheSameBytes) {
  std::unique_ptr<HostDevice> device = Make(4 * kGranule);
  ASSERT_NE(device, nullptr);
  ASSERT_TRUE(device->Commit(0, 4 * kGranule).ok());
  const std::vector<char> data = Pattern(3 * kGranule, 9);
  for (int shared = 0; shared < 2; ++shared) {
    SCOPED_TRACE(shared ? "a range shared, decommitted and committed again" : "fresh");
    ASSERT_TRUE(device->Write({{kGranule + 1, data.data(), data.size() - 1}}).ok());
    EXPECT_EQ(std::memcmp(device->HostView(kGranule + 1), data.data(), data.size() - 1), 0);
    std::memcpy(device->HostView(5), "view", 4);
    EXPECT_EQ(ReadBack(*device, 5, 4), std::vector<char>({'v', 'i', 'e', 'w'}));
    ASSERT_TRUE(device->Copy({{2 * kGranule, 5, 4}}).ok());
    EXPECT_EQ(std::string_view(device->HostView(2 * kGranule), 4), "view");
    ASSERT_TRUE(device->Zero({{2 * kGranule + 1, 2}}).ok());
    EXPECT_EQ(std::string_view(device->HostView(2 * kGranule), 4), std::string_view("v\0\0w", 4));

    absl::StatusOr<std::unique_ptr<ExportedMemory>> exported =
        device->ExportShared(kGranule, {{2 * kGranule, kGranule}});
    ASSERT_TRUE(exported.ok()) << exported.status();
    ASSERT_TRUE(device->Decommit(2 * kGranule, kGranule).ok());
    ASSERT_TRUE(device->Commit(2 * kGranule, kGranule).ok());
    EXPECT_EQ(ReadBack(*device, 2 * kGranule, 4), std::vector<char>(4, 0)) << "fresh memory";
  }
}

class HostDeviceCopyTest : public HostDeviceBackingTest {
 protected:
  static constexpr uint64_t kArena = 4 * kGranule;

  void SetUp() override {
    device_ = Make(kArena);
    ASSERT_NE(device_, nullptr);
    ASSERT_TRUE(device_->Commit(0, kArena).ok());
    // Known content everywhere, so that a copy touching bytes outside its
    // range shows.
    mirror_ = Pattern(kArena, 7);
    ASSERT_TRUE(device_->Write({HostToDevice{0, mirror_.data(), mirror_.size()}}).ok());
  }

  // The whole arena must equal what the test expects it to hold.
  void ExpectArenaMatchesMirror() {
    const std::vector<char> actual = ReadBack(*device_, 0, kArena);
    for (uint64_t i = 0; i < kArena; ++i) {
      if (actual[i] != mirror_[i]) {
        ADD_FAILURE() << "arena byte " << i << " differs from the expected content";
        return;
      }
    }
  }

  std::unique_ptr<HostDevice> device_;
  std::vector<char> mirror_;  // what the arena should hold
};

TEST_P(HostDeviceCopyTest, HostToDeviceAtUnalignedOffsetsAcrossGranules) {
  // Ends in the next granule, starts and ends off any page boundary.
  const uint64_t offset = kGranule - 4097;
  const std::vector<char> data = Pattern(10'001, 2);
  ASSERT_TRUE(device_->Write({HostToDevice{offset, data.data(), data.size()}}).ok());
  std::copy(data.begin(), data.end(), mirror_.begin() + offset);
  ExpectArenaMatchesMirror();
}

TEST_P(HostDeviceCopyTest, DeviceToHostAtUnalignedOffsetsIntoAHostBufferOffset) {
  const uint64_t offset = 2 * kGranule - 3;
  constexpr size_t kLength = 7'777;
  constexpr size_t kHostOffset = 13;
  std::vector<char> host(kHostOffset + kLength + 13, 'x');
  ASSERT_TRUE(device_->Read({DeviceToHost{host.data() + kHostOffset, offset, kLength}}).ok());
  EXPECT_EQ(std::memcmp(host.data() + kHostOffset, mirror_.data() + offset, kLength), 0);
  // Bytes around the destination are untouched.
  for (size_t i = 0; i < kHostOffset; ++i) EXPECT_EQ(host[i], 'x');
  for (size_t i = kHostOffset + kLength; i < host.size(); ++i) EXPECT_EQ(host[i], 'x');
}

TEST_P(HostDeviceCopyTest, DeviceToDeviceAtUnalignedOffsets) {
  const uint64_t source = 5;
  const uint64_t destination = 3 * kGranule - 1000;
  constexpr size_t kLength = 5'000;
  ASSERT_TRUE(device_->Copy({DeviceToDevice{destination, source, kLength}}).ok());
  std::copy_n(mirror_.begin() + source, kLength, mirror_.begin() + destination);
  ExpectArenaMatchesMirror();
}

TEST_P(HostDeviceCopyTest, ZeroClearsExactlyItsRange) {
  ASSERT_TRUE(device_->Zero({DeviceRange{kGranule + 17, 3 * 4096}}).ok());
  std::fill_n(mirror_.begin() + kGranule + 17, 3 * 4096, 0);
  ExpectArenaMatchesMirror();
}

TEST_P(HostDeviceCopyTest, BatchesCompleteEveryRequest) {
  // Disjoint ranges, in no particular order, of assorted lengths.
  const std::vector<uint64_t> offsets = {3 * kGranule + 100, 17, kGranule - 50,
                                         2 * kGranule + 4096};
  const std::vector<size_t> lengths = {1, 4096, 100, 65'536};
  std::vector<std::vector<char>> sources;
  std::vector<HostToDevice> writes;
  for (size_t i = 0; i < offsets.size(); ++i) {
    sources.push_back(Pattern(lengths[i], 100 + i));
    writes.push_back(HostToDevice{offsets[i], sources[i].data(), lengths[i]});
    std::copy(sources[i].begin(), sources[i].end(), mirror_.begin() + offsets[i]);
  }
  ASSERT_TRUE(device_->Write(writes).ok());
  ExpectArenaMatchesMirror();

  std::vector<std::vector<char>> destinations;
  std::vector<DeviceToHost> reads;
  for (size_t i = 0; i < offsets.size(); ++i) destinations.emplace_back(lengths[i]);
  for (size_t i = 0; i < offsets.size(); ++i) {
    reads.push_back(DeviceToHost{destinations[i].data(), offsets[i], lengths[i]});
  }
  ASSERT_TRUE(device_->Read(reads).ok());
  for (size_t i = 0; i < offsets.size(); ++i) EXPECT_EQ(destinations[i], sources[i]) << i;

  // Each written range copied half a granule up, where no copy of the batch
  // reads or writes (copies of one batch must not overlap).
  std::vector<DeviceToDevice> copies;
  for (size_t i = 0; i < offsets.size(); ++i) {
    const uint64_t destination = offsets[i] + kGranule / 2;
    copies.push_back(DeviceToDevice{destination, offsets[i], lengths[i]});
    std::copy_n(sources[i].begin(), lengths[i], mirror_.begin() + destination);
  }
  ASSERT_TRUE(device_->Copy(copies).ok());
  ExpectArenaMatchesMirror();

  std::vector<DeviceRange> ranges;
  for (size_t i = 0; i < offsets.size(); ++i) {
    ranges.push_back(DeviceRange{offsets[i] + 1, lengths[i] - 1});
    std::fill_n(mirror_.begin() + offsets[i] + 1, lengths[i] - 1, 0);
  }
  ASSERT_TRUE(device_->Zero(ranges).ok());
  ExpectArenaMatchesMirror();
}

TEST_P(HostDeviceCopyTest, EmptyBatchesAndEmptyCopiesSucceed) {
  EXPECT_TRUE(device_->Write({}).ok());
  EXPECT_TRUE(device_->Read({}).ok());
  EXPECT_TRUE(device_->Copy({}).ok());
  EXPECT_TRUE(device_->Zero({}).ok());
  char byte = 0;
  // A zero-length request at the very end is inside the arena.
  EXPECT_TRUE(device_->Write({HostToDevice{kArena, &byte, 0}}).ok());
  EXPECT_TRUE(device_->Zero({DeviceRange{kArena, 0}}).ok());
  ExpectArenaMatchesMirror();
}

TEST_P(HostDeviceCopyTest, OutOfRangeRequestsAreRejected) {
  constexpr uint64_t kHuge = std::numeric_limits<uint64_t>::max();
  std::vector<char> buffer(8192, 'b');
  struct Range {
    uint64_t offset;
    size_t length;
  };
  // Past the end, straddling the end, and lengths that wrap around 2^64.
  const std::vector<Range> bad = {
      {kArena, 1}, {kArena - 10, 11}, {kHuge - 5, 4096}, {100, kHuge}, {kArena + kGranule, 0}};
  for (const Range& r : bad) {
    SCOPED_TRACE(absl::StrCat("[", r.offset, ", +", r.length, ")"));
    // Some lengths exceed the host buffer too: the range check must stop the
    // copy before either side is touched.
    absl::Status status = device_->Write({HostToDevice{r.offset, buffer.data(), r.length}});
    EXPECT_FALSE(status.ok());
    EXPECT_FALSE(absl::IsResourceExhausted(status)) << "a bad offset is not ENOSPC";
    status = device_->Read({DeviceToHost{buffer.data(), r.offset, r.length}});
    EXPECT_FALSE(status.ok());
    EXPECT_FALSE(device_->Copy({DeviceToDevice{r.offset, 0, r.length}}).ok());
    EXPECT_FALSE(device_->Copy({DeviceToDevice{0, r.offset, r.length}}).ok());
    EXPECT_FALSE(device_->Zero({DeviceRange{r.offset, r.length}}).ok());
    status = device_->Commit(r.offset, r.length);
    EXPECT_FALSE(status.ok());
    EXPECT_FALSE(absl::IsResourceExhausted(status)) << "a bad offset is not ENOSPC";
    EXPECT_FALSE(device_->Decommit(r.offset, r.length).ok());
  }
  // A batch with one bad request is checked whole before anything is done
  // (both devices do so; Device promises only the error).
  const std::vector<char> data = Pattern(4096, 3);
  EXPECT_FALSE(device_
                   ->Write({HostToDevice{0, data.data(), data.size()},
                            HostToDevice{kArena - 1, data.data(), data.size()}})
                   .ok());
  EXPECT_FALSE(device_->Zero({DeviceRange{0, 4096}, DeviceRange{kArena, 1}}).ok());
  ExpectArenaMatchesMirror();
  for (char c : buffer) ASSERT_EQ(c, 'b') << "a refused read wrote to the host buffer";
}

TEST(HostDeviceHostBufferTest, HostBuffersAreUsableForTransfers) {
  std::unique_ptr<HostDevice> device = MakeDevice(2 * kGranule);
  ASSERT_NE(device, nullptr);
  ASSERT_TRUE(device->Commit(0, 2 * kGranule).ok());
  for (size_t length : {size_t{1}, size_t{4096}, size_t{5000}, size_t{3 << 20}}) {
    SCOPED_TRACE(absl::StrCat("length ", length));
    char* source = static_cast<char*>(device->AllocateHostBuffer(length));
    char* destination = static_cast<char*>(device->AllocateHostBuffer(length));
    ASSERT_NE(source, nullptr);
    ASSERT_NE(destination, nullptr);
    const std::vector<char> data = Pattern(length, static_cast<uint32_t>(length));
    std::memcpy(source, data.data(), length);  // every byte is writable
    std::memset(destination, 0, length);
    const uint64_t offset = 2 * kGranule - length;
    ASSERT_TRUE(device->Write({HostToDevice{offset, source, length}}).ok());
    ASSERT_TRUE(device->Read({DeviceToHost{destination, offset, length}}).ok());
    EXPECT_EQ(std::memcmp(destination, data.data(), length), 0);
    device->FreeHostBuffer(source, length);
    device->FreeHostBuffer(destination, length);
  }
}

// ExportShared hands out the range's memory itself: writes on either side
// show on the other, until the range is decommitted; then the arena gets
// fresh memory, never the importer's.
TEST_P(HostDeviceBackingTest, ExportSharedHandsOutTheMemoryItselfUntilDecommitted) {
  std::unique_ptr<HostDevice> device = Make(8 * kGranule);
  constexpr uint64_t kLength = 2 * kGranule;
  const uint64_t offset = 2 * kGranule;
  ASSERT_TRUE(device->Commit(offset, kLength).ok());
  const std::string data(100000, 'd');
  ASSERT_TRUE(device->Write({{offset + 4096, data.data(), data.size()}}).ok());
  EXPECT_TRUE(device->can_share());
  EXPECT_TRUE(device->Exclusive({offset, kLength}));
  EXPECT_FALSE(device->Exclusive({offset + 4096, kLength})) << "not whole granules";

  absl::StatusOr<std::unique_ptr<ExportedMemory>> exported =
      device->ExportShared(kLength - 5, {{offset, kLength}});
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_EQ((*exported)->kind(), ExportedMemory::Kind::kHost);
  EXPECT_EQ((*exported)->size(), kLength - 5);
  ASSERT_EQ((*exported)->pieces().size(), 1u);
  const ExportedPiece piece = (*exported)->pieces()[0];
  ASSERT_EQ(piece.size, kLength);
  char* view =
      static_cast<char*>(mmap(nullptr, kLength, PROT_READ | PROT_WRITE, MAP_SHARED, piece.fd, 0));
  ASSERT_NE(view, MAP_FAILED);
  EXPECT_EQ(std::string_view(view + 4096, data.size()), data);
  std::memcpy(view, "importer", 8);
  std::string out(8, '?');
  ASSERT_TRUE(device->Read({{out.data(), offset, 8}}).ok());
  EXPECT_EQ(out, "importer");
  ASSERT_TRUE(device->Write({{offset + 8, "arena", 5}}).ok());
  EXPECT_EQ(std::string_view(view + 8, 5), "arena");
  // Shared as a whole: a part, or more, is not the range handed out.
  EXPECT_TRUE(device->Exclusive({offset, kLength}));
  EXPECT_FALSE(device->Exclusive({offset, kGranule}));
  EXPECT_FALSE(device->Exclusive({0, 4 * kGranule}));
  EXPECT_FALSE(device->ExportShared(1, {{offset, kGranule}}).ok());
  // Exporting again hands out the same memory.
  absl::StatusOr<std::unique_ptr<ExportedMemory>> again =
      device->ExportShared(kLength, {{offset, kLength}});
  ASSERT_TRUE(again.ok()) << again.status();
  char* second = static_cast<char*>(
      mmap(nullptr, kLength, PROT_READ, MAP_SHARED, (*again)->pieces()[0].fd, 0));
  ASSERT_NE(second, MAP_FAILED);
  EXPECT_EQ(std::string_view(second, 8), "importer");
  munmap(second, kLength);
  exported->reset();
  again->reset();

  // Decommitted: the arena's memory is new.
  ASSERT_TRUE(device->Decommit(offset, kLength).ok());
  ASSERT_TRUE(device->Commit(offset, kLength).ok());
  ASSERT_TRUE(device->Write({{offset, "fresh", 5}}).ok());
  EXPECT_NE(std::string_view(view, 5), "fresh");
  EXPECT_TRUE(device->Exclusive({offset, kGranule})) << "no longer shared";
  munmap(view, kLength);
}

// Decommitting a shared range (a granule at a time, as the arena does)
// releases its memory though an importer still maps it: left to the
// importer, it would be memory the mount no longer counts. The importer
// reads zeros there.
TEST_P(HostDeviceBackingTest, DecommitReleasesASharedRangesMemoryFromImporters) {
  std::unique_ptr<HostDevice> device = Make(4 * kGranule);
  constexpr uint64_t kLength = 2 * kGranule;
  ASSERT_TRUE(device->Commit(0, kLength).ok());
  const std::string data(kLength, 'd');
  ASSERT_TRUE(device->Write({{0, data.data(), data.size()}}).ok());
  absl::StatusOr<std::unique_ptr<ExportedMemory>> exported =
      device->ExportShared(kLength, {{0, kLength}});
  ASSERT_TRUE(exported.ok()) << exported.status();
  const int fd = (*exported)->pieces()[0].fd;
  char* view = static_cast<char*>(mmap(nullptr, kLength, PROT_READ, MAP_SHARED, fd, 0));
  ASSERT_NE(view, MAP_FAILED);
  ASSERT_EQ(std::string_view(view, kLength), data);
  struct stat st;
  ASSERT_EQ(fstat(fd, &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_blocks) * 512, kLength);

  ASSERT_TRUE(device->Decommit(0, kGranule).ok());
  ASSERT_TRUE(device->Decommit(kGranule, kGranule).ok());
  ASSERT_EQ(fstat(fd, &st), 0);
  EXPECT_EQ(st.st_blocks, 0) << "the importer's mapping holds no memory";
  EXPECT_TRUE(std::string_view(view, kLength) == std::string(kLength, '\0'));
  munmap(view, kLength);
}

// A daemon out of descriptors is not a full filesystem: sharing a range
// then fails with EMFILE and says so, not with ENOSPC.
TEST(HostDeviceTest, ExportSharedOutOfDescriptorsSaysSo) {
  std::unique_ptr<HostDevice> device = MakeDevice(2 * kGranule);
  ASSERT_TRUE(device->Commit(0, kGranule).ok());
  rlimit saved;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  // Every descriptor up to the limit taken, so the next one cannot be made.
  rlimit low = saved;
  low.rlim_cur = 64;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  std::vector<int> taken;
  for (int fd; (fd = dup(0)) >= 0;) taken.push_back(fd);
  absl::StatusOr<std::unique_ptr<ExportedMemory>> exported =
      device->ExportShared(kGranule, {{0, kGranule}});
  for (int fd : taken) close(fd);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
  ASSERT_FALSE(exported.ok());
  EXPECT_EQ(ToErrno(exported.status()), EMFILE) << exported.status();
  EXPECT_NE(exported.status().message().find("out of file descriptors"), std::string::npos)
      << exported.status();
}

std::string BackingName(const ::testing::TestParamInfo<HostDevice::Backing>& info) {
  return info.param == HostDevice::Backing::kMemfd ? "memfd" : "huge_pages";
}

INSTANTIATE_TEST_SUITE_P(Backings, HostDeviceBackingTest,
                         ::testing::Values(HostDevice::Backing::kMemfd,
                                           HostDevice::Backing::kHugePages),
                         BackingName);
INSTANTIATE_TEST_SUITE_P(Backings, HostDeviceCopyTest,
                         ::testing::Values(HostDevice::Backing::kMemfd,
                                           HostDevice::Backing::kHugePages),
                         BackingName);

}  // namespace
}  // namespace cudafs

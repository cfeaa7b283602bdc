// The filesystem core over a device that fails at random (FaultyDevice):
// every failing operation reports ENOSPC or EIO and leaves the size alone
// and each byte it was changing either old or new (a failed truncate or
// punch may have zeroed part of its range, a failed write written part of
// its data, as with a disk); no read ever returns a wrong byte, files the
// failing operation did not touch stay intact, and once the faults stop
// everything works again and all space comes back.
//
// CUDAFS_TEST_SEED picks the seed (random otherwise; printed on failure).
#include <fcntl.h>
#include <linux/falloc.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "alloc/base/errors.h"
#include "alloc/devices/faulty_device.h"
#include "alloc/devices/host_device.h"
#include "alloc/storage/arena.h"
#include "fs/core/filesystem.h"
#include "gtest/gtest.h"
#include "tests/support/test_scale.h"
#include "tests/support/test_seed.h"

namespace cudafs {
namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr int kFiles = 6;
const int kOperations = Scaled(6000);

struct File {
  InodeNumber ino = 0;
  std::string content;  // what every read must return
};

// Parameter: the write-back cache's budget (0: no cache).
class FaultInjectionTest : public testing::TestWithParam<uint64_t> {
 protected:
  void SetUp() override {
    seed_ = TestSeed();
    // Small enough that ENOSPC happens on its own as well.
    host_ = std::move(HostDevice::Create(48 * kMiB).value());
    faulty_ = std::make_unique<FaultyDevice>(host_.get());
    faulty_->SetPlan(FaultPlan{0, kFaultAll, seed_});
    arena_ = std::make_unique<Arena>(faulty_.get(), 4096);
    FilesystemConfig config;
    config.cache_bytes = GetParam();
    fs_ = std::make_unique<Filesystem>(arena_.get(), config);
  }

  void Faults(double probability) { faulty_->SetProbability(probability); }

  // Reads the whole file with faults off and compares it with the model.
  testing::AssertionResult Intact(const File& file) {
    Faults(0);
    absl::StatusOr<struct stat> st = fs_->GetAttributes(file.ino);
    if (!st.ok()) return testing::AssertionFailure() << "getattr: " << st.status();
    if (static_cast<size_t>(st->st_size) != file.content.size()) {
      return testing::AssertionFailure()
             << "size " << st->st_size << ", expected " << file.content.size();
    }
    std::string actual(file.content.size(), '\0');
    absl::StatusOr<size_t> got = fs_->Read(file.ino, 0, actual.size(), actual.data());
    if (!got.ok()) return testing::AssertionFailure() << "read: " << got.status();
    for (size_t i = 0; i < actual.size(); ++i) {
      if (actual[i] != file.content[i]) {
        return testing::AssertionFailure() << "byte " << i << " differs";
      }
    }
    return testing::AssertionSuccess();
  }

  static bool IsEnospcOrEio(const absl::Status& status) {
    const int error = ToErrno(status);
    return error == ENOSPC || error == EIO;
  }

  uint64_t seed_ = 0;
  std::unique_ptr<HostDevice> host_;
  std::unique_ptr<FaultyDevice> faulty_;
  std::unique_ptr<Arena> arena_;
  std::unique_ptr<Filesystem> fs_;
};

TEST_P(FaultInjectionTest, FailuresAreCleanAndNothingElseChanges) {
  SCOPED_TRACE(SeedTrace(seed_));
  std::mt19937_64 rng(seed_);
  std::vector<File> files(kFiles);
  for (int i = 0; i < kFiles; ++i) {
    absl::StatusOr<struct stat> st =
        fs_->Create(kRootInode, "f" + std::to_string(i), 0644, O_RDWR, Caller::Root());
    ASSERT_TRUE(st.ok()) << st.status();
    files[i].ino = st->st_ino;
  }
  auto random = [&](uint64_t bound) { return std::uniform_int_distribution<uint64_t>(0, bound)(rng); };
  int failures = 0;
  for (int op = 0; op < kOperations; ++op) {
    SCOPED_TRACE("operation " + std::to_string(op));
    File& file = files[random(kFiles - 1)];
    const std::string before = file.content;
    const uint64_t offset = random(3) == 0 ? random(8 * kMiB) : random(file.content.size());
    const uint64_t length = random(4) == 0 ? random(2 * kMiB) : random(64 * 1024);
    Faults(0.05);
    absl::Status status;
    std::string after = before;  // the content if the operation succeeds
    // The bytes the operation may change: a failure may leave any of them
    // old or new, but none outside, and the size as it was.
    uint64_t touched_begin = offset, touched_end = offset + length;
    const uint64_t kind = random(5);
    static constexpr const char* kKinds[] = {"write", "write", "truncate", "punch", "read",
                                             "fsync"};
    SCOPED_TRACE(std::string(kKinds[kind]) + " ino " + std::to_string(file.ino) + " offset " +
                 std::to_string(offset) + " length " + std::to_string(length) + " size " +
                 std::to_string(before.size()));
    switch (kind) {
      case 0:
      case 1: {  // write
        std::string data(length, '\0');
        for (char& c : data) c = static_cast<char>(random(255));
        absl::StatusOr<size_t> put =
            fs_->Write(file.ino, offset, data.data(), data.size(), false, Caller::Root());
        status = put.status();
        // A write of nothing extends nothing, wherever it lands (POSIX).
        if (length > 0) {
          if (after.size() < offset + length) after.resize(offset + length, '\0');
          after.replace(offset, length, data);
        }
        break;
      }
      case 2: {  // truncate
        const uint64_t size = random(4 * kMiB);
        AttributeChanges changes;
        changes.size = size;
        status = fs_->SetAttributes(file.ino, changes, Caller::Root()).status();
        after.resize(size, '\0');
        touched_begin = std::min<uint64_t>(size, before.size());
        touched_end = std::max<uint64_t>(size, before.size());
        break;
      }
      case 3: {  // punch a hole
        if (length == 0) continue;
        status = fs_->Allocate(file.ino, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset,
                               length, Caller::Root());
        if (offset < after.size()) {
          const uint64_t end = std::min<uint64_t>(after.size(), offset + length);
          std::fill(after.begin() + offset, after.begin() + end, '\0');
        }
        break;
      }
      case 4: {  // read, checked
        std::string out(length, '\0');
        absl::StatusOr<size_t> got = fs_->Read(file.ino, offset, length, out.data());
        status = got.status();
        if (got.ok()) {
          const size_t expected =
              offset >= before.size() ? 0 : std::min<uint64_t>(length, before.size() - offset);
          ASSERT_EQ(*got, expected);
          if (*got > 0) {
            ASSERT_EQ(out.substr(0, *got), before.substr(offset, *got)) << "read a wrong byte";
          }
        }
        break;
      }
      case 5: {  // fsync: a failed write-back keeps the pages dirty, the bytes as they were
        status = fs_->Fsync(file.ino);
        touched_begin = touched_end = 0;
        break;
      }
    }
    if (status.ok()) {
      if (after != before) file.content = after;
    } else {
      ++failures;
      ASSERT_TRUE(IsEnospcOrEio(status)) << status;
      Faults(0);
      absl::StatusOr<struct stat> st = fs_->GetAttributes(file.ino);
      ASSERT_TRUE(st.ok());
      ASSERT_EQ(static_cast<size_t>(st->st_size), before.size()) << "a failed operation resized";
      std::string actual(before.size(), '\0');
      ASSERT_TRUE(fs_->Read(file.ino, 0, actual.size(), actual.data()).ok());
      for (size_t i = 0; i < actual.size(); ++i) {
        const bool touched = i >= touched_begin && i < touched_end;
        const char updated = i < after.size() ? after[i] : '\0';
        ASSERT_TRUE(actual[i] == before[i] || (touched && actual[i] == updated))
            << "byte " << i << " is neither old nor new";
      }
      file.content = actual;
    }
    SCOPED_TRACE(status.ToString());
    // Every file the operation did not touch, and this one as the model
    // now has it, read back exactly.
    if (!status.ok() || op % 64 == 0) {
      for (const File& other : files) ASSERT_TRUE(Intact(other)) << "file " << other.ino;
    }
  }
  std::printf("%d operations, %llu faults injected, %d operations failed\n", kOperations,
              static_cast<unsigned long long>(faulty_->injected()), failures);
  // About one operation in 40 fails at this probability (fewer with the
  // cache, which absorbs writes and retries failed write-backs): 15 of 600
  // at the ThreadSanitizer pass's scale, as few as 7 by chance. The bound
  // only proves that faults reach operations, so it sits far below that.
  EXPECT_GT(failures, kOperations / 300) << "the faults never hit";
  EXPECT_GT(faulty_->injected(), static_cast<uint64_t>(kOperations / 300));

  // Faults off: everything works, and deleting everything frees everything.
  Faults(0);
  for (int i = 0; i < kFiles; ++i) {
    const std::string data(kMiB, static_cast<char>('a' + i));
    ASSERT_TRUE(fs_->Write(files[i].ino, 0, data.data(), data.size(), false, Caller::Root()).ok());
    ASSERT_TRUE(fs_->Unlink(kRootInode, "f" + std::to_string(i)).ok());
    fs_->Release(files[i].ino);
    fs_->Forget(files[i].ino, 1);
  }
  EXPECT_EQ(arena_->Stats().blocks.used, 0u) << "blocks leaked";
  EXPECT_EQ(arena_->Stats().committed_bytes, 0u) << "granules leaked";
}

// Small writes go through the cache; 64 pages make eviction, write-back
// under pressure and writes around a full cache frequent.
INSTANTIATE_TEST_SUITE_P(CacheBudgets, FaultInjectionTest,
                         testing::Values(uint64_t{0}, uint64_t{256} << 10),
                         [](const testing::TestParamInfo<uint64_t>& info) {
                           return info.param == 0 ? std::string("NoCache")
                                                  : std::string("Cache256k");
                         });

}  // namespace
}  // namespace cudafs

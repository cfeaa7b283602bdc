// Filesystem::CompactData against a model: many small files, three
// quarters deleted, then writes, truncates, punches, reads, deletes and
// creates of the survivors' kind on two threads while a third compacts
// without pause. A compaction must never change what a file reads, its
// size or its allocated bytes, and once the files are left alone the
// memory held must come down to what they use.
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "alloc/base/sizes.h"
#include "alloc/devices/host_device.h"
#include "alloc/storage/arena.h"
#include "fs/core/filesystem.h"
#include "gtest/gtest.h"
#include "tests/support/random_pattern.h"
#include "tests/support/test_scale.h"
#include "tests/support/test_seed.h"

namespace cudafs {
namespace {

constexpr uint64_t kMinBlock = 4096;
constexpr uint64_t kArenaBytes = 96 * kMiB;
constexpr uint64_t kMaxFileSize = 64 * 1024;
constexpr int kFiles = 2000;  // about 66 MiB
constexpr int kWorkers = 2;

// One small file and what it must read as.
struct File {
  std::string name;
  InodeNumber ino = 0;
  std::string model;
};

// With or without the write-back cache.
class CompactionModelTest : public testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<HostDevice>> device = HostDevice::Create(kArenaBytes);
    ASSERT_TRUE(device.ok()) << device.status();
    device_ = std::move(*device);
    arena_ = std::make_unique<Arena>(device_.get(), kMinBlock);
    FilesystemConfig config;
    config.cache_bytes = GetParam() ? 2 * kMiB : 0;
    config.max_extent = 256 * 1024;
    fs_ = std::make_unique<Filesystem>(arena_.get(), config);
  }

  // Creates `file` with `bytes` and closes it, keeping the lookup
  // reference, as a process writing a file through a mount does.
  std::string Make(File& file, const std::string& bytes) {
    absl::StatusOr<struct stat> st =
        fs_->Create(kRootInode, file.name, 0644, O_RDWR, Caller::Root());
    if (!st.ok()) return "create " + file.name + ": " + st.status().ToString();
    file.ino = st->st_ino;
    absl::StatusOr<size_t> written =
        fs_->Write(file.ino, 0, bytes.data(), bytes.size(), /*append=*/false, Caller::Root());
    fs_->Release(file.ino);
    if (!written.ok()) return "write " + file.name + ": " + written.status().ToString();
    if (*written != bytes.size()) return "short write to " + file.name;
    file.model = bytes;
    return "";
  }

  std::string Delete(File& file) {
    if (absl::Status status = fs_->Unlink(kRootInode, file.name); !status.ok()) {
      return "unlink " + file.name + ": " + status.ToString();
    }
    fs_->Forget(file.ino, 1);
    file.ino = 0;
    return "";
  }

  // What `file` reads from `offset`, or why it could not be read.
  std::string Differs(const File& file, uint64_t offset, size_t length) {
    std::string got(length, '\x7f');
    absl::StatusOr<size_t> read = fs_->Read(file.ino, offset, length, got.data());
    if (!read.ok()) return "read " + file.name + ": " + read.status().ToString();
    got.resize(*read);
    const std::string expected =
        offset >= file.model.size() ? "" : file.model.substr(offset, length);
    if (got != expected) {
      return "read " + std::to_string(length) + " at " + std::to_string(offset) + " of " +
             file.name + " differs from the model";
    }
    return "";
  }

  // One random operation on `file`; returns what went wrong.
  std::string Operate(File& file, std::mt19937_64& rng) {
    const Caller root = Caller::Root();
    const uint64_t offset = rng() % kMaxFileSize;
    const uint64_t length = 1 + rng() % std::min<uint64_t>(16 * 1024, kMaxFileSize - offset);
    switch (rng() % 8) {
      case 0: {
        // Written through an open handle, closed after, as a build does.
        const std::string bytes = RandomBytes(rng, length);
        if (!fs_->Open(file.ino, O_RDWR, root).ok()) return "open " + file.name;
        absl::StatusOr<size_t> written =
            fs_->Write(file.ino, offset, bytes.data(), bytes.size(), /*append=*/false, root);
        fs_->Release(file.ino);
        if (!written.ok() || *written != bytes.size()) return "write " + file.name;
        if (file.model.size() < offset + length) file.model.resize(offset + length, '\0');
        file.model.replace(offset, length, bytes);
        return "";
      }
      case 1: {
        AttributeChanges changes;
        changes.size = rng() % (file.model.size() + 1);
        if (!fs_->SetAttributes(file.ino, changes, root).ok()) return "truncate " + file.name;
        file.model.resize(*changes.size, '\0');
        return "";
      }
      case 2: {
        if (!fs_->Allocate(file.ino, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, length,
                           root)
                 .ok()) {
          return "punch " + file.name;
        }
        if (offset < file.model.size()) {
          const uint64_t end = std::min<uint64_t>(file.model.size(), offset + length);
          std::fill(file.model.begin() + offset, file.model.begin() + end, '\0');
        }
        return "";
      }
      case 3: {
        // Gone, and another file of another size in its place.
        if (std::string failure = Delete(file); !failure.empty()) return failure;
        return Make(file, RandomBytes(rng, 1 + rng() % kMaxFileSize));
      }
      default:
        return Differs(file, rng() % 2 ? 0 : rng() % (file.model.size() + 1),
                       rng() % 2 ? file.model.size() + 1 : length);
    }
  }

  uint64_t UsedBytes() {
    const struct statvfs st = fs_->StatFs();
    return (st.f_blocks - st.f_bfree) * st.f_frsize;
  }

  std::unique_ptr<HostDevice> device_;
  std::unique_ptr<Arena> arena_;
  std::unique_ptr<Filesystem> fs_;
};

TEST_P(CompactionModelTest, FilesReadAsWrittenWhileCompactionMovesTheirBlocks) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  std::vector<File> all(kFiles);
  for (int i = 0; i < kFiles; ++i) {
    all[i].name = "f" + std::to_string(i);
    ASSERT_EQ(Make(all[i], RandomBytes(rng, 1 + rng() % kMaxFileSize)), "");
  }
  std::shuffle(all.begin(), all.end(), rng);
  for (int i = 0; i < kFiles * 3 / 4; ++i) ASSERT_EQ(Delete(all[i]), "");
  std::vector<File> files(all.begin() + kFiles * 3 / 4, all.end());
  const uint64_t granule = device_->granule_size();
  ASSERT_GT(arena_->Stats().committed_bytes, UsedBytes() + 8 * granule) << "no gaps to compact";

  std::atomic<bool> done{false};
  std::atomic<uint64_t> moved{0};
  std::thread compactor([&] {
    std::mt19937_64 budgets(seed ^ 0xc0);
    while (!done.load()) {
      // Small budgets: many passes, each with another plan.
      if (const uint64_t bytes = fs_->CompactData(kMinBlock << budgets() % 8)) {
        moved += bytes;
      } else {
        std::this_thread::yield();
      }
    }
  });
  const int operations = Scaled(4000);
  std::vector<std::string> failures(kWorkers);
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      std::mt19937_64 worker_rng(seed + 1 + w);
      // Worker w owns every kWorkers-th file.
      for (int op = 0; op < operations && failures[w].empty(); ++op) {
        const size_t f = (worker_rng() % (files.size() / kWorkers)) * kWorkers + w;
        if (std::string failure = Operate(files[f], worker_rng); !failure.empty()) {
          failures[w] = "operation " + std::to_string(op) + ": " + failure;
        }
      }
    });
  }
  for (std::thread& worker : workers) worker.join();
  done = true;
  compactor.join();
  for (const std::string& failure : failures) EXPECT_EQ(failure, "");
  EXPECT_GT(moved.load(), 0u) << "compaction never ran beside the operations";

  // Left alone, the files end up in as little memory as the slack allows.
  for (int pass = 0; fs_->CompactData(UINT64_MAX) > 0; ++pass) ASSERT_LT(pass, 100);
  const uint64_t used = arena_->Stats().blocks.used;
  EXPECT_LE(arena_->Stats().committed_bytes,
            used + std::max(Arena::kCompactionSlackGranules * granule,
                            used / Arena::kCompactionSlackShare));
  uint64_t allocated = 0;
  for (const File& file : files) {
    absl::StatusOr<struct stat> st = fs_->GetAttributes(file.ino);
    ASSERT_TRUE(st.ok()) << st.status();
    ASSERT_EQ(static_cast<uint64_t>(st->st_size), file.model.size()) << file.name;
    ASSERT_EQ(Differs(file, 0, file.model.size() + 1), "");
    allocated += static_cast<uint64_t>(st->st_blocks) * 512;
  }
  EXPECT_EQ(UsedBytes(), allocated) << "df's used bytes are the files' allocated bytes";
}

INSTANTIATE_TEST_SUITE_P(Cache, CompactionModelTest, testing::Bool(),
                         [](const testing::TestParamInfo<bool>& info) {
                           return info.param ? "WithWriteBackCache" : "WithoutCache";
                         });

}  // namespace
}  // namespace cudafs

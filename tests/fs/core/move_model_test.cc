// Filesystem::MoveData against a model: random writes, truncates,
// fallocates, copies and reads of a few files, with a random move of their
// blocks between the arena's parts (two host "GPUs" and a small spill part)
// before every operation, and alongside them in another thread. A move
// must never change what a file reads, its size, its allocated bytes or
// what df reports.
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "alloc/base/sizes.h"
#include "alloc/devices/host_device.h"
#include "alloc/devices/pooled_device.h"
#include "alloc/storage/arena.h"
#include "fs/core/filesystem.h"
#include "gtest/gtest.h"
#include "tests/support/random_pattern.h"
#include "tests/support/test_scale.h"
#include "tests/support/test_seed.h"

namespace cudafs {
namespace {

constexpr uint64_t kMinBlock = 4096;
constexpr uint64_t kGpuBytes = 64 * kMiB;
// Smaller than the files can hold together: moves into it stop part way.
constexpr uint64_t kSpillBytes = 6 * kMiB;
constexpr uint64_t kMaxFileSize = 3 * kMiB;
constexpr int kFiles = 4;
constexpr size_t kSpillPart = 2;

// With or without the write-back cache.
class MoveModelTest : public testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    std::vector<std::unique_ptr<Device>> gpus;
    for (int i = 0; i < 2; ++i) {
      absl::StatusOr<std::unique_ptr<HostDevice>> gpu = HostDevice::Create(kGpuBytes);
      ASSERT_TRUE(gpu.ok()) << gpu.status();
      gpus.push_back(std::move(*gpu));
    }
    absl::StatusOr<std::unique_ptr<HostDevice>> spill = HostDevice::Create(kSpillBytes);
    ASSERT_TRUE(spill.ok()) << spill.status();
    absl::StatusOr<std::unique_ptr<PooledDevice>> pool =
        PooledDevice::Create(std::move(gpus), std::move(*spill));
    ASSERT_TRUE(pool.ok()) << pool.status();
    pool_ = std::move(*pool);
    arena_ = std::make_unique<Arena>(pool_.get(), kMinBlock);
    ASSERT_EQ(arena_->part_count(), 3u);
    ASSERT_TRUE(arena_->IsSpillPart(kSpillPart));
    FilesystemConfig config;
    config.cache_bytes = GetParam() ? 2 * kMiB : 0;
    config.max_extent = 256 * 1024;
    fs_ = std::make_unique<Filesystem>(arena_.get(), config);
  }

  InodeNumber NewFile(const std::string& name) {
    absl::StatusOr<struct stat> st = fs_->Create(kRootInode, name, 0644, O_RDWR, Caller::Root());
    EXPECT_TRUE(st.ok()) << st.status();
    return st.ok() ? st->st_ino : 0;
  }

  // A random move of blocks out of one part into others.
  uint64_t RandomMove(std::mt19937_64& rng) {
    const size_t from = rng() % 3;
    std::vector<size_t> to;
    for (size_t part = 0; part < 3; ++part) {
      if (part != from && rng() % 4 != 0) to.push_back(part);
    }
    std::shuffle(to.begin(), to.end(), rng);
    uint64_t bytes;
    switch (rng() % 4) {
      case 0:
        bytes = 1 + rng() % (64 * 1024);
        break;
      case 1:
        bytes = 1 + rng() % (2 * kMiB);
        break;
      case 2:
        bytes = 0;
        break;
      default:
        bytes = UINT64_MAX;
        break;
    }
    const auto order = rng() % 2 ? Filesystem::MoveOrder::kLeastRecentlyUsed
                                 : Filesystem::MoveOrder::kMostRecentlyUsed;
    return fs_->MoveData(from, to, bytes, order);
  }

  std::string Read(InodeNumber ino, uint64_t offset, size_t size) {
    std::string out(size, '\x7f');
    absl::StatusOr<size_t> got = fs_->Read(ino, offset, size, out.data());
    if (!got.ok()) {
      ADD_FAILURE() << "Read " << ino << " at " << offset << ": " << got.status();
      return "";
    }
    out.resize(*got);
    return out;
  }

  // Bytes of blocks `ino` holds, by Where, and in all.
  uint64_t WhereBytes(InodeNumber ino) {
    absl::StatusOr<std::string> text = fs_->GetExtendedAttribute(ino, kWhereAttribute);
    if (!text.ok()) {
      ADD_FAILURE() << text.status();
      return 0;
    }
    uint64_t total = 0;
    for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
      const std::vector<absl::string_view> fields = absl::StrSplit(line, ' ');
      uint64_t bytes = 0;
      if (fields.size() != 2 || fields[0] != "host" || !absl::SimpleAtoi(fields[1], &bytes)) {
        ADD_FAILURE() << "unexpected line of " << kWhereAttribute << ": " << line;
      }
      total += bytes;
    }
    return total;
  }

  uint64_t UsedBytes() {
    const struct statvfs st = fs_->StatFs();
    return (st.f_blocks - st.f_bfree) * st.f_frsize;
  }

  // The whole file reads as the model, and its attributes agree.
  void Check(InodeNumber ino, const std::string& model) {
    absl::StatusOr<struct stat> st = fs_->GetAttributes(ino);
    ASSERT_TRUE(st.ok()) << st.status();
    ASSERT_EQ(static_cast<uint64_t>(st->st_size), model.size()) << "inode " << ino;
    ASSERT_GE(st->st_blocks, 0);
    EXPECT_EQ(static_cast<uint64_t>(st->st_blocks) * 512, WhereBytes(ino)) << "inode " << ino;
    const std::string got = Read(ino, 0, model.size() + 100);
    ASSERT_EQ(got.size(), model.size()) << "inode " << ino;
    if (got != model) {
      size_t at = 0;
      while (got[at] == model[at]) ++at;
      FAIL() << "inode " << ino << " differs from its model first at byte " << at << " of "
             << model.size();
    }
  }

  uint64_t AllocatedBytes(InodeNumber ino) {
    absl::StatusOr<struct stat> st = fs_->GetAttributes(ino);
    EXPECT_TRUE(st.ok()) << st.status();
    return st.ok() ? static_cast<uint64_t>(st->st_blocks) * 512 : 0;
  }

  std::unique_ptr<PooledDevice> pool_;
  std::unique_ptr<Arena> arena_;
  std::unique_ptr<Filesystem> fs_;
};

// A file's memory as another process maps it (ExportShared): the pieces
// mapped, in order.
class Mapping {
 public:
  explicit Mapping(std::unique_ptr<ExportedMemory> memory) : memory_(std::move(memory)) {
    for (const ExportedPiece& piece : memory_->pieces()) {
      void* view = mmap(nullptr, piece.size, PROT_READ | PROT_WRITE, MAP_SHARED, piece.fd, 0);
      EXPECT_NE(view, MAP_FAILED);
      views_.emplace_back(view == MAP_FAILED ? nullptr : static_cast<char*>(view), piece.size);
    }
  }
  ~Mapping() {
    for (const auto& [view, size] : views_) {
      if (view != nullptr) munmap(view, size);
    }
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  uint64_t size() const { return memory_->size(); }
  // The first size() bytes.
  std::string Bytes() const {
    std::string bytes;
    for (const auto& [view, size] : views_) {
      if (view == nullptr || bytes.size() >= memory_->size()) break;
      bytes.append(view, std::min<uint64_t>(size, memory_->size() - bytes.size()));
    }
    return bytes;
  }

 private:
  std::unique_ptr<ExportedMemory> memory_;
  std::vector<std::pair<char*, uint64_t>> views_;
};

// A length: mostly small (the write-back cache's), some large.
uint64_t RandomLength(std::mt19937_64& rng) {
  switch (rng() % 4) {
    case 0:
      return 1 + rng() % 300;
    case 1:
      return 1 + rng() % (16 * 1024);
    case 2:
      return 1 + rng() % (300 * 1024);
    default:
      return 1 + rng() % kMaxFileSize;
  }
}

// An offset in or a little past a file of `size` bytes, within the cap.
uint64_t RandomOffset(std::mt19937_64& rng, uint64_t size) {
  const uint64_t offset = rng() % 3 == 0 ? rng() % kMaxFileSize : rng() % (size + 64 * 1024);
  return std::min(offset, kMaxFileSize - 1);
}

void Overwrite(std::string& model, uint64_t offset, absl::string_view bytes) {
  if (model.size() < offset + bytes.size()) model.resize(offset + bytes.size(), '\0');
  model.replace(offset, bytes.size(), bytes.data(), bytes.size());
}

void Zero(std::string& model, uint64_t offset, uint64_t length, bool keep_size) {
  if (!keep_size && model.size() < offset + length) model.resize(offset + length, '\0');
  if (offset >= model.size()) return;
  const uint64_t end = std::min<uint64_t>(model.size(), offset + length);
  std::fill(model.begin() + offset, model.begin() + end, '\0');
}

TEST_P(MoveModelTest, FilesAndTheirMappingsReadAsWrittenWhateverMovesBetweenOperations) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  std::vector<InodeNumber> files;
  std::vector<std::string> models(kFiles);
  for (int i = 0; i < kFiles; ++i) files.push_back(NewFile("f" + std::to_string(i)));
  std::vector<bool> open(kFiles, true);
  std::vector<std::unique_ptr<Mapping>> mappings(kFiles);
  // What another process sees of file `i` through its mapping: the
  // file's first bytes.
  const auto check_mapping = [&](int i) {
    if (mappings[i] == nullptr) return;
    std::string expected = models[i].substr(0, mappings[i]->size());
    expected.resize(mappings[i]->size(), '\0');
    ASSERT_TRUE(mappings[i]->Bytes() == expected)
        << "the mapping of inode " << files[i] << " shows other bytes than the file";
  };
  const Caller root = Caller::Root();
  uint64_t moved = 0;
  const int operations = Scaled(1500);
  for (int op = 0; op < operations; ++op) {
    SCOPED_TRACE("operation " + std::to_string(op));
    {
      const uint64_t used = UsedBytes();
      std::vector<uint64_t> allocated;
      for (const InodeNumber ino : files) allocated.push_back(AllocatedBytes(ino));
      moved += RandomMove(rng);
      ASSERT_EQ(UsedBytes(), used) << "a move changed df's used bytes";
      for (int i = 0; i < kFiles; ++i) {
        ASSERT_EQ(AllocatedBytes(files[i]), allocated[i]) << "a move changed st_blocks";
      }
    }
    const int f = static_cast<int>(rng() % kFiles);
    const InodeNumber ino = files[f];
    std::string& model = models[f];
    std::string what;
    switch (rng() % 10) {
      case 0:
      case 1:
      case 2: {
        const uint64_t offset = RandomOffset(rng, model.size());
        const uint64_t length = std::min(RandomLength(rng), kMaxFileSize - offset);
        const std::string bytes = RandomBytes(rng, length);
        what = "write " + std::to_string(length) + " at " + std::to_string(offset);
        absl::StatusOr<size_t> written =
            fs_->Write(ino, offset, bytes.data(), bytes.size(), /*append=*/false, root);
        ASSERT_TRUE(written.ok()) << what << ": " << written.status();
        ASSERT_EQ(*written, bytes.size());
        Overwrite(model, offset, bytes);
        break;
      }
      case 3: {
        uint64_t size = rng() % 2 ? rng() % (model.size() + 1) : rng() % kMaxFileSize;
        // A truncate takes a mapping's memory past the new end away.
        if (mappings[f] != nullptr) size = std::max<uint64_t>(size, model.size());
        what = "truncate to " + std::to_string(size);
        AttributeChanges changes;
        changes.size = size;
        ASSERT_TRUE(fs_->SetAttributes(ino, changes, root).ok()) << what;
        model.resize(size, '\0');
        break;
      }
      case 4: {
        const uint64_t offset = RandomOffset(rng, model.size());
        const uint64_t length = std::min(RandomLength(rng), kMaxFileSize - offset);
        int mode = 0;
        switch (rng() % 4) {
          case 0:
            mode = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
            break;
          case 1:
            mode = FALLOC_FL_ZERO_RANGE;
            break;
          case 2:
            mode = FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE;
            break;
          default:
            mode = 0;
            break;
        }
        what = "fallocate mode " + std::to_string(mode) + " " + std::to_string(length) + " at " +
               std::to_string(offset);
        const absl::Status status = fs_->Allocate(ino, mode, offset, length, root);
        ASSERT_TRUE(status.ok()) << what << ": " << status;
        if (mode == 0) {
          if (model.size() < offset + length) model.resize(offset + length, '\0');
        } else {
          Zero(model, offset, length, (mode & FALLOC_FL_KEEP_SIZE) != 0);
        }
        break;
      }
      case 5: {
        const int g = static_cast<int>(rng() % kFiles);
        const std::string source = models[g];
        const uint64_t in_offset = rng() % (source.size() + 4096);
        const uint64_t out_offset = RandomOffset(rng, model.size());
        uint64_t length = std::min(RandomLength(rng), kMaxFileSize - out_offset);
        if (g == f && in_offset < out_offset + length && out_offset < in_offset + length) {
          length = in_offset > out_offset ? in_offset - out_offset : out_offset - in_offset;
          if (length == 0) break;
        }
        what = "copy_file_range " + std::to_string(length) + " from inode " +
               std::to_string(files[g]) + " at " + std::to_string(in_offset) + " to " +
               std::to_string(out_offset);
        absl::StatusOr<size_t> copied =
            fs_->CopyFileRange(files[g], in_offset, ino, out_offset, length, root);
        ASSERT_TRUE(copied.ok()) << what << ": " << copied.status();
        const uint64_t expected =
            in_offset >= source.size() ? 0 : std::min<uint64_t>(length, source.size() - in_offset);
        ASSERT_EQ(*copied, expected) << what;
        if (expected > 0) {
          Overwrite(model, out_offset, absl::string_view(source).substr(in_offset, expected));
        }
        break;
      }
      case 6:
      case 7: {
        const uint64_t offset = rng() % (model.size() + 100);
        const uint64_t length = RandomLength(rng);
        what = "read " + std::to_string(length) + " at " + std::to_string(offset);
        const std::string got = Read(ino, offset, length);
        const std::string expected = offset >= model.size() ? "" : model.substr(offset, length);
        ASSERT_EQ(got.size(), expected.size()) << what;
        ASSERT_TRUE(got == expected) << what << " read other bytes than the model";
        break;
      }
      case 8:
        // One file of the four gets mapped; the others stay free to move.
        if (f == 0 && mappings[f] == nullptr && model.size() >= HostDevice::kGranule &&
            rng() % 4 == 0) {
          what = "export";
          absl::StatusOr<std::unique_ptr<ExportedMemory>> exported = fs_->ExportShared(ino);
          ASSERT_TRUE(exported.ok()) << exported.status();
          ASSERT_EQ((*exported)->size(), model.size());
          mappings[f] = std::make_unique<Mapping>(std::move(*exported));
          break;
        }
        what = "fsync";
        ASSERT_TRUE(fs_->Fsync(ino).ok());
        break;
      default:
        // The last handle's release gives back growth slack; an open
        // brings the handle back.
        if (open[f]) {
          what = "release";
          fs_->Release(ino);
        } else {
          what = "open";
          ASSERT_TRUE(fs_->Open(ino, O_RDWR, root).ok());
        }
        open[f] = !open[f];
        break;
    }
    SCOPED_TRACE("after " + what + " on inode " + std::to_string(ino));
    ASSERT_NO_FATAL_FAILURE(Check(ino, model));
    ASSERT_NO_FATAL_FAILURE(check_mapping(f));
    if (op % 50 == 0 || op == operations - 1) {
      uint64_t allocated = 0;
      for (int i = 0; i < kFiles; ++i) {
        ASSERT_NO_FATAL_FAILURE(Check(files[i], models[i]));
        ASSERT_NO_FATAL_FAILURE(check_mapping(i));
        allocated += AllocatedBytes(files[i]);
      }
      ASSERT_EQ(UsedBytes(), allocated) << "df's used bytes are the files' allocated bytes";
    }
  }
  EXPECT_GT(moved, 0u);
  for (int i = 0; i < kFiles; ++i) {
    if (open[i]) fs_->Release(files[i]);
  }
  mappings.clear();
}

TEST_P(MoveModelTest, FilesReadAsWrittenWhileAnotherThreadMovesTheirBlocks) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::atomic<bool> done{false};
  std::atomic<uint64_t> moved{0};
  std::atomic<int> moves{0};
  std::thread mover([&] {
    std::mt19937_64 rng(seed ^ 0x5eed);
    while (!done.load()) {
      moved += RandomMove(rng);
      ++moves;
    }
  });

  constexpr int kWorkers = 2;
  constexpr int kFilesEach = 2;
  std::vector<std::vector<InodeNumber>> files(kWorkers);
  std::vector<std::vector<std::string>> models(kWorkers, std::vector<std::string>(kFilesEach));
  for (int w = 0; w < kWorkers; ++w) {
    for (int i = 0; i < kFilesEach; ++i) {
      files[w].push_back(NewFile("w" + std::to_string(w) + "f" + std::to_string(i)));
    }
  }
  const int operations = Scaled(600);
  std::vector<std::string> failures(kWorkers);
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      std::mt19937_64 rng(seed + 1 + w);
      const Caller root = Caller::Root();
      std::string& failure = failures[w];
      for (int op = 0; op < operations && failure.empty(); ++op) {
        const int f = static_cast<int>(rng() % kFilesEach);
        const InodeNumber ino = files[w][f];
        std::string& model = models[w][f];
        const uint64_t offset = RandomOffset(rng, model.size());
        const std::string where = "worker " + std::to_string(w) + " operation " +
                                  std::to_string(op) + " on inode " + std::to_string(ino) + ": ";
        switch (rng() % 6) {
          case 0:
          case 1: {
            const std::string bytes =
                RandomBytes(rng, std::min(RandomLength(rng), kMaxFileSize - offset));
            absl::StatusOr<size_t> written =
                fs_->Write(ino, offset, bytes.data(), bytes.size(), /*append=*/false, root);
            if (!written.ok() || *written != bytes.size()) {
              failure = where + "write failed";
              break;
            }
            Overwrite(model, offset, bytes);
            break;
          }
          case 2: {
            AttributeChanges changes;
            changes.size = rng() % kMaxFileSize;
            if (!fs_->SetAttributes(ino, changes, root).ok()) {
              failure = where + "truncate failed";
              break;
            }
            model.resize(*changes.size, '\0');
            break;
          }
          case 3: {
            const uint64_t length = std::min(RandomLength(rng), kMaxFileSize - offset);
            if (!fs_->Allocate(ino, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, length,
                               root)
                     .ok()) {
              failure = where + "punch failed";
              break;
            }
            Zero(model, offset, length, /*keep_size=*/true);
            break;
          }
          default: {
            const uint64_t read_offset = rng() % 2 ? 0 : rng() % (model.size() + 1);
            const uint64_t length = rng() % 2 ? model.size() + 1 : RandomLength(rng);
            std::string got(length, '\x7f');
            absl::StatusOr<size_t> read = fs_->Read(ino, read_offset, length, got.data());
            if (!read.ok()) {
              failure = where + "read failed";
              break;
            }
            got.resize(*read);
            if (got != (read_offset >= model.size() ? "" : model.substr(read_offset, length))) {
              failure = where + "read " + std::to_string(length) + " at " +
                        std::to_string(read_offset) + " differs from the model";
            }
            break;
          }
        }
      }
    });
  }
  for (std::thread& worker : workers) worker.join();
  done = true;
  mover.join();
  for (const std::string& failure : failures) EXPECT_EQ(failure, "");
  EXPECT_GT(moves.load(), 0);
  uint64_t allocated = 0;
  for (int w = 0; w < kWorkers; ++w) {
    for (int i = 0; i < kFilesEach; ++i) {
      ASSERT_NO_FATAL_FAILURE(Check(files[w][i], models[w][i]));
      allocated += AllocatedBytes(files[w][i]);
    }
  }
  EXPECT_EQ(UsedBytes(), allocated);
  for (int w = 0; w < kWorkers; ++w) {
    for (const InodeNumber ino : files[w]) fs_->Release(ino);
  }
}

INSTANTIATE_TEST_SUITE_P(Cache, MoveModelTest, testing::Bool(),
                         [](const testing::TestParamInfo<bool>& info) {
                           return info.param ? "WithWriteBackCache" : "WithoutCache";
                         });

}  // namespace
}  // namespace cudafs

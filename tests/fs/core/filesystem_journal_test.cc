// The metadata journal (Filesystem with FilesystemConfig::metadata_log;
// fs/core/journal_scope.h, journal_records.h, metadata_log.h): every change
// lands in the log, so that a successor on the same device memory finds
// the filesystem as the last operation left it; a crash after any
// transaction leaves a log that loads; operations racing on many threads
// still leave the log where the filesystem is; a checkpoint changes
// nothing a successor sees.
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "alloc/base/coding.h"
#include "alloc/base/errors.h"
#include "alloc/devices/device_wrapper.h"
#include "alloc/devices/host_device.h"
#include "alloc/storage/arena.h"
#include "fs/core/filesystem.h"
#include "fs/core/journal_records.h"
#include "fs/core/metadata_log.h"
#include "gtest/gtest.h"
#include "tests/fs/core/filesystem_trees.h"

namespace cudafs {
namespace {

constexpr uint64_t kMinBlock = 4096;
constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kArenaBytes = 64 * kMiB;
constexpr uint64_t kFragmentPages = 1024;

// What a process that dies leaves of the device memory: its decommits do
// not happen, so the bytes stay for a successor.
class OutlivedDevice final : public DeviceWrapper {
 public:
  using DeviceWrapper::DeviceWrapper;
  absl::Status Decommit(uint64_t, uint64_t) override { return absl::OkStatus(); }
};

// The tree as a user sees it, atimes aside (reading moves them), with or
// without the files' bytes.
std::map<std::string, std::string> Describe(Filesystem& fs, InodeNumber dir,
                                            const std::string& path, bool data = true) {
  return DescribeTree(fs, dir, path, DescribeOptions{.atimes = false, .data = data});
}

class FilesystemJournalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<HostDevice>> device = HostDevice::Create(kArenaBytes);
    ASSERT_TRUE(device.ok()) << device.status();
    device_ = std::move(*device);
    outlived_ = std::make_unique<OutlivedDevice>(device_.get());
    absl::StatusOr<std::unique_ptr<MetadataLog>> log = MetadataLog::Create();
    ASSERT_TRUE(log.ok()) << log.status();
    log_ = std::move(*log);
    arena_ = std::make_unique<Arena>(outlived_.get(), kMinBlock);
    FilesystemConfig config;
    config.metadata_log = log_.get();
    fs_ = std::make_unique<Filesystem>(arena_.get(), config);
    ASSERT_TRUE(fs_->CheckpointLog().ok());
  }

  // A successor on the same memory, loaded from the log (or from `image`).
  struct Successor {
    std::unique_ptr<Arena> arena;
    std::unique_ptr<Filesystem> fs;
    absl::Status loaded;
    ReplayReport report;
  };
  Successor Load(const std::string* image = nullptr) {
    Successor successor;
    successor.arena = std::make_unique<Arena>(outlived_.get(), kMinBlock);
    successor.fs = std::make_unique<Filesystem>(successor.arena.get(), FilesystemConfig());
    successor.loaded = image != nullptr ? successor.fs->LoadImage(*image)
                                        : successor.fs->LoadLog(*log_, &successor.report);
    return successor;
  }

  InodeNumber Make(InodeNumber parent, const std::string& name, mode_t mode, dev_t rdev = 0) {
    return MakeIn(*fs_, parent, name, mode, rdev);
  }
  InodeNumber WriteFile(InodeNumber parent, const std::string& name, const std::string& bytes,
                        uint64_t offset = 0) {
    return WriteNewFile(*fs_, parent, name, bytes, offset);
  }

  // One of everything: every kind of inode, links, attributes, renames
  // over names, removals, truncates, holes, a file open with no name.
  void Work() {
    const InodeNumber dir = Make(kRootInode, "dir", S_IFDIR | 02775);
    const InodeNumber sub = Make(dir, "sub", S_IFDIR | 0700);
    WriteFile(kRootInode, "small", "hello, journal");
    const InodeNumber large = WriteFile(dir, "large", SeededBytes(3 * kMiB + 17, 1));
    WriteFile(sub, "sparse", SeededBytes(5000, 2), 10 * kMiB);
    const InodeNumber linked = WriteFile(dir, "linked", SeededBytes(70000, 3));
    ASSERT_TRUE(fs_->Link(linked, sub, "second name").ok());
    ASSERT_TRUE(fs_->SymbolicLink(kRootInode, "short link", "dir/large", Caller::Root()).ok());
    ASSERT_TRUE(fs_->SymbolicLink(sub, "long link", std::string(3000, 'x'), Caller::Root()).ok());
    Make(kRootInode, "fifo", S_IFIFO | 0600);
    Make(dir, "null", S_IFCHR | 0666, makedev(1, 3));
    ASSERT_TRUE(fs_->SetExtendedAttribute(linked, "user.colour", "blue", 0).ok());
    ASSERT_TRUE(fs_->SetExtendedAttribute(dir, "trusted.x", std::string("\0\1", 2), 0).ok());
    ASSERT_TRUE(fs_->SetExtendedAttribute(dir, "user.gone", "soon", 0).ok());
    ASSERT_TRUE(fs_->RemoveExtendedAttribute(dir, "user.gone").ok());
    AttributeChanges changes;
    changes.uid = 1000;
    changes.gid = 100;
    changes.mtime = AttributeChanges::Time{false, timespec{1234567890, 123456789}};
    ASSERT_TRUE(fs_->SetAttributes(linked, changes, Caller::Root()).ok());
    AttributeChanges shrink;
    shrink.size = kMiB + 5;
    ASSERT_TRUE(fs_->SetAttributes(large, shrink, Caller::Root()).ok());
    ASSERT_TRUE(fs_->Allocate(large, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 8192, 65536,
                              Caller::Root())
                    .ok());
    for (int i = 0; i < 100; ++i) WriteFile(sub, "f" + std::to_string(i), SeededBytes(i * 97, i));
    for (int i = 0; i < 100; i += 3) {
      ASSERT_TRUE(fs_->Unlink(sub, "f" + std::to_string(i)).ok());
    }
    ASSERT_TRUE(fs_->Rename(sub, "f1", kRootInode, "moved", 0).ok());
    ASSERT_TRUE(fs_->Rename(sub, "f2", sub, "f4", 0).ok());  // over a name
    ASSERT_TRUE(fs_->Rename(kRootInode, "small", dir, "sub", RENAME_EXCHANGE).ok());
    const InodeNumber gone_dir = Make(kRootInode, "gone", S_IFDIR | 0755);
    ASSERT_TRUE(gone_dir != 0);
    ASSERT_TRUE(fs_->RemoveDirectory(kRootInode, "gone").ok());
    // Open, then unlinked: it lives on with no name.
    const InodeNumber open = WriteFile(kRootInode, "open", SeededBytes(9000, 4));
    ASSERT_TRUE(fs_->Open(open, O_RDWR, Caller::Root()).ok());
    ASSERT_TRUE(fs_->Unlink(kRootInode, "open").ok());
    open_unlinked_ = open;
    ASSERT_TRUE(fs_->CopyFileRange(linked, 0, large, 100, 30000, Caller::Root()).ok());
  }

  // kFragmentPages pages of `page` written into `file` in an order shuffled
  // by `seed` (an extent each), which it returns.
  std::vector<uint64_t> WriteFragmented(InodeNumber file, const std::string& page, int seed) {
    std::vector<uint64_t> order(kFragmentPages);
    for (uint64_t i = 0; i < kFragmentPages; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), std::mt19937_64(seed));
    for (const uint64_t i : order) {
      EXPECT_TRUE(
          fs_->Write(file, i * page.size(), page.data(), page.size(), false, Caller::Root()).ok());
    }
    return order;
  }
  // The journal's length and the tree (without the bytes) after a step.
  void NoteStep() {
    ends_.push_back(log_->journal_bytes());
    states_.push_back(Describe(*fs_, kRootInode, "", /*data=*/false));
  }
  // Each step after the first added less than `most` bytes to the journal,
  // and each loads as the tree was then.
  void ExpectEachStepSmallAndLoading(uint64_t most) {
    for (size_t k = 1; k < ends_.size(); ++k) {
      EXPECT_LT(ends_[k] - ends_[k - 1], most) << "step " << k;
    }
    ExpectEachStepLoads();
  }
  // Each prefix of the journal that NoteStep saw loads as the tree was then.
  void ExpectEachStepLoads() {
    absl::StatusOr<MetadataLog::Contents> contents = log_->Read();
    ASSERT_TRUE(contents.ok());
    for (size_t k = 0; k < ends_.size(); ++k) {
      ReplayReport report;
      absl::StatusOr<std::string> image = ReplayJournal(
          contents->checkpoint, absl::string_view(contents->journal).substr(0, ends_[k]), &report);
      ASSERT_TRUE(image.ok()) << k << ": " << image.status();
      EXPECT_TRUE(report.mended.empty()) << k << ": " << report.mended.front();
      Successor successor = Load(&*image);
      ASSERT_TRUE(successor.loaded.ok()) << k << ": " << successor.loaded;
      EXPECT_EQ(Describe(*successor.fs, kRootInode, "", /*data=*/false), states_[k])
          << "after step " << k;
    }
  }

  // A successor of the log with two more records of name `name` in `dir`:
  // it made, naming `ino` with `cookie`, then removed; the removal landing
  // first.
  Successor LoadWithRemovalLandedFirst(InodeNumber dir, const std::string& name, InodeNumber ino,
                                       uint64_t cookie) {
    absl::StatusOr<MetadataLog::Contents> contents = log_->Read();
    EXPECT_TRUE(contents.ok());
    const uint64_t older = NextJournalSequence();
    const uint64_t newer = NextJournalSequence();
    std::string made, removed;
    PutEntryRecord(dir, name, older, Directory::Entry{ino, S_IFREG}, cookie, &made);
    PutEntryRecord(dir, name, newer, std::nullopt, 0, &removed);
    std::string journal = contents->journal;
    PutBytes(&journal, removed);
    PutBytes(&journal, made);
    ReplayReport report;
    absl::StatusOr<std::string> image = ReplayJournal(contents->checkpoint, journal, &report);
    EXPECT_TRUE(image.ok()) << image.status();
    return Load(image.ok() ? &*image : nullptr);
  }

  std::unique_ptr<HostDevice> device_;
  std::unique_ptr<OutlivedDevice> outlived_;
  std::unique_ptr<MetadataLog> log_;
  std::unique_ptr<Arena> arena_;
  std::unique_ptr<Filesystem> fs_;
  InodeNumber open_unlinked_ = 0;
  std::vector<size_t> ends_;
  std::vector<std::map<std::string, std::string>> states_;
};

TEST_F(FilesystemJournalTest, ASuccessorFindsWhatEveryOperationLeft) {
  Work();
  const std::map<std::string, std::string> before = Describe(*fs_, kRootInode, "");
  ASSERT_GT(before.size(), 60u);
  const ArenaStats used = arena_->Stats();
  Successor successor = Load();
  ASSERT_TRUE(successor.loaded.ok()) << successor.loaded;
  EXPECT_EQ(Describe(*successor.fs, kRootInode, ""), before);
  EXPECT_EQ(successor.arena->Stats().blocks.used, used.blocks.used);
  EXPECT_TRUE(successor.report.mended.empty()) << successor.report.mended.front();
  // The file open with no name is there, for its handle.
  std::string bytes(9000, '\0');
  absl::StatusOr<size_t> read =
      successor.fs->Read(open_unlinked_, 0, bytes.size(), bytes.data(), false);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(bytes, SeededBytes(9000, 4));
  // New inodes take numbers never given before.
  absl::StatusOr<struct stat> made =
      successor.fs->MakeNode(kRootInode, "new", S_IFREG | 0644, 0, Caller::Root());
  ASSERT_TRUE(made.ok());
  EXPECT_GT(made->st_ino, open_unlinked_);
}

TEST_F(FilesystemJournalTest, ACheckpointChangesNothingASuccessorSees) {
  Work();
  const uint64_t journal = log_->journal_bytes();
  ASSERT_TRUE(fs_->CheckpointLog().ok());
  EXPECT_EQ(log_->journal_bytes(), 0u);
  EXPECT_GT(log_->checkpoint_bytes(), 0u);
  EXPECT_LT(log_->checkpoint_bytes(), journal);
  WriteFile(kRootInode, "after", "written after the checkpoint");
  const std::map<std::string, std::string> before = Describe(*fs_, kRootInode, "");
  Successor successor = Load();
  ASSERT_TRUE(successor.loaded.ok()) << successor.loaded;
  EXPECT_EQ(Describe(*successor.fs, kRootInode, ""), before);
}

// A crash after any transaction: the log as it was then loads, as the
// filesystem was then.
TEST_F(FilesystemJournalTest, EveryPrefixOfTheJournalLoads) {
  const InodeNumber dir = Make(kRootInode, "d", S_IFDIR | 0755);
  std::vector<std::string> journals;
  std::vector<std::map<std::string, std::string>> states;
  const auto note = [&] {
    absl::StatusOr<MetadataLog::Contents> contents = log_->Read();
    ASSERT_TRUE(contents.ok());
    journals.push_back(contents->journal);
    // Without the bytes: later steps reuse freed blocks, which a crash
    // would not have let them do.
    states.push_back(Describe(*fs_, kRootInode, "", /*data=*/false));
  };
  note();
  for (int i = 0; i < 12; ++i) {
    const std::string name = "f" + std::to_string(i);
    WriteFile(dir, name, SeededBytes(4096 * (i + 1) + i, i));
    note();
    if (i % 3 == 1) {
      AttributeChanges cut;
      cut.size = 100;
      ASSERT_TRUE(fs_->SetAttributes(Make(dir, "t" + name, S_IFREG | 0600), cut, Caller::Root())
                      .ok());
      ASSERT_TRUE(fs_->Unlink(dir, "f" + std::to_string(i - 1)).ok());
      note();
    }
    if (i % 3 == 2) {  // never one unlinked above
      ASSERT_TRUE(fs_->Rename(dir, name, kRootInode, "r" + name, 0).ok());
      note();
    }
  }
  absl::StatusOr<MetadataLog::Contents> contents = log_->Read();
  ASSERT_TRUE(contents.ok());
  for (size_t k = 0; k < journals.size(); ++k) {
    ReplayReport report;
    absl::StatusOr<std::string> image =
        ReplayJournal(contents->checkpoint, journals[k], &report);
    ASSERT_TRUE(image.ok()) << k << ": " << image.status();
    Successor successor = Load(&*image);
    ASSERT_TRUE(successor.loaded.ok()) << k << ": " << successor.loaded;
    EXPECT_EQ(Describe(*successor.fs, kRootInode, "", /*data=*/false), states[k])
        << "after step " << k;
  }
}

// A FORGET that lets an unlinked inode go appends its going alone, in one
// transaction: not its counts, then its going in another.
TEST_F(FilesystemJournalTest, AForgetThatDropsAnInodeAppendsOnlyItsGoing) {
  const InodeNumber file = Make(kRootInode, "short-lived", S_IFREG | 0644);
  ASSERT_TRUE(fs_->Unlink(kRootInode, "short-lived").ok());
  const uint64_t before = log_->journal_bytes();
  fs_->Forget(file, 1);
  std::string gone;
  PutGoneRecord(file, &gone);
  EXPECT_EQ(log_->journal_bytes() - before, 1 + gone.size());  // a one-byte length first
  EXPECT_FALSE(fs_->GetAttributes(file).ok());
}

// The transactions the journal holds now.
uint64_t Transactions(const MetadataLog& log) {
  absl::StatusOr<MetadataLog::Contents> contents = log.Read();
  if (!contents.ok()) return 0;
  ReplayReport report;
  if (!ReplayJournal(contents->checkpoint, contents->journal, &report).ok()) return 0;
  return report.transactions;
}

// An operation's changes of reference counts land in its own transaction:
// a create that opens is one append, not three (the operation, the lookup,
// the open), and a READDIRPLUS one for all the entries it returns.
TEST_F(FilesystemJournalTest, AnOperationAndTheCountsItChangesAreOneTransaction) {
  const InodeNumber dir = Make(kRootInode, "dir", S_IFDIR | 0755);
  uint64_t before = Transactions(*log_);
  ASSERT_TRUE(fs_->Create(dir, "opened", S_IFREG | 0644, O_RDWR, Caller::Root()).ok());
  EXPECT_EQ(Transactions(*log_), before + 1);
  for (int i = 0; i < 20; ++i) Make(dir, "f" + std::to_string(i), S_IFREG | 0644);
  before = Transactions(*log_);
  int entries = 0;
  ASSERT_TRUE(fs_->ReadDirectory(dir, 0, /*plus=*/true,
                                 [&](const DirectoryEntry&) {
                                   ++entries;
                                   return true;
                                 })
                  .ok());
  EXPECT_EQ(entries, 23);
  EXPECT_EQ(Transactions(*log_), before + 1);
  // A lookup alone is a transaction of its own.
  before = Transactions(*log_);
  ASSERT_TRUE(fs_->Lookup(dir, "f3").ok());
  EXPECT_EQ(Transactions(*log_), before + 1);
  Successor successor = Load();
  ASSERT_TRUE(successor.loaded.ok()) << successor.loaded;
  EXPECT_EQ(Describe(*successor.fs, kRootInode, ""), Describe(*fs_, kRootInode, ""));
}

// A change of a file's attributes alone (mode, owners, times, a name more
// or less) records its head, not its extents: a transaction of a few
// hundred bytes at most (with the directories' records and entries) for a
// file of a thousand extents, whose whole record is thousands; and every
// prefix loads as the files were then.
TEST_F(FilesystemJournalTest, AnAttributeChangeRecordsTheHeadNotTheExtents) {
  const InodeNumber dir = Make(kRootInode, "dir", S_IFDIR | 0755);
  const InodeNumber file = Make(dir, "fragmented", S_IFREG | 0644);
  const std::string page = SeededBytes(kMinBlock, 10);
  WriteFragmented(file, page, 9);
  NoteStep();
  AttributeChanges chmod;
  chmod.mode = 0600;
  ASSERT_TRUE(fs_->SetAttributes(file, chmod, Caller::Root()).ok());
  NoteStep();
  AttributeChanges touch;
  touch.mtime = AttributeChanges::Time{false, timespec{1234567890, 5}};
  touch.uid = 1000;
  ASSERT_TRUE(fs_->SetAttributes(file, touch, Caller::Root()).ok());
  NoteStep();
  ASSERT_TRUE(fs_->Link(file, kRootInode, "second").ok());
  NoteStep();
  ASSERT_TRUE(fs_->Rename(dir, "fragmented", kRootInode, "renamed", 0).ok());
  NoteStep();
  ASSERT_TRUE(fs_->Unlink(kRootInode, "second").ok());
  NoteStep();
  // The last name goes while the kernel still holds a reference.
  ASSERT_TRUE(fs_->Unlink(kRootInode, "renamed").ok());
  NoteStep();
  ExpectEachStepSmallAndLoading(400);
  // The file with no name keeps every extent: its blocks, and its bytes.
  Successor last = Load();
  ASSERT_TRUE(last.loaded.ok()) << last.loaded;
  EXPECT_EQ(last.arena->Stats().blocks.used, arena_->Stats().blocks.used);
  std::string read(kFragmentPages * kMinBlock, '\0');
  absl::StatusOr<size_t> got = last.fs->Read(file, 0, read.size(), read.data(), false);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(*got, read.size());
  for (uint64_t i = 0; i < kFragmentPages; ++i) {
    ASSERT_EQ(read.substr(i * kMinBlock, kMinBlock), page) << "page " << i;
  }
}

// A change of a directory's entries records the directory's head, not its
// extended attributes: each of these operations in a directory that holds
// 3 KiB of them adds a few hundred bytes at most, and a successor finds
// the directory's times and link count as they were.
TEST_F(FilesystemJournalTest, ANameMadeOrRemovedRecordsTheDirectorysHead) {
  const InodeNumber dir = Make(kRootInode, "dir", S_IFDIR | 0755);
  ASSERT_TRUE(fs_->SetExtendedAttribute(dir, "user.large", std::string(3000, 'x'), 0).ok());
  const InodeNumber file = WriteFile(kRootInode, "file", "bytes");
  NoteStep();
  const std::function<absl::Status()> steps[] = {
      [&] { return fs_->Create(dir, "made", S_IFREG | 0644, O_RDWR, Caller::Root()).status(); },
      [&] { return fs_->MakeDirectory(dir, "sub", 0755, Caller::Root()).status(); },
      [&] { return fs_->Link(file, dir, "linked").status(); },
      [&] { return fs_->Rename(dir, "linked", dir, "renamed", 0); },
      [&] { return fs_->Unlink(dir, "renamed"); },
      [&] { return fs_->RemoveDirectory(dir, "sub"); },
  };
  for (const std::function<absl::Status()>& step : steps) {
    ASSERT_TRUE(step().ok());
    NoteStep();
  }
  ExpectEachStepSmallAndLoading(400);
  Successor successor = Load();
  ASSERT_TRUE(successor.loaded.ok()) << successor.loaded;
  absl::StatusOr<struct stat> was = fs_->GetAttributes(dir);
  absl::StatusOr<struct stat> is = successor.fs->GetAttributes(dir);
  ASSERT_TRUE(was.ok() && is.ok());
  EXPECT_EQ(is->st_nlink, was->st_nlink);
  EXPECT_EQ(is->st_mtim.tv_nsec, was->st_mtim.tv_nsec);
  EXPECT_EQ(is->st_ctim.tv_nsec, was->st_ctim.tv_nsec);
}

// The last close of a file records it whole only where it gave back what
// growth reserved past its end: else the close's transaction is its count
// of opens alone. Either way a successor holds the blocks the file does.
TEST_F(FilesystemJournalTest, ACloseRecordsTheFileOnlyWhereItTrimmedGrowth) {
  const std::string bytes = SeededBytes(kMinBlock, 11);
  absl::StatusOr<struct stat> small =
      fs_->Create(kRootInode, "small", S_IFREG | 0644, O_RDWR, Caller::Root());
  ASSERT_TRUE(small.ok());
  ASSERT_TRUE(fs_->Write(small->st_ino, 0, bytes.data(), bytes.size(), false, Caller::Root()).ok());
  uint64_t before = log_->journal_bytes();
  fs_->Release(small->st_ino);
  std::string counts;
  PutCountsRecord(small->st_ino, NextJournalSequence(), 1, 0, &counts);
  EXPECT_EQ(log_->journal_bytes() - before, 1 + counts.size());
  // Appends reserve growth past the end, which the close gives back.
  absl::StatusOr<struct stat> grown =
      fs_->Create(kRootInode, "grown", S_IFREG | 0644, O_RDWR, Caller::Root());
  ASSERT_TRUE(grown.ok());
  const std::string chunk = SeededBytes(100000, 12);
  for (uint64_t offset = 0; offset < 20 * chunk.size(); offset += chunk.size()) {
    ASSERT_TRUE(
        fs_->Write(grown->st_ino, offset, chunk.data(), chunk.size(), false, Caller::Root()).ok());
  }
  const uint64_t reserved = arena_->Stats().blocks.used;
  before = log_->journal_bytes();
  fs_->Release(grown->st_ino);
  ASSERT_LT(arena_->Stats().blocks.used, reserved) << "no growth was reserved";
  EXPECT_GT(log_->journal_bytes() - before, 2 * (1 + counts.size()));
  Successor successor = Load();
  ASSERT_TRUE(successor.loaded.ok()) << successor.loaded;
  EXPECT_EQ(successor.arena->Stats().blocks.used, arena_->Stats().blocks.used);
  EXPECT_EQ(Describe(*successor.fs, kRootInode, ""), Describe(*fs_, kRootInode, ""));
}

// A cookie that an entry record named is never handed out again by a
// successor, even where the name's removal landed before its making: a
// directory's next cookie is no longer in its head records.
TEST_F(FilesystemJournalTest, ASuccessorHandsOutNoCookieARecordNamed) {
  const InodeNumber dir = Make(kRootInode, "d", S_IFDIR | 0755);
  const InodeNumber file = WriteFile(dir, "f", "bytes");
  constexpr uint64_t kHandedOut = 99;
  Successor successor = LoadWithRemovalLandedFirst(dir, "g", file, kHandedOut);
  ASSERT_TRUE(successor.loaded.ok()) << successor.loaded;
  ASSERT_NE(MakeIn(*successor.fs, dir, "new", S_IFREG | 0644), 0u);
  uint64_t cookie = 0;
  ASSERT_TRUE(successor.fs
                  ->ReadDirectory(dir, 0, /*plus=*/false,
                                  [&](const DirectoryEntry& entry) {
                                    if (entry.name == "new") cookie = entry.next_cookie;
                                    return true;
                                  })
                  .ok());
  EXPECT_GT(cookie, kHandedOut);
}

// A write records the extents it touched, not the file's: overwrites of a
// file of a thousand extents add a few dozen bytes each to the journal,
// and every prefix of writes, truncations and punches in any order loads
// as the file was then.
TEST_F(FilesystemJournalTest, AWriteRecordsWhatItChangedNotTheWholeFile) {
  const InodeNumber file = Make(kRootInode, "fragmented", S_IFREG | 0644);
  const std::vector<uint64_t> order = WriteFragmented(file, SeededBytes(kMinBlock, 6), 5);
  const uint64_t before = log_->journal_bytes();
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(fs_->Write(file, order[i] * kMinBlock + 8, "overwrite", 9, false, Caller::Root())
                    .ok());
  }
  EXPECT_LT(log_->journal_bytes() - before, 100u * 96);

  NoteStep();
  std::mt19937_64 random(7);
  for (int step = 0; step < 60; ++step) {
    const uint64_t offset = random() % (2 * kFragmentPages * kMinBlock);
    const std::string bytes = SeededBytes(1 + random() % (3 * kMinBlock), step);
    switch (random() % 4) {
      case 0: {
        AttributeChanges cut;
        cut.size = offset;
        ASSERT_TRUE(fs_->SetAttributes(file, cut, Caller::Root()).ok());
        break;
      }
      case 1:
        ASSERT_TRUE(fs_->Allocate(file, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset,
                                  1 + random() % (64 * kMinBlock), Caller::Root())
                        .ok());
        break;
      default:
        ASSERT_TRUE(
            fs_->Write(file, offset, bytes.data(), bytes.size(), false, Caller::Root()).ok());
    }
    NoteStep();
  }
  ExpectEachStepLoads();
  Successor last = Load();
  ASSERT_TRUE(last.loaded.ok()) << last.loaded;
  EXPECT_EQ(Describe(*last.fs, kRootInode, ""), Describe(*fs_, kRootInode, ""));
  EXPECT_EQ(last.arena->Stats().blocks.used, arena_->Stats().blocks.used);
}

// A truncation's transaction that did not land before a later write's
// did (transactions land in the order they were appended, not the order
// their states were read in): the write's extent overlaps the older one,
// which is split around it, its first half keeping its bytes.
TEST_F(FilesystemJournalTest, ReplaySplitsAnExtentALaterWriteOverlaps) {
  const std::string bytes = SeededBytes(2 * kMinBlock, 8);
  const InodeNumber file = WriteFile(kRootInode, "f", bytes);
  const uint64_t written = log_->journal_bytes();
  AttributeChanges cut;
  cut.size = kMinBlock;
  ASSERT_TRUE(fs_->SetAttributes(file, cut, Caller::Root()).ok());
  const uint64_t truncated = log_->journal_bytes();
  const std::string more = SeededBytes(kMinBlock, 9);
  ASSERT_TRUE(
      fs_->Write(file, kMinBlock, more.data(), more.size(), false, Caller::Root()).ok());
  absl::StatusOr<MetadataLog::Contents> contents = log_->Read();
  ASSERT_TRUE(contents.ok());
  const std::string journal = contents->journal.substr(0, written) +
                              contents->journal.substr(truncated);  // the truncation lost
  ReplayReport report;
  absl::StatusOr<std::string> image = ReplayJournal(contents->checkpoint, journal, &report);
  ASSERT_TRUE(image.ok()) << image.status();
  ASSERT_EQ(report.mended.size(), 1u);
  EXPECT_NE(report.mended[0].find("overlapped"), std::string::npos) << report.mended[0];
  Successor successor = Load(&*image);
  ASSERT_TRUE(successor.loaded.ok()) << successor.loaded;
  const std::map<std::string, std::string> tree = Describe(*successor.fs, kRootInode, "");
  EXPECT_EQ(tree, Describe(*fs_, kRootInode, ""));
}

// Operations on many threads at once, racing for the same directories and
// files: whatever order their transactions land in, the log ends where
// the filesystem is, and no block is named by two files.
TEST_F(FilesystemJournalTest, RacingOperationsLeaveTheLogWhereTheFilesystemIs) {
  constexpr int kThreads = 4;
  const InodeNumber shared = Make(kRootInode, "shared", S_IFDIR | 0777);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 random(t);
      for (int i = 0; i < 400; ++i) {
        const std::string name = "n" + std::to_string(random() % 40);
        switch (random() % 6) {
          case 0:
          case 1: {
            absl::StatusOr<struct stat> st =
                fs_->Create(shared, name, 0644, O_RDWR, Caller::Root());
            if (st.ok()) {
              const std::string bytes = SeededBytes(random() % 20000, i);
              (void)fs_->Write(st->st_ino, 0, bytes.data(), bytes.size(), false, Caller::Root());
              fs_->Release(st->st_ino);
              fs_->Forget(st->st_ino, 1);
            }
            break;
          }
          case 2:
            (void)fs_->Unlink(shared, name);
            break;
          case 3:
            (void)fs_->Rename(shared, name, shared, "n" + std::to_string(random() % 40), 0);
            break;
          case 4: {
            absl::StatusOr<struct stat> st = fs_->Lookup(shared, name);
            if (st.ok()) {
              AttributeChanges changes;
              changes.size = random() % 30000;
              (void)fs_->SetAttributes(st->st_ino, changes, Caller::Root());
              fs_->Forget(st->st_ino, 1);
            }
            break;
          }
          default: {
            absl::StatusOr<struct stat> st = fs_->Lookup(shared, name);
            if (st.ok()) {
              const std::string bytes = SeededBytes(random() % 9000, i + 7);
              (void)fs_->Write(st->st_ino, random() % 50000, bytes.data(), bytes.size(), false,
                               Caller::Root());
              fs_->Forget(st->st_ino, 1);
            }
            break;
          }
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  const std::map<std::string, std::string> before = Describe(*fs_, kRootInode, "");
  Successor successor = Load();
  ASSERT_TRUE(successor.loaded.ok()) << successor.loaded;
  EXPECT_EQ(Describe(*successor.fs, kRootInode, ""), before);
  EXPECT_EQ(successor.arena->Stats().blocks.used, arena_->Stats().blocks.used);
}

// An exchange leaves no trace of its own effect (both names are there
// either way), so its transaction names its request: a successor knows not
// to swap the names back when the kernel sends it again. A checkpoint
// (no request in flight) drops them.
TEST_F(FilesystemJournalTest, ASuccessorKnowsWhichExchangesWereDone) {
  const InodeNumber dir = Make(kRootInode, "d", S_IFDIR | 0755);
  WriteFile(dir, "a", "first");
  WriteFile(dir, "b", "second");
  ASSERT_TRUE(fs_->Rename(dir, "a", dir, "b", RENAME_EXCHANGE, 42).ok());
  ASSERT_TRUE(fs_->Rename(dir, "a", dir, "c", 0, 43).ok());  // no exchange
  {
    Successor successor = Load();
    ASSERT_TRUE(successor.loaded.ok()) << successor.loaded;
    EXPECT_TRUE(successor.fs->ExchangeDone(42));
    EXPECT_FALSE(successor.fs->ExchangeDone(43));
    EXPECT_EQ(Describe(*successor.fs, kRootInode, ""), Describe(*fs_, kRootInode, ""));
  }
  ASSERT_TRUE(fs_->CheckpointLog().ok());
  Successor successor = Load();
  ASSERT_TRUE(successor.loaded.ok()) << successor.loaded;
  EXPECT_FALSE(successor.fs->ExchangeDone(42));
}

// The journal has no record of a mapping another process holds, whose
// blocks a successor would free under it: such a mount shares none.
TEST_F(FilesystemJournalTest, NoFileIsSharedWithAnotherProcess) {
  const InodeNumber file = WriteFile(kRootInode, "f", SeededBytes(3 * kMiB, 10));
  const absl::StatusOr<std::unique_ptr<ExportedMemory>> shared = fs_->ExportShared(file);
  EXPECT_EQ(ToErrno(shared.status()), EOPNOTSUPP) << shared.status();
  EXPECT_NE(shared.status().message().find("read-only"), std::string::npos);
}

TEST_F(FilesystemJournalTest, ALogThatStoppedFollowingIsRefused) {
  WriteFile(kRootInode, "f", "x");
  log_->Abandon("a transaction did not fit");
  Successor successor = Load();
  EXPECT_TRUE(absl::IsFailedPrecondition(successor.loaded)) << successor.loaded;
  EXPECT_NE(successor.loaded.message().find("did not fit"), std::string::npos);
}

TEST(JournalReplayTest, BytesThatAreNoRecordsAreRefused) {
  ReplayReport report;
  EXPECT_TRUE(absl::IsDataLoss(ReplayJournal("", "", &report).status()));  // no root
  EXPECT_TRUE(absl::IsDataLoss(ReplayJournal("Z", "", &report).status()));
  std::string cut;
  PutVarint(&cut, 10);  // a transaction of 10 bytes, with 1
  cut.push_back('G');
  EXPECT_TRUE(absl::IsDataLoss(ReplayJournal("", cut, &report).status()));
  std::string gone_root;
  PutGoneRecord(1, &gone_root);
  EXPECT_TRUE(absl::IsDataLoss(ReplayJournal(gone_root, "", &report).status()));
}

// What a crash in the middle of racing operations can leave, mended into a
// tree: an entry whose inode's record never came, a link count its names
// contradict.
TEST_F(FilesystemJournalTest, ReplayMendsWhatACutTransactionLeft) {
  const InodeNumber dir = Make(kRootInode, "d", S_IFDIR | 0755);
  absl::StatusOr<MetadataLog::Contents> contents = log_->Read();
  ASSERT_TRUE(contents.ok());
  std::string transaction;
  PutEntryRecord(dir, "ghost", NextJournalSequence(), Directory::Entry{9999, S_IFREG}, 77,
                 &transaction);
  std::string journal = contents->journal;
  PutBytes(&journal, transaction);
  ReplayReport report;
  absl::StatusOr<std::string> image = ReplayJournal(contents->checkpoint, journal, &report);
  ASSERT_TRUE(image.ok()) << image.status();
  ASSERT_EQ(report.mended.size(), 1u);
  EXPECT_NE(report.mended[0].find("ghost"), std::string::npos) << report.mended[0];
  Successor successor = Load(&*image);
  ASSERT_TRUE(successor.loaded.ok()) << successor.loaded;
  EXPECT_FALSE(successor.fs->Lookup(dir, "ghost").ok());
}

// Records land in the order their transactions were appended, which is
// not always the order their states were read in: the higher number wins.
TEST_F(FilesystemJournalTest, TheNewerStateWinsWhateverOrderItLandedIn) {
  const InodeNumber dir = Make(kRootInode, "d", S_IFDIR | 0755);
  const InodeNumber file = WriteFile(dir, "f", "bytes");
  Successor successor = LoadWithRemovalLandedFirst(dir, "f", file, 3);
  ASSERT_TRUE(successor.loaded.ok()) << successor.loaded;
  EXPECT_FALSE(successor.fs->Lookup(dir, "f").ok());
}

TEST(MetadataLogTest, AnotherProcessFindsWhatWasAppended) {
  absl::StatusOr<std::unique_ptr<MetadataLog>> log = MetadataLog::Create();
  ASSERT_TRUE(log.ok()) << log.status();
  ASSERT_TRUE((*log)->Checkpoint("checkpoint").ok());
  ASSERT_TRUE((*log)->Append("one").ok());
  ASSERT_TRUE((*log)->Append("two").ok());
  absl::StatusOr<std::unique_ptr<MetadataLog>> adopted = MetadataLog::Adopt(dup((*log)->fd()));
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  absl::StatusOr<MetadataLog::Contents> contents = (*adopted)->Read();
  ASSERT_TRUE(contents.ok());
  EXPECT_EQ(contents->checkpoint, "checkpoint");
  absl::string_view journal = contents->journal;
  absl::string_view first, second;
  ASSERT_TRUE(GetBytes(&journal, &first) && GetBytes(&journal, &second));
  EXPECT_EQ(first, "one");
  EXPECT_EQ(second, "two");
  EXPECT_TRUE(journal.empty());
  // The successor appends where the first left off; a checkpoint empties
  // the journal.
  ASSERT_TRUE((*adopted)->Append("three").ok());
  EXPECT_EQ((*log)->journal_bytes(), contents->journal.size() + 6);
  ASSERT_TRUE((*adopted)->Checkpoint("again").ok());
  EXPECT_EQ((*log)->journal_bytes(), 0u);
  EXPECT_EQ((*log)->Read()->checkpoint, "again");
}

// A log an earlier version left (without 'H' records) is adopted, and
// marked as this version's, whose records it may now hold: the earlier
// binary refuses it then rather than misread it.
TEST(MetadataLogTest, ALogOfTheVersionBeforeIsAdoptedAndBecomesThisOnes) {
  absl::StatusOr<std::unique_ptr<MetadataLog>> log = MetadataLog::Create();
  ASSERT_TRUE(log.ok()) << log.status();
  ASSERT_TRUE((*log)->Checkpoint("checkpoint").ok());
  ASSERT_TRUE((*log)->Append("one").ok());
  constexpr char kThis[] = "cudafs metadata log 2";
  constexpr char kBefore[] = "cudafs metadata log 1";
  char magic[sizeof(kThis)] = {};
  ASSERT_EQ(pread((*log)->fd(), magic, sizeof(magic), 0), static_cast<ssize_t>(sizeof(magic)));
  EXPECT_STREQ(magic, kThis);
  ASSERT_EQ(pwrite((*log)->fd(), kBefore, sizeof(kBefore), 0),
            static_cast<ssize_t>(sizeof(kBefore)));
  absl::StatusOr<std::unique_ptr<MetadataLog>> adopted = MetadataLog::Adopt(dup((*log)->fd()));
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  EXPECT_EQ((*adopted)->Read()->checkpoint, "checkpoint");
  ASSERT_EQ(pread((*log)->fd(), magic, sizeof(magic), 0), static_cast<ssize_t>(sizeof(magic)));
  EXPECT_STREQ(magic, kThis);
  // A later version's is refused.
  constexpr char kLater[] = "cudafs metadata log 3";
  ASSERT_EQ(pwrite((*log)->fd(), kLater, sizeof(kLater), 0), static_cast<ssize_t>(sizeof(kLater)));
  EXPECT_TRUE(absl::IsInvalidArgument(MetadataLog::Adopt(dup((*log)->fd())).status()));
}

TEST(MetadataLogTest, WhatIsNoLogIsRefused) {
  const int memfd = memfd_create("not a log", MFD_CLOEXEC);
  ASSERT_GE(memfd, 0);
  ASSERT_EQ(ftruncate(memfd, 4096), 0);
  EXPECT_TRUE(absl::IsInvalidArgument(MetadataLog::Adopt(memfd).status()));
}

}  // namespace
}  // namespace cudafs

// Filesystem images (Filesystem::SaveImage, LoadImage): a filesystem saved,
// its process gone, and a successor on the same device memory that finds
// every name, attribute, reference count and byte as they were, and refuses
// images that are not one without touching that memory.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "alloc/base/errors.h"
#include "alloc/devices/device_wrapper.h"
#include "alloc/devices/host_device.h"
#include "alloc/storage/arena.h"
#include "fs/core/filesystem.h"
#include "tests/fs/core/filesystem_trees.h"
#include "gtest/gtest.h"

namespace cudafs {
namespace {

constexpr uint64_t kMinBlock = 4096;
constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kArenaBytes = 64 * kMiB;

// What a process that dies leaves of the device memory: its decommits do
// not happen (the process is gone), so the bytes stay for a successor.
class OutlivedDevice final : public DeviceWrapper {
 public:
  using DeviceWrapper::DeviceWrapper;
  absl::Status Decommit(uint64_t, uint64_t) override { return absl::OkStatus(); }
};

// The same, once reading the tree moved no atime any more (relatime moves
// it on the first read after a change).
std::map<std::string, std::string> Described(Filesystem& fs) {
  DescribeTree(fs, kRootInode, "");
  return DescribeTree(fs, kRootInode, "");
}

class FilesystemImageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<HostDevice>> device = HostDevice::Create(kArenaBytes);
    ASSERT_TRUE(device.ok()) << device.status();
    device_ = std::move(*device);
    first_device_ = std::make_unique<OutlivedDevice>(device_.get());
    first_arena_ = std::make_unique<Arena>(first_device_.get(), kMinBlock);
    FilesystemConfig config;
    config.cache_bytes = 4 * kMiB;  // dirty pages the image must not miss
    first_ = std::make_unique<Filesystem>(first_arena_.get(), config);
  }

  // The first filesystem's process ends; the successor starts on the same
  // memory with nothing yet.
  void EndFirst() {
    first_.reset();
    first_arena_.reset();
    successor_arena_ = std::make_unique<Arena>(device_.get(), kMinBlock);
    FilesystemConfig config;
    config.cache_bytes = 4 * kMiB;
    successor_ = std::make_unique<Filesystem>(successor_arena_.get(), config);
  }

  InodeNumber Make(InodeNumber parent, const std::string& name, mode_t mode, dev_t rdev = 0) {
    return MakeIn(*first_, parent, name, mode, rdev);
  }
  InodeNumber WriteFile(InodeNumber parent, const std::string& name, const std::string& bytes,
                        uint64_t offset = 0) {
    return WriteNewFile(*first_, parent, name, bytes, offset);
  }

  // A tree with one of everything a filesystem holds.
  void BuildTree() {
    const InodeNumber dir = Make(kRootInode, "dir", S_IFDIR | 02775);
    const InodeNumber sub = Make(dir, "sub", S_IFDIR | 0700);
    WriteFile(kRootInode, "small", "hello, image");          // in the cache
    WriteFile(dir, "large", SeededBytes(3 * kMiB + 17, 1));         // in the arena
    WriteFile(sub, "sparse", SeededBytes(5000, 2), 10 * kMiB);      // a hole first
    const InodeNumber linked = WriteFile(dir, "linked", SeededBytes(70000, 3));
    ASSERT_TRUE(first_->Link(linked, sub, "second name").ok());
    ASSERT_TRUE(first_->SymbolicLink(kRootInode, "short link", "dir/large", Caller::Root()).ok());
    ASSERT_TRUE(
        first_->SymbolicLink(sub, "long link", std::string(3000, 'x'), Caller::Root()).ok());
    Make(kRootInode, "fifo", S_IFIFO | 0600);
    Make(dir, "null", S_IFCHR | 0666, makedev(1, 3));
    ASSERT_TRUE(first_->SetExtendedAttribute(linked, "user.colour", "blue", 0).ok());
    ASSERT_TRUE(first_->SetExtendedAttribute(dir, "trusted.x", std::string("\0\1", 2), 0).ok());
    AttributeChanges changes;
    changes.uid = 1000;
    changes.gid = 100;
    changes.mtime = AttributeChanges::Time{false, timespec{1234567890, 123456789}};
    ASSERT_TRUE(first_->SetAttributes(linked, changes, Caller::Root()).ok());
    for (int i = 0; i < 100; ++i) WriteFile(sub, "f" + std::to_string(i), SeededBytes(i * 97, i));
  }

  std::unique_ptr<HostDevice> device_;
  std::unique_ptr<OutlivedDevice> first_device_;
  std::unique_ptr<Arena> first_arena_;
  std::unique_ptr<Filesystem> first_;
  std::unique_ptr<Arena> successor_arena_;
  std::unique_ptr<Filesystem> successor_;
};

TEST_F(FilesystemImageTest, ASuccessorSeesEveryNameAttributeAndByte) {
  BuildTree();
  const std::map<std::string, std::string> before = Described(*first_);
  const ArenaStats arena_before = first_arena_->Stats();
  const struct statvfs statfs_before = first_->StatFs();
  absl::StatusOr<std::string> image = first_->SaveImage();
  ASSERT_TRUE(image.ok()) << image.status();
  EndFirst();
  ASSERT_TRUE(successor_->LoadImage(*image).ok());
  EXPECT_EQ(Described(*successor_), before);
  EXPECT_EQ(successor_arena_->Stats().blocks.used, arena_before.blocks.used);
  const struct statvfs statfs_after = successor_->StatFs();
  EXPECT_EQ(statfs_after.f_bfree, statfs_before.f_bfree);
  EXPECT_EQ(statfs_after.f_files, statfs_before.f_files);
  EXPECT_EQ(statfs_after.f_ffree, statfs_before.f_ffree);

  // And it goes on as a filesystem: new inodes take new numbers, and
  // what is deleted gives its blocks back.
  absl::StatusOr<struct stat> fresh =
      successor_->MakeNode(kRootInode, "fresh", S_IFREG | 0600, 0, Caller::Root());
  ASSERT_TRUE(fresh.ok());
  for (const auto& [path, description] : before) {
    EXPECT_EQ(description.find(absl::StrFormat("ino %d ", fresh->st_ino)), std::string::npos)
        << "inode number reused: " << path;
  }
  absl::StatusOr<struct stat> dir = successor_->Lookup(kRootInode, "dir");
  ASSERT_TRUE(dir.ok());
  absl::StatusOr<struct stat> large = successor_->Lookup(dir->st_ino, "large");
  ASSERT_TRUE(large.ok());
  ASSERT_TRUE(successor_->Unlink(dir->st_ino, "large").ok());
  EXPECT_EQ(successor_arena_->Stats().blocks.used, arena_before.blocks.used)
      << "the kernel still holds the lookups of its creation and of ours";
  successor_->Forget(large->st_ino, 2);
  EXPECT_EQ(successor_arena_->Stats().blocks.used, arena_before.blocks.used - 4 * kMiB);
}

TEST_F(FilesystemImageTest, ReferenceCountsAndCookiesCarryOver) {
  BuildTree();
  // An open file with no name, a looked-up one, and a listing half read.
  absl::StatusOr<struct stat> gone =
      first_->Create(kRootInode, "gone", S_IFREG | 0600, O_RDWR, Caller::Root());
  ASSERT_TRUE(gone.ok());
  const std::string bytes = SeededBytes(9000, 9);
  ASSERT_TRUE(first_->Write(gone->st_ino, 0, bytes.data(), bytes.size(), false, Caller::Root()).ok());
  ASSERT_TRUE(first_->Unlink(kRootInode, "gone").ok());
  absl::StatusOr<struct stat> sub_dir = first_->Lookup(kRootInode, "dir");
  ASSERT_TRUE(sub_dir.ok());
  absl::StatusOr<struct stat> sub = first_->Lookup(sub_dir->st_ino, "sub");
  ASSERT_TRUE(sub.ok());
  std::vector<std::string> first_half;
  uint64_t resume = 0;
  ASSERT_TRUE(first_->ReadDirectory(sub->st_ino, 0, false, [&](const DirectoryEntry& entry) {
                      if (first_half.size() == 50) return false;
                      first_half.push_back(entry.name);
                      resume = entry.next_cookie;
                      return true;
                    }).ok());
  absl::StatusOr<std::string> image = first_->SaveImage();
  ASSERT_TRUE(image.ok()) << image.status();
  EndFirst();
  ASSERT_TRUE(successor_->LoadImage(*image).ok());

  std::vector<std::string> rest;
  ASSERT_TRUE(successor_->ReadDirectory(sub->st_ino, resume, false, [&](const DirectoryEntry& entry) {
                          rest.push_back(entry.name);
                          return true;
                        }).ok());
  std::vector<std::string> whole;
  ASSERT_TRUE(successor_->ReadDirectory(sub->st_ino, 0, false, [&](const DirectoryEntry& entry) {
                          whole.push_back(entry.name);
                          return true;
                        }).ok());
  first_half.insert(first_half.end(), rest.begin(), rest.end());
  EXPECT_EQ(first_half, whole);

  // The open file is still there to read, and goes with its last handle.
  std::string read(bytes.size(), '\0');
  absl::StatusOr<size_t> got = successor_->Read(gone->st_ino, 0, read.size(), read.data());
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(read, bytes);
  const uint64_t used = successor_arena_->Stats().blocks.used;
  successor_->Release(gone->st_ino);
  successor_->Forget(gone->st_ino, 1);
  EXPECT_EQ(ToErrno(successor_->GetAttributes(gone->st_ino).status()), ENOENT);
  EXPECT_LT(successor_arena_->Stats().blocks.used, used);
  // The looked-up directory stays until its lookups are forgotten.
  EXPECT_TRUE(successor_->GetAttributes(sub->st_ino).ok());
}

TEST_F(FilesystemImageTest, AFileAnotherProcessMapsKeepsTheImageFromBeingMade) {
  const InodeNumber ino = WriteFile(kRootInode, "model", SeededBytes(4 * kMiB, 4));
  absl::StatusOr<std::unique_ptr<ExportedMemory>> exported = first_->ExportShared(ino);
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_TRUE(absl::IsFailedPrecondition(first_->SaveImage().status()));
}

TEST_F(FilesystemImageTest, AnImageLoadsOnlyIntoAnEmptyFilesystem) {
  BuildTree();
  absl::StatusOr<std::string> image = first_->SaveImage();
  ASSERT_TRUE(image.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(first_->LoadImage(*image)));
}

// Images cut short or damaged anywhere are refused with nothing claimed:
// the memory (which a predecessor may still serve) keeps every byte, and
// the real image loads after them.
TEST_F(FilesystemImageTest, DamagedImagesAreRefusedWithoutTouchingTheMemory) {
  BuildTree();
  const std::map<std::string, std::string> before = Described(*first_);
  absl::StatusOr<std::string> image = first_->SaveImage();
  ASSERT_TRUE(image.ok());
  EndFirst();
  std::mt19937 random(7);
  // Loads that succeed are kept to the end: their blocks would be freed,
  // and decommitted, with them.
  struct Loaded {
    std::unique_ptr<Arena> arena;
    std::unique_ptr<Filesystem> fs;
  };
  std::vector<Loaded> loaded;
  for (int trial = 0; trial < 300; ++trial) {
    std::string damaged = *image;
    if (trial % 2 == 0) {
      damaged.resize(random() % damaged.size());
    } else {
      damaged[random() % damaged.size()] ^= static_cast<char>(1 + random() % 255);
    }
    Loaded attempt;
    attempt.arena = std::make_unique<Arena>(device_.get(), kMinBlock);
    attempt.fs = std::make_unique<Filesystem>(attempt.arena.get(), FilesystemConfig());
    const absl::Status status = attempt.fs->LoadImage(damaged);
    if (status.ok()) {
      // A change the format cannot see (a byte of a time, a mode bit).
      loaded.push_back(std::move(attempt));
      continue;
    }
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
    EXPECT_EQ(attempt.arena->Stats().blocks.used, 0u) << status;
  }
  EXPECT_LT(loaded.size(), 100u);
  ASSERT_TRUE(successor_->LoadImage(*image).ok());
  EXPECT_EQ(Described(*successor_), before);
}

// Reads exactly `size` bytes, or fails the test.
bool ReadAll(int fd, void* out, size_t size) {
  char* at = static_cast<char*>(out);
  while (size > 0) {
    const ssize_t n = read(fd, at, size);
    if (n <= 0) return false;
    at += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

void WriteAll(int fd, const void* data, size_t size) {
  const char* at = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = write(fd, at, size);
    if (n <= 0) _exit(3);
    at += n;
    size -= static_cast<size_t>(n);
  }
}

void SendString(int fd, const std::string& bytes) {
  const uint64_t size = bytes.size();
  WriteAll(fd, &size, sizeof(size));
  WriteAll(fd, bytes.data(), bytes.size());
}

bool ReceiveString(int fd, std::string* bytes) {
  uint64_t size = 0;
  if (!ReadAll(fd, &size, sizeof(size))) return false;
  bytes->resize(size);
  return ReadAll(fd, bytes->data(), size);
}

// The keeper's part: another process holds the arena's memfd while the
// process that wrote the files dies by SIGKILL, and a successor process
// finds them in it through the image.
TEST(FilesystemImageProcessTest, FilesOutliveTheProcessThatWroteThemWhileTheMemoryIsHeld) {
  absl::StatusOr<std::unique_ptr<HostDevice>> keeper = HostDevice::Create(kArenaBytes);
  ASSERT_TRUE(keeper.ok());
  const int memfd = (*keeper)->memory();
  int channel[2];
  ASSERT_EQ(pipe(channel), 0);
  const pid_t writer = fork();
  ASSERT_GE(writer, 0);
  if (writer == 0) {
    close(channel[0]);
    std::unique_ptr<HostDevice> device = HostDevice::Adopt(dup(memfd)).value();
    Arena arena(device.get(), kMinBlock);
    FilesystemConfig config;
    config.cache_bytes = 4 * kMiB;
    Filesystem fs(&arena, config);
    std::mt19937 random(11);
    InodeNumber dir = fs.MakeDirectory(kRootInode, "dir", 0755, Caller::Root()).value().st_ino;
    for (int i = 0; i < 40; ++i) {
      const InodeNumber ino =
          fs.MakeNode(i % 2 ? dir : kRootInode, "f" + std::to_string(i), S_IFREG | 0644, 0,
                      Caller::Root())
              .value()
              .st_ino;
      std::string bytes(static_cast<size_t>(random() % (3 * kMiB)), '\0');
      for (char& c : bytes) c = static_cast<char>(random());
      if (!fs.Write(ino, random() % 10000, bytes.data(), bytes.size(), false, Caller::Root()).ok()) {
        _exit(4);
      }
    }
    std::string description;
    for (const auto& [path, what] : Described(fs)) absl::StrAppend(&description, path, "\t", what, "\n");
    absl::StatusOr<std::string> image = fs.SaveImage();
    if (!image.ok()) _exit(5);
    SendString(channel[1], *image);
    SendString(channel[1], description);
    pause();  // until killed
    _exit(6);
  }
  close(channel[1]);
  std::string image, description;
  const bool received = ReceiveString(channel[0], &image) && ReceiveString(channel[0], &description);
  kill(writer, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(writer, &status, 0), writer);
  close(channel[0]);
  ASSERT_TRUE(received) << "the writer ended with status " << status;
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

  std::unique_ptr<HostDevice> device = HostDevice::Adopt(dup(memfd)).value();
  Arena arena(device.get(), kMinBlock);
  Filesystem successor(&arena, FilesystemConfig());
  ASSERT_TRUE(successor.LoadImage(image).ok());
  std::string found;
  for (const auto& [path, what] : Described(successor)) absl::StrAppend(&found, path, "\t", what, "\n");
  EXPECT_EQ(found, description);
}

}  // namespace
}  // namespace cudafs

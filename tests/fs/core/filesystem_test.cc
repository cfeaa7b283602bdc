// Tests of the cudafs core (fs/core/filesystem.h) without mounting: a Filesystem
// over an Arena over a HostDevice, driven method by method with root and
// non-root callers. Expected errnos follow tmpfs/Linux.
#include "fs/core/filesystem.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "alloc/base/errors.h"
#include "alloc/devices/host_device.h"
#include "alloc/storage/arena.h"
#include "gtest/gtest.h"
#include "tests/support/recording_notifier.h"

namespace cudafs {
namespace {

constexpr uint64_t kMinBlock = 4096;
constexpr uint64_t kMiB = 1 << 20;

absl::Status StatusOf(const absl::Status& status) { return status; }
template <typename T>
absl::Status StatusOf(const absl::StatusOr<T>& result) {
  return result.status();
}
template <typename T>
int Errno(const T& result) {
  return ToErrno(StatusOf(result));
}

#define ASSERT_OK(expr)                                     \
  do {                                                      \
    const absl::Status assert_ok_status = StatusOf(expr);   \
    ASSERT_TRUE(assert_ok_status.ok()) << assert_ok_status; \
  } while (0)

#define FS_TEST_CONCAT_INNER(a, b) a##b
#define FS_TEST_CONCAT(a, b) FS_TEST_CONCAT_INNER(a, b)
#define ASSERT_OK_AND_ASSIGN(lhs, expr)               \
  auto FS_TEST_CONCAT(result_, __LINE__) = (expr);    \
  ASSERT_TRUE(FS_TEST_CONCAT(result_, __LINE__).ok()) \
      << FS_TEST_CONCAT(result_, __LINE__).status();  \
  lhs = std::move(*FS_TEST_CONCAT(result_, __LINE__))

bool Later(const timespec& a, const timespec& b) {
  return a.tv_sec > b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec > b.tv_nsec);
}
bool Same(const timespec& a, const timespec& b) {
  return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

constexpr timespec kLongAgo = {1000000000, 111111111};

class FilesystemTest : public ::testing::Test {
 protected:
  void SetUp() override { Build(64 * kMiB, FilesystemConfig{}); }

  void Build(uint64_t arena_size, FilesystemConfig config) {
    fs_.reset();
    arena_.reset();
    absl::StatusOr<std::unique_ptr<HostDevice>> device = HostDevice::Create(arena_size);
    ASSERT_TRUE(device.ok()) << device.status();
    device_ = std::move(*device);
    arena_ = std::make_unique<Arena>(device_.get(), kMinBlock);
    fs_ = std::make_unique<Filesystem>(arena_.get(), config);
  }

  // A closed regular file, with the lookup reference Create leaves.
  InodeNumber NewFile(InodeNumber parent, absl::string_view name, mode_t mode = 0644,
                      const Caller& caller = Caller::Root()) {
    absl::StatusOr<struct stat> st = fs_->Create(parent, name, mode, O_WRONLY, caller);
    if (!st.ok()) {
      ADD_FAILURE() << "Create " << name << ": " << st.status();
      return 0;
    }
    fs_->Release(st->st_ino);
    return st->st_ino;
  }

  InodeNumber NewDirectory(InodeNumber parent, absl::string_view name, mode_t mode = 0755,
                           const Caller& caller = Caller::Root()) {
    absl::StatusOr<struct stat> st = fs_->MakeDirectory(parent, name, mode, caller);
    if (!st.ok()) {
      ADD_FAILURE() << "MakeDirectory " << name << ": " << st.status();
      return 0;
    }
    return st->st_ino;
  }

  void WriteAt(InodeNumber ino, uint64_t offset, absl::string_view data,
               const Caller& caller = Caller::Root()) {
    absl::StatusOr<size_t> written =
        fs_->Write(ino, offset, data.data(), data.size(), /*append=*/false, caller);
    ASSERT_TRUE(written.ok()) << written.status();
    ASSERT_EQ(*written, data.size());
  }

  std::string ReadAt(InodeNumber ino, uint64_t offset, size_t size) {
    std::string out(size, '\x7f');
    absl::StatusOr<size_t> got = fs_->Read(ino, offset, size, out.data());
    if (!got.ok()) {
      ADD_FAILURE() << "Read: " << got.status();
      return "";
    }
    out.resize(*got);
    return out;
  }

  std::string ReadAll(InodeNumber ino) { return ReadAt(ino, 0, Stat(ino).st_size); }

  struct stat Stat(InodeNumber ino) {
    absl::StatusOr<struct stat> st = fs_->GetAttributes(ino);
    if (!st.ok()) {
      ADD_FAILURE() << "GetAttributes " << ino << ": " << st.status();
      return {};
    }
    return *st;
  }

  InodeNumber InodeOf(InodeNumber parent, absl::string_view name) {
    absl::StatusOr<struct stat> st = fs_->Lookup(parent, name);
    if (!st.ok()) return 0;
    fs_->Forget(st->st_ino, 1);
    return st->st_ino;
  }

  // Names in `dir` other than "." and "..", in readdir order.
  std::vector<std::string> List(InodeNumber dir) {
    std::vector<std::string> names;
    absl::Status status = fs_->ReadDirectory(dir, 0, false, [&](const DirectoryEntry& entry) {
      if (entry.name != "." && entry.name != "..") names.push_back(entry.name);
      return true;
    });
    EXPECT_TRUE(status.ok()) << status;
    return names;
  }

  // Sets every timestamp of `ino` to kLongAgo, so later changes are visible
  // without sleeping.
  void Age(InodeNumber ino) {
    AttributeChanges changes;
    changes.atime = AttributeChanges::Time{false, kLongAgo};
    changes.mtime = AttributeChanges::Time{false, kLongAgo};
    changes.ctime = kLongAgo;
    ASSERT_OK(fs_->SetAttributes(ino, changes, Caller::Root()));
  }

  AttributeChanges Mode(mode_t mode) {
    AttributeChanges changes;
    changes.mode = mode;
    return changes;
  }

  AttributeChanges Owner(std::optional<uid_t> uid, std::optional<gid_t> gid) {
    AttributeChanges changes;
    changes.uid = uid;
    changes.gid = gid;
    return changes;
  }

  AttributeChanges Size(uint64_t size) {
    AttributeChanges changes;
    changes.size = size;
    return changes;
  }

  const Caller root_ = Caller::Root();
  const Caller alice_{1000, 1000};
  const Caller bob_{1001, 1001};

  std::unique_ptr<HostDevice> device_;
  std::unique_ptr<Arena> arena_;
  std::unique_ptr<Filesystem> fs_;
};

// ---------------------------------------------------------------------------
// Lookup, Forget and inode lifetime

TEST_F(FilesystemTest, LookupFindsNamesAndDots) {
  const InodeNumber dir = NewDirectory(kRootInode, "d");
  const InodeNumber file = NewFile(dir, "f");
  ASSERT_OK_AND_ASSIGN(struct stat found, fs_->Lookup(kRootInode, "d"));
  EXPECT_EQ(found.st_ino, dir);
  EXPECT_TRUE(S_ISDIR(found.st_mode));
  ASSERT_OK_AND_ASSIGN(found, fs_->Lookup(dir, "f"));
  EXPECT_EQ(found.st_ino, file);
  EXPECT_TRUE(S_ISREG(found.st_mode));
  ASSERT_OK_AND_ASSIGN(found, fs_->Lookup(dir, "."));
  EXPECT_EQ(found.st_ino, dir);
  ASSERT_OK_AND_ASSIGN(found, fs_->Lookup(dir, ".."));
  EXPECT_EQ(found.st_ino, kRootInode);
  ASSERT_OK_AND_ASSIGN(found, fs_->Lookup(kRootInode, ".."));
  EXPECT_EQ(found.st_ino, kRootInode);

  EXPECT_EQ(Errno(fs_->Lookup(dir, "missing")), ENOENT);
  EXPECT_EQ(Errno(fs_->Lookup(file, "x")), ENOTDIR);
  EXPECT_EQ(Errno(fs_->Lookup(987654, "x")), ENOENT);
  EXPECT_EQ(Errno(fs_->GetAttributes(987654)), ENOENT);
}

TEST_F(FilesystemTest, UnlinkedFileLivesUntilLastForget) {
  const InodeNumber ino = NewFile(kRootInode, "f");  // one lookup reference
  WriteAt(ino, 0, "hello");
  ASSERT_OK(fs_->Lookup(kRootInode, "f"));  // two
  ASSERT_OK(fs_->Lookup(kRootInode, "f"));  // three
  ASSERT_OK(fs_->Unlink(kRootInode, "f"));
  EXPECT_EQ(Errno(fs_->Lookup(kRootInode, "f")), ENOENT);

  EXPECT_EQ(Stat(ino).st_nlink, 0u);
  EXPECT_EQ(ReadAll(ino), "hello");
  WriteAt(ino, 5, " again");
  EXPECT_EQ(ReadAll(ino), "hello again");

  fs_->Forget(ino, 2);
  EXPECT_EQ(ReadAll(ino), "hello again");
  fs_->Forget(ino, 1);
  EXPECT_EQ(Errno(fs_->GetAttributes(ino)), ENOENT);
  char byte;
  EXPECT_EQ(Errno(fs_->Read(ino, 0, 1, &byte)), ENOENT);
  EXPECT_EQ(Errno(fs_->Write(ino, 0, "x", 1, false, root_)), ENOENT);
}

TEST_F(FilesystemTest, UnlinkedOpenFileLivesUntilRelease) {
  const struct statvfs before = fs_->StatFs();
  ASSERT_OK_AND_ASSIGN(struct stat st, fs_->Create(kRootInode, "f", 0644, O_RDWR, root_));
  const InodeNumber ino = st.st_ino;
  WriteAt(ino, 0, std::string(64 * 1024, 'a'));
  ASSERT_OK(fs_->Open(ino, O_RDONLY, root_));  // a second handle
  fs_->Forget(ino, 1);                         // the kernel forgets early
  ASSERT_OK(fs_->Unlink(kRootInode, "f"));
  EXPECT_LT(fs_->StatFs().f_bfree, before.f_bfree);

  fs_->Release(ino);
  EXPECT_EQ(ReadAt(ino, 1000, 3), "aaa");
  fs_->Release(ino);
  EXPECT_EQ(Errno(fs_->GetAttributes(ino)), ENOENT);
  // The data went back to the arena with the inode.
  EXPECT_EQ(fs_->StatFs().f_bfree, before.f_bfree);
}

// zero_message_open: the kernel sends no RELEASE, so Create counts no
// handle, and the file goes with its last name and lookup reference.
TEST_F(FilesystemTest, UncountedCreateLivesByNameAndLookupsAlone) {
  const struct statvfs before = fs_->StatFs();
  ASSERT_OK_AND_ASSIGN(struct stat st, fs_->Create(kRootInode, "f", 0644, O_RDWR, root_,
                                                   Filesystem::Handle::kUncounted));
  const InodeNumber ino = st.st_ino;
  WriteAt(ino, 0, std::string(5 * kMiB, 'a'));
  ASSERT_OK(fs_->Unlink(kRootInode, "f"));
  EXPECT_EQ(ReadAt(ino, 1000, 3), "aaa") << "the kernel's reference keeps it while open";
  fs_->Forget(ino, 1);
  EXPECT_EQ(Errno(fs_->GetAttributes(ino)), ENOENT);
  EXPECT_EQ(fs_->StatFs().f_bfree, before.f_bfree);
}

// Without RELEASE, growth slack goes once the file has been idle.
TEST_F(FilesystemTest, TrimIdleGrowthGivesBackSlackOfIdleFilesOnly) {
  FilesystemConfig config;
  config.trim_growth_when_idle = true;
  Build(64 * kMiB, config);
  ASSERT_OK_AND_ASSIGN(struct stat st, fs_->Create(kRootInode, "f", 0644, O_RDWR, root_,
                                                   Filesystem::Handle::kUncounted));
  const InodeNumber ino = st.st_ino;
  for (uint64_t at = 0; at < 3 * kMiB + 100; at += 64 * 1024) {
    WriteAt(ino, at, std::string(std::min<uint64_t>(64 * 1024, 3 * kMiB + 100 - at), 'a'));
  }
  const uint64_t held = Stat(ino).st_blocks * 512;
  ASSERT_GT(held, 3 * kMiB + kMinBlock) << "appends earn growth slack";
  fs_->TrimIdleGrowth(absl::Hours(1));
  EXPECT_EQ(uint64_t(Stat(ino).st_blocks * 512), held) << "written just now";
  fs_->TrimIdleGrowth(absl::ZeroDuration());
  EXPECT_EQ(Stat(ino).st_blocks * 512, 3 * kMiB + kMinBlock);
  EXPECT_EQ(ReadAll(ino), std::string(3 * kMiB + 100, 'a'));
}

// The kernel turns a file handle back into an inode with a lookup of "."
// under that inode (NFS export, open_by_handle_at): any type, while named.
TEST_F(FilesystemTest, DotOfAnyInodeIsItselfWhileItHasAName) {
  const InodeNumber file = NewFile(kRootInode, "f");
  const InodeNumber dir = NewDirectory(kRootInode, "d");
  ASSERT_OK_AND_ASSIGN(struct stat st, fs_->Lookup(file, "."));  // a directory's: above
  EXPECT_EQ(st.st_ino, file);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(Errno(fs_->Lookup(file, "..")), ENOTDIR) << "only directories have parents";
  ASSERT_OK(fs_->Unlink(kRootInode, "f"));
  EXPECT_EQ(Errno(fs_->Lookup(file, ".")), ENOENT) << "removed: the handle is stale";
  ASSERT_OK(fs_->RemoveDirectory(kRootInode, "d"));
  EXPECT_EQ(Errno(fs_->Lookup(dir, ".")), ENOENT);
  EXPECT_EQ(Errno(fs_->Lookup(987654, ".")), ENOENT);
}

// kernel nfsd reconnects a directory found by handle to the tree by looking
// up ".." in it, so ".." must follow the directory when it moves.
TEST_F(FilesystemTest, DotDotIsTheParentAfterARename) {
  const InodeNumber from = NewDirectory(kRootInode, "from");
  const InodeNumber to = NewDirectory(kRootInode, "to");
  const InodeNumber dir = NewDirectory(from, "d");
  ASSERT_OK(fs_->Rename(from, "d", to, "moved", 0));
  ASSERT_OK_AND_ASSIGN(struct stat found, fs_->Lookup(dir, ".."));
  EXPECT_EQ(found.st_ino, to);
}

TEST_F(FilesystemTest, LinkedInodeSurvivesForgetOfAllReferences) {
  const InodeNumber ino = NewFile(kRootInode, "f");
  fs_->Forget(ino, 100);  // more than it has: clamps, the name keeps it
  EXPECT_EQ(Stat(ino).st_nlink, 1u);
  fs_->Forget(987654, 1);  // unknown inodes are ignored
  ASSERT_OK_AND_ASSIGN(struct stat found, fs_->Lookup(kRootInode, "f"));
  EXPECT_EQ(found.st_ino, ino);
}

TEST_F(FilesystemTest, EveryEntryReplyAddsOneLookup) {
  const InodeNumber dir = NewDirectory(kRootInode, "d");
  const InodeNumber file = NewFile(kRootInode, "file");
  std::vector<InodeNumber> made;
  ASSERT_OK_AND_ASSIGN(struct stat st, fs_->MakeNode(kRootInode, "node", S_IFIFO | 0644, 0, root_));
  made.push_back(st.st_ino);
  ASSERT_OK_AND_ASSIGN(st, fs_->SymbolicLink(kRootInode, "link", "target", root_));
  made.push_back(st.st_ino);
  ASSERT_OK(fs_->Unlink(kRootInode, "node"));
  ASSERT_OK(fs_->Unlink(kRootInode, "link"));
  ASSERT_OK(fs_->RemoveDirectory(kRootInode, "d"));
  made.push_back(dir);
  for (InodeNumber ino : made) {
    EXPECT_EQ(Stat(ino).st_nlink, 0u);
    fs_->Forget(ino, 1);
    EXPECT_EQ(Errno(fs_->GetAttributes(ino)), ENOENT) << ino;
  }
  // Link replies with an entry too: two references now.
  ASSERT_OK(fs_->Link(file, kRootInode, "again"));
  ASSERT_OK(fs_->Unlink(kRootInode, "file"));
  ASSERT_OK(fs_->Unlink(kRootInode, "again"));
  fs_->Forget(file, 1);
  EXPECT_EQ(Stat(file).st_nlink, 0u);
  fs_->Forget(file, 1);
  EXPECT_EQ(Errno(fs_->GetAttributes(file)), ENOENT);
}

TEST_F(FilesystemTest, InodeNumbersAreNeverReused) {
  std::set<InodeNumber> seen = {kRootInode};
  for (int i = 0; i < 20; ++i) {
    const InodeNumber ino = NewFile(kRootInode, "f");
    EXPECT_TRUE(seen.insert(ino).second) << ino;
    ASSERT_OK(fs_->Unlink(kRootInode, "f"));
    fs_->Forget(ino, 1);
  }
}

// ---------------------------------------------------------------------------
// Attributes

TEST_F(FilesystemTest, RootAttributesComeFromConfig) {
  struct stat st = Stat(kRootInode);
  EXPECT_EQ(st.st_mode, S_IFDIR | 01777);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_nlink, 2u);

  FilesystemConfig config;
  config.root_mode = 0750;
  config.root_uid = 1000;
  config.root_gid = 2000;
  Build(8 * kMiB, config);
  st = Stat(kRootInode);
  EXPECT_EQ(st.st_mode, S_IFDIR | 0750);
  EXPECT_EQ(st.st_uid, 1000u);
  EXPECT_EQ(st.st_gid, 2000u);
}

TEST_F(FilesystemTest, NewFileAttributes) {
  ASSERT_OK_AND_ASSIGN(struct stat st, fs_->Create(kRootInode, "f", 0640, O_WRONLY, alice_));
  fs_->Release(st.st_ino);
  EXPECT_EQ(st.st_mode, S_IFREG | 0640);
  EXPECT_EQ(st.st_uid, 1000u);
  EXPECT_EQ(st.st_gid, 1000u);
  EXPECT_EQ(st.st_nlink, 1u);
  EXPECT_EQ(st.st_size, 0);
  EXPECT_EQ(st.st_blocks, 0);
  EXPECT_TRUE(Same(st.st_mtim, st.st_ctim));
  EXPECT_TRUE(Same(st.st_atim, st.st_ctim));
  const struct stat again = Stat(st.st_ino);
  EXPECT_EQ(again.st_ino, st.st_ino);
  EXPECT_EQ(again.st_mode, st.st_mode);
  EXPECT_TRUE(Same(again.st_mtim, st.st_mtim));
}

TEST_F(FilesystemTest, ChmodChangesPermissionBitsOnly) {
  const InodeNumber ino = NewFile(kRootInode, "f", 0644, alice_);
  Age(ino);
  ASSERT_OK_AND_ASSIGN(struct stat st, fs_->SetAttributes(ino, Mode(S_IFDIR | 0600), alice_));
  EXPECT_EQ(st.st_mode, S_IFREG | 0600);  // the type never changes
  EXPECT_TRUE(Later(st.st_ctim, kLongAgo));
  EXPECT_TRUE(Same(st.st_mtim, kLongAgo));  // chmod is not a data change
  ASSERT_OK_AND_ASSIGN(st, fs_->SetAttributes(ino, Mode(04755), root_));
  EXPECT_EQ(st.st_mode, S_IFREG | 04755);
}

// Who may do what is the kernel's decision (default_permissions, with the
// caller's capabilities); the core carries out whatever reaches it, so a
// process with CAP_DAC_OVERRIDE, CAP_FOWNER or CAP_CHOWN is not refused
// for its uid.
TEST_F(FilesystemTest, PermissionsAreLeftToTheKernel) {
  const InodeNumber locked = NewDirectory(kRootInode, "locked", 0700);
  const InodeNumber ino = NewFile(locked, "f", 0600);
  WriteAt(ino, 0, "private");
  ASSERT_OK(fs_->Lookup(locked, "f"));
  ASSERT_OK(fs_->Open(ino, O_RDWR, bob_));
  fs_->Release(ino);
  EXPECT_EQ(ReadAll(ino), "private");
  ASSERT_OK_AND_ASSIGN(struct stat st, fs_->SetAttributes(ino, Mode(02755), bob_));
  EXPECT_EQ(st.st_mode & 07777, 02755u);  // the kernel strips setgid where it must
  ASSERT_OK_AND_ASSIGN(st, fs_->SetAttributes(ino, Owner(1001, 1001), bob_));
  EXPECT_EQ(st.st_uid, 1001u);
  ASSERT_OK(fs_->Create(locked, "g", 0644, O_WRONLY, bob_));
  ASSERT_OK(fs_->MakeNode(locked, "null", S_IFCHR | 0666, makedev(1, 3), bob_));
  const InodeNumber sticky = NewDirectory(kRootInode, "sticky", 01777);
  NewFile(sticky, "roots");
  ASSERT_OK(fs_->Unlink(sticky, "roots"));
  ASSERT_OK(fs_->SetExtendedAttribute(ino, "trusted.t", "x", 0));
  ASSERT_OK(fs_->SetExtendedAttribute(ino, "security.s", "y", 0));
}

TEST_F(FilesystemTest, ChownDropsSetIdBitsOfFilesEvenForRoot) {
  const InodeNumber exec = NewFile(kRootInode, "exec", 06755);
  ASSERT_OK_AND_ASSIGN(struct stat st, fs_->SetAttributes(exec, Owner(1000, 1000), root_));
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  // Without group-execute, setgid means mandatory locking and stays.
  const InodeNumber locking = NewFile(kRootInode, "locking", 02644);
  ASSERT_OK_AND_ASSIGN(st, fs_->SetAttributes(locking, Owner(1000, 1000), root_));
  EXPECT_EQ(st.st_mode & 07777, 02644u);
  // Directories keep setgid (it is about inheritance there).
  const InodeNumber dir = NewDirectory(kRootInode, "d", 02755);
  ASSERT_OK_AND_ASSIGN(st, fs_->SetAttributes(dir, Owner(1000, 1000), root_));
  EXPECT_EQ(st.st_mode & 07777, 02755u);
}

TEST_F(FilesystemTest, DataChangesDropSetIdBitsWhenTheCallerMust) {
  // The default where the kernel gives no verdict: everyone but uid 0.
  EXPECT_FALSE(root_.drops_set_id());
  EXPECT_TRUE(bob_.drops_set_id());
  const InodeNumber ino = NewFile(kRootInode, "f", 06777);
  WriteAt(ino, 0, "root keeps them");
  EXPECT_EQ(Stat(ino).st_mode & 07777, 06777u);
  WriteAt(ino, 0, "bob does not", bob_);
  EXPECT_EQ(Stat(ino).st_mode & 07777, 0777u);

  // The kernel's verdict (CAP_FSETID) wins over the uid either way.
  const Caller root_without_fsetid = Caller(0, 0).set_drops_set_id(true);
  const Caller bob_with_fsetid = Caller(1001, 1001).set_drops_set_id(false);
  ASSERT_OK(fs_->SetAttributes(ino, Mode(06777), root_));
  WriteAt(ino, 0, "x", bob_with_fsetid);
  EXPECT_EQ(Stat(ino).st_mode & 07777, 06777u);
  WriteAt(ino, 0, "x", root_without_fsetid);
  EXPECT_EQ(Stat(ino).st_mode & 07777, 0777u);

  // sgid without group execute stays for members of the file's group.
  const InodeNumber locking = NewFile(kRootInode, "locking", 06666);
  ASSERT_OK(fs_->SetAttributes(locking, Owner(std::nullopt, 2000), root_));
  const Caller bob_in_2000(1001, 1001, [] { return std::vector<gid_t>{2000}; });
  WriteAt(locking, 0, "x", bob_in_2000);
  EXPECT_EQ(Stat(locking).st_mode & 07777, 02666u);
  WriteAt(locking, 0, "x", bob_);
  EXPECT_EQ(Stat(locking).st_mode & 07777, 0666u);

  // Truncate, an O_TRUNC open, fallocate and copy_file_range are writes too.
  const InodeNumber truncated = NewFile(kRootInode, "truncated", 06777);
  ASSERT_OK(fs_->SetAttributes(truncated, Size(10), root_));
  EXPECT_EQ(Stat(truncated).st_mode & 07777, 06777u);
  ASSERT_OK(fs_->SetAttributes(truncated, Size(5), root_without_fsetid));
  EXPECT_EQ(Stat(truncated).st_mode & 07777, 0777u);
  ASSERT_OK(fs_->SetAttributes(truncated, Mode(06777), root_));
  ASSERT_OK(fs_->Open(truncated, O_WRONLY | O_TRUNC, root_without_fsetid));
  fs_->Release(truncated);
  EXPECT_EQ(Stat(truncated).st_mode & 07777, 0777u);
  ASSERT_OK(fs_->SetAttributes(truncated, Mode(06777), root_));
  ASSERT_OK(fs_->Allocate(truncated, 0, 0, 4096, bob_));
  EXPECT_EQ(Stat(truncated).st_mode & 07777, 0777u);
  ASSERT_OK(fs_->SetAttributes(truncated, Mode(06777), root_));
  ASSERT_OK(fs_->CopyFileRange(ino, 0, truncated, 0, 1, bob_));
  EXPECT_EQ(Stat(truncated).st_mode & 07777, 0777u);
}

// The kernel caches attributes, and a write's reply carries none: the
// core says when it changed the mode on its own.
TEST_F(FilesystemTest, DroppedSetIdBitsAreReported) {
  RecordingNotifier notifier;
  FilesystemConfig config;
  config.notifier = &notifier;
  Build(8 * kMiB, config);
  const InodeNumber plain = NewFile(kRootInode, "plain", 0755);
  const InodeNumber setid = NewFile(kRootInode, "setid", 06755);
  WriteAt(plain, 0, "x", bob_);
  WriteAt(setid, 0, "x", root_);
  EXPECT_TRUE(notifier.attributes_changed().empty());
  WriteAt(setid, 0, "x", bob_);
  EXPECT_EQ(notifier.attributes_changed(), std::vector<InodeNumber>{setid});
  WriteAt(setid, 0, "x", bob_);  // nothing left to drop
  EXPECT_EQ(notifier.attributes_changed(), std::vector<InodeNumber>{setid});
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK(fs_->SetAttributes(setid, Mode(06755), root_));
    if (i == 0) ASSERT_OK(fs_->Open(setid, O_WRONLY | O_TRUNC, bob_));
    if (i == 0) fs_->Release(setid);
    if (i == 1) ASSERT_OK(fs_->Allocate(setid, 0, 0, 10, bob_));
    if (i == 2) ASSERT_OK(fs_->CopyFileRange(plain, 0, setid, 0, 1, bob_));
  }
  // The copy also read `plain`, written since its last access: its atime
  // moved, and the kernel refreshes only the target's attributes after a
  // copy.
  EXPECT_EQ(notifier.attributes_changed(),
            std::vector<InodeNumber>({setid, setid, setid, setid, plain}));
}

// Reads that a cache above the core serves never reach it: MarkAccessed
// applies relatime for them (nothing on noatime), and reports a moved atime.
TEST_F(FilesystemTest, MarkAccessedAppliesRelatimeAndReportsIt) {
  for (const bool update_atime : {true, false}) {
    SCOPED_TRACE(update_atime ? "relatime" : "noatime");
    RecordingNotifier notifier;
    FilesystemConfig config;
    config.update_atime = update_atime;
    config.notifier = &notifier;
    Build(8 * kMiB, config);
    const InodeNumber ino = NewFile(kRootInode, "f", 0644);
    Age(ino);
    const struct stat aged = Stat(ino);
    fs_->MarkAccessed(ino);
    const std::vector<InodeNumber> once =
        update_atime ? std::vector<InodeNumber>{ino} : std::vector<InodeNumber>{};
    EXPECT_EQ(Stat(ino).st_atim.tv_sec > aged.st_atim.tv_sec, update_atime);
    EXPECT_EQ(notifier.attributes_changed(), once);
    fs_->MarkAccessed(ino);  // newer than mtime and ctime now: relatime keeps it
    fs_->MarkAccessed(ino + 100);  // no such inode: nothing to report
    EXPECT_EQ(notifier.attributes_changed(), once);
  }
}

TEST_F(FilesystemTest, UtimensSetsExplicitOrCurrentTimes) {
  const InodeNumber ino = NewFile(kRootInode, "f", 0644, alice_);
  Age(ino);
  AttributeChanges explicit_times;
  explicit_times.atime = AttributeChanges::Time{false, {1234567890, 123456789}};
  explicit_times.mtime = AttributeChanges::Time{false, {1234567891, 987654321}};
  ASSERT_OK_AND_ASSIGN(struct stat st, fs_->SetAttributes(ino, explicit_times, alice_));
  EXPECT_TRUE(Same(st.st_atim, timespec{1234567890, 123456789}));
  EXPECT_TRUE(Same(st.st_mtim, timespec{1234567891, 987654321}));
  EXPECT_TRUE(Later(st.st_ctim, timespec{1234567891, 987654321}));

  // UTIME_OMIT: a field that is not engaged does not change.
  AttributeChanges only_atime;
  only_atime.atime = AttributeChanges::Time{false, {5, 5}};
  ASSERT_OK_AND_ASSIGN(st, fs_->SetAttributes(ino, only_atime, alice_));
  EXPECT_TRUE(Same(st.st_atim, timespec{5, 5}));
  EXPECT_TRUE(Same(st.st_mtim, timespec{1234567891, 987654321}));

  // UTIME_NOW.
  timespec before;
  clock_gettime(CLOCK_REALTIME, &before);
  AttributeChanges now;
  now.mtime = AttributeChanges::Time{true, {}};
  ASSERT_OK_AND_ASSIGN(st, fs_->SetAttributes(ino, now, alice_));
  EXPECT_FALSE(Later(before, st.st_mtim));
  EXPECT_TRUE(Same(st.st_atim, timespec{5, 5}));
}

// Inodes store times packed (PackedTime); any second of a timespec, before
// 1970 or far after, comes back as it was set, to the nanosecond.
TEST_F(FilesystemTest, TimesKeepEverySecondAndNanosecond) {
  const InodeNumber ino = NewFile(kRootInode, "f");
  const std::vector<timespec> times = {{0, 0},
                                       {-1, 999999999},
                                       {std::numeric_limits<int64_t>::min(), 1},
                                       {std::numeric_limits<int64_t>::max(), 999999999},
                                       {int64_t{1} << 32, 500000000},
                                       {(int64_t{1} << 32) - 1, 7}};
  for (const timespec& time : times) {
    SCOPED_TRACE(absl::StrCat(time.tv_sec, ".", time.tv_nsec));
    AttributeChanges changes;
    changes.atime = AttributeChanges::Time{false, time};
    changes.mtime = AttributeChanges::Time{false, time};
    changes.ctime = time;
    ASSERT_OK(fs_->SetAttributes(ino, changes, root_));
    const struct stat st = Stat(ino);
    EXPECT_TRUE(Same(st.st_atim, time));
    EXPECT_TRUE(Same(st.st_mtim, time));
    EXPECT_TRUE(Same(st.st_ctim, time));
  }
}

TEST_F(FilesystemTest, TruncateDownAndUpReadsZeros) {
  const InodeNumber ino = NewFile(kRootInode, "f");
  std::string data(3 * 4096 + 100, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>('a' + i % 26);
  WriteAt(ino, 0, data);
  Age(ino);

  ASSERT_OK_AND_ASSIGN(struct stat st, fs_->SetAttributes(ino, Size(5000), root_));
  EXPECT_EQ(st.st_size, 5000);
  EXPECT_TRUE(Later(st.st_mtim, kLongAgo));
  EXPECT_TRUE(Later(st.st_ctim, kLongAgo));
  EXPECT_EQ(ReadAll(ino), data.substr(0, 5000));

  ASSERT_OK(fs_->SetAttributes(ino, Size(data.size()), root_));
  EXPECT_EQ(ReadAll(ino), data.substr(0, 5000) + std::string(data.size() - 5000, '\0'));

  ASSERT_OK(fs_->SetAttributes(ino, Size(3), root_));
  ASSERT_OK(fs_->SetAttributes(ino, Size(10), root_));
  EXPECT_EQ(ReadAll(ino), std::string("abc") + std::string(7, '\0'));

  ASSERT_OK(fs_->SetAttributes(ino, Size(0), root_));
  EXPECT_EQ(Stat(ino).st_blocks, 0);
  ASSERT_OK(fs_->SetAttributes(ino, Size(4096), root_));
  EXPECT_EQ(ReadAll(ino), std::string(4096, '\0'));
}

TEST_F(FilesystemTest, TruncateUpIsSparseAndBounded) {
  Build(4 * kMiB, FilesystemConfig{});
  const InodeNumber ino = NewFile(kRootInode, "f");
  const uint64_t huge = uint64_t{1} << 40;
  ASSERT_OK_AND_ASSIGN(struct stat st, fs_->SetAttributes(ino, Size(huge), root_));
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), huge);
  EXPECT_EQ(st.st_blocks, 0);
  EXPECT_EQ(ReadAt(ino, huge / 2, 8), std::string(8, '\0'));
  EXPECT_EQ(ReadAt(ino, huge - 2, 8), std::string(2, '\0'));
  EXPECT_EQ(Errno(fs_->SetAttributes(ino, Size(uint64_t{1} << 63), root_)), EFBIG);
  EXPECT_EQ(Errno(fs_->SetAttributes(kRootInode, Size(0), root_)), EISDIR);
  ASSERT_OK_AND_ASSIGN(struct stat fifo,
                       fs_->MakeNode(kRootInode, "fifo", S_IFIFO | 0644, 0, root_));
  EXPECT_EQ(Errno(fs_->SetAttributes(fifo.st_ino, Size(0), root_)), EINVAL);
}

// ---------------------------------------------------------------------------
// MakeNode, Create, MakeDirectory, SymbolicLink

TEST_F(FilesystemTest, MakeNodeOfEveryType) {
  ASSERT_OK_AND_ASSIGN(struct stat reg,
                       fs_->MakeNode(kRootInode, "reg", S_IFREG | 0600, 0, alice_));
  EXPECT_EQ(reg.st_mode, S_IFREG | 0600);
  WriteAt(reg.st_ino, 0, "data", alice_);
  EXPECT_EQ(ReadAll(reg.st_ino), "data");

  ASSERT_OK_AND_ASSIGN(struct stat untyped, fs_->MakeNode(kRootInode, "untyped", 0640, 0, root_));
  EXPECT_EQ(untyped.st_mode, S_IFREG | 0640);

  ASSERT_OK_AND_ASSIGN(struct stat fifo,
                       fs_->MakeNode(kRootInode, "fifo", S_IFIFO | 0644, makedev(1, 2), alice_));
  EXPECT_EQ(fifo.st_mode, S_IFIFO | 0644);
  EXPECT_EQ(fifo.st_rdev, 0u);  // only devices carry a device number
  ASSERT_OK_AND_ASSIGN(struct stat sock,
                       fs_->MakeNode(kRootInode, "sock", S_IFSOCK | 0755, 0, alice_));
  EXPECT_EQ(sock.st_mode, S_IFSOCK | 0755);

  ASSERT_OK_AND_ASSIGN(struct stat chr,
                       fs_->MakeNode(kRootInode, "null", S_IFCHR | 0666, makedev(1, 3), root_));
  EXPECT_EQ(chr.st_mode, S_IFCHR | 0666);
  EXPECT_EQ(chr.st_rdev, makedev(1, 3));
  ASSERT_OK_AND_ASSIGN(struct stat blk,
                       fs_->MakeNode(kRootInode, "loop", S_IFBLK | 0660, makedev(7, 0), root_));
  EXPECT_EQ(blk.st_mode, S_IFBLK | 0660);
  EXPECT_EQ(Stat(blk.st_ino).st_rdev, makedev(7, 0));

  EXPECT_EQ(Errno(fs_->MakeNode(kRootInode, "d", S_IFDIR | 0755, 0, root_)), EPERM);
  EXPECT_EQ(Errno(fs_->MakeNode(kRootInode, "bad", S_IFMT | 0644, 0, root_)), EINVAL);
  EXPECT_EQ(Errno(fs_->MakeNode(kRootInode, "fifo", S_IFIFO | 0644, 0, root_)), EEXIST);

  // Special files hold no data.
  char byte;
  EXPECT_EQ(Errno(fs_->Read(fifo.st_ino, 0, 1, &byte)), EINVAL);
  EXPECT_EQ(Errno(fs_->Write(chr.st_ino, 0, "x", 1, false, root_)), EINVAL);
  EXPECT_EQ(Errno(fs_->Allocate(sock.st_ino, 0, 0, 4096, root_)), ENODEV);
  EXPECT_EQ(Errno(fs_->Seek(fifo.st_ino, 0, SEEK_DATA)), EINVAL);
}

TEST_F(FilesystemTest, CreateIsExclusive) {
  const InodeNumber ino = NewFile(kRootInode, "f");
  WriteAt(ino, 0, "keep");
  EXPECT_EQ(Errno(fs_->Create(kRootInode, "f", 0644, O_CREAT | O_EXCL, root_)), EEXIST);
  EXPECT_EQ(Errno(fs_->Create(kRootInode, "f", 0644, O_CREAT | O_TRUNC, root_)), EEXIST);
  NewDirectory(kRootInode, "d");
  EXPECT_EQ(Errno(fs_->Create(kRootInode, "d", 0644, O_CREAT, root_)), EEXIST);
  EXPECT_EQ(Errno(fs_->Create(kRootInode, ".", 0644, O_CREAT, root_)), EEXIST);
  EXPECT_EQ(Errno(fs_->Create(kRootInode, "..", 0644, O_CREAT, root_)), EEXIST);
  EXPECT_EQ(Errno(fs_->Create(ino, "x", 0644, O_CREAT, root_)), ENOTDIR);
  EXPECT_EQ(Errno(fs_->Create(kRootInode, "a/b", 0644, O_CREAT, root_)), EINVAL);
  EXPECT_EQ(Errno(fs_->Create(kRootInode, "", 0644, O_CREAT, root_)), ENOENT);
  EXPECT_EQ(ReadAll(ino), "keep");
}

TEST_F(FilesystemTest, OpenTruncates) {
  const InodeNumber ino = NewFile(kRootInode, "f", 04766, alice_);
  WriteAt(ino, 0, "content");
  ASSERT_OK(fs_->Open(ino, O_RDONLY, bob_));
  fs_->Release(ino);
  EXPECT_EQ(ReadAll(ino), "content");

  Age(ino);
  ASSERT_OK(fs_->Open(ino, O_WRONLY | O_TRUNC, bob_));
  fs_->Release(ino);
  const struct stat st = Stat(ino);
  EXPECT_EQ(st.st_size, 0);
  EXPECT_EQ(st.st_blocks, 0);
  EXPECT_EQ(st.st_mode & 07777, 0766u);  // a truncating open is a write
  EXPECT_TRUE(Later(st.st_mtim, kLongAgo));

  ASSERT_OK(fs_->Open(kRootInode, O_RDONLY, root_));
  fs_->Release(kRootInode);
  EXPECT_EQ(Errno(fs_->Open(kRootInode, O_WRONLY, root_)), EISDIR);
  EXPECT_EQ(Errno(fs_->Open(kRootInode, O_RDWR, root_)), EISDIR);
  EXPECT_EQ(Errno(fs_->Open(987654, O_RDONLY, root_)), ENOENT);
}
TEST_F(FilesystemTest, SymbolicLinks) {
  ASSERT_OK_AND_ASSIGN(struct stat st,
                       fs_->SymbolicLink(kRootInode, "l", "../some/target", alice_));
  EXPECT_EQ(st.st_mode, S_IFLNK | 0777);
  EXPECT_EQ(st.st_size, 14);
  EXPECT_EQ(st.st_uid, 1000u);
  ASSERT_OK_AND_ASSIGN(std::string target, fs_->ReadLink(st.st_ino));
  EXPECT_EQ(target, "../some/target");

  const std::string longest(4095, 't');
  ASSERT_OK_AND_ASSIGN(struct stat longest_link,
                       fs_->SymbolicLink(kRootInode, "long", longest, root_));
  ASSERT_OK_AND_ASSIGN(target, fs_->ReadLink(longest_link.st_ino));
  EXPECT_EQ(target, longest);
  EXPECT_EQ(Errno(fs_->SymbolicLink(kRootInode, "too", longest + "t", root_)), ENAMETOOLONG);
  EXPECT_EQ(Errno(fs_->SymbolicLink(kRootInode, "empty", "", root_)), ENOENT);
  EXPECT_EQ(Errno(fs_->SymbolicLink(kRootInode, "l", "x", root_)), EEXIST);

  const InodeNumber file = NewFile(kRootInode, "f");
  EXPECT_EQ(Errno(fs_->ReadLink(file)), EINVAL);
  EXPECT_EQ(Errno(fs_->ReadLink(kRootInode)), EINVAL);
  char byte;
  EXPECT_EQ(Errno(fs_->Read(st.st_ino, 0, 1, &byte)), EINVAL);
}

// As tmpfs: a target of 128 bytes or more takes a block of the mount's
// space (tmpfs: a page), a shorter one none; the block goes with the link.
TEST_F(FilesystemTest, LongSymlinkTargetsTakeSpaceAndGiveItBack) {
  Build(64 * kMinBlock, FilesystemConfig{});
  const uint64_t free_before = fs_->StatFs().f_bfree;
  ASSERT_OK(fs_->SymbolicLink(kRootInode, "short", std::string(127, 's'), root_));
  EXPECT_EQ(fs_->StatFs().f_bfree, free_before);
  int links = 0;
  std::vector<InodeNumber> made;
  for (;;) {
    absl::StatusOr<struct stat> link = fs_->SymbolicLink(
        kRootInode, absl::StrCat("l", links), std::string(128 + links, 'a' + links % 26), root_);
    if (!link.ok()) {
      EXPECT_EQ(Errno(link), ENOSPC);
      break;
    }
    made.push_back(link->st_ino);
    ++links;
  }
  EXPECT_EQ(uint64_t(links), free_before) << "one block each";
  EXPECT_EQ(fs_->StatFs().f_bfree, 0u);
  ASSERT_OK_AND_ASSIGN(struct stat st, fs_->Lookup(kRootInode, "l37"));
  ASSERT_OK_AND_ASSIGN(std::string target, fs_->ReadLink(st.st_ino));
  EXPECT_EQ(target, std::string(128 + 37, 'a' + 37 % 26));
  fs_->Forget(st.st_ino, 1);
  for (int i = 0; i < links; ++i) ASSERT_OK(fs_->Unlink(kRootInode, absl::StrCat("l", i)));
  for (InodeNumber ino : made) fs_->Forget(ino, 1);  // the replies' references
  EXPECT_EQ(fs_->StatFs().f_bfree, free_before);
}

// ---------------------------------------------------------------------------
// Data

TEST_F(FilesystemTest, WritesAtAnyOffsetLeaveZeroHoles) {
  const InodeNumber ino = NewFile(kRootInode, "f");
  WriteAt(ino, 10000, "xyz");
  EXPECT_EQ(Stat(ino).st_size, 10003);
  EXPECT_EQ(ReadAll(ino), std::string(10000, '\0') + "xyz");
  EXPECT_EQ(ReadAt(ino, 10001, 100), "yz");  // short at the end
  EXPECT_EQ(ReadAt(ino, 10003, 100), "");
  EXPECT_EQ(ReadAt(ino, 1 << 30, 100), "");

  // Far beyond every block written so far.
  WriteAt(ino, 5 * kMiB + 3, "far");
  EXPECT_EQ(ReadAt(ino, 5 * kMiB - 10, 16), std::string(13, '\0') + "far");
  EXPECT_EQ(ReadAt(ino, 2 * kMiB, 4096), std::string(4096, '\0'));
}

TEST_F(FilesystemTest, RandomWritesMatchAModel) {
  const InodeNumber ino = NewFile(kRootInode, "f");
  std::string model;
  std::mt19937 random(42);
  for (int i = 0; i < 300; ++i) {
    const uint64_t offset = random() % (700 * 1024);
    const size_t length = 1 + random() % (i % 10 == 0 ? 200 * 1024 : 5000);
    std::string data(length, '\0');
    for (char& c : data) c = static_cast<char>(random());
    WriteAt(ino, offset, data);
    if (model.size() < offset + length) model.resize(offset + length, '\0');
    model.replace(offset, length, data);
    if (i % 50 == 49) {
      const uint64_t size = random() % model.size();
      ASSERT_OK(fs_->SetAttributes(ino, Size(size), root_));
      model.resize(size);
    }
  }
  ASSERT_EQ(static_cast<uint64_t>(Stat(ino).st_size), model.size());
  EXPECT_TRUE(ReadAll(ino) == model);
  // Unaligned reads across extents.
  for (int i = 0; i < 50; ++i) {
    const uint64_t offset = random() % model.size();
    const size_t length = random() % 300000;
    EXPECT_TRUE(ReadAt(ino, offset, length) == model.substr(offset, length)) << offset;
  }
}

TEST_F(FilesystemTest, AppendWritesAtTheEnd) {
  const InodeNumber ino = NewFile(kRootInode, "f");
  WriteAt(ino, 0, "one");
  ASSERT_OK_AND_ASSIGN(size_t written, fs_->Write(ino, 0, "two", 3, /*append=*/true, root_));
  EXPECT_EQ(written, 3u);
  EXPECT_EQ(ReadAll(ino), "onetwo");
}

TEST_F(FilesystemTest, WriteEdgeCases) {
  const InodeNumber ino = NewFile(kRootInode, "f");
  Age(ino);
  ASSERT_OK_AND_ASSIGN(size_t written, fs_->Write(ino, 100, "", 0, false, root_));
  EXPECT_EQ(written, 0u);
  const struct stat st = Stat(ino);
  EXPECT_EQ(st.st_size, 0);  // an empty write extends nothing
  EXPECT_TRUE(Same(st.st_mtim, kLongAgo));

  const uint64_t max = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(Errno(fs_->Write(ino, max, "x", 1, false, root_)), EFBIG);
  EXPECT_EQ(Errno(fs_->Write(ino, max - 1, "xy", 2, false, root_)), EFBIG);
  EXPECT_EQ(Stat(ino).st_size, 0);
  char byte;
  EXPECT_EQ(Errno(fs_->Read(kRootInode, 0, 1, &byte)), EISDIR);
  EXPECT_EQ(Errno(fs_->Write(kRootInode, 0, "x", 1, false, root_)), EISDIR);
}

TEST_F(FilesystemTest, WriteUpdatesMtimeAndCtimeWithNanoseconds) {
  const InodeNumber ino = NewFile(kRootInode, "f");
  Age(ino);
  WriteAt(ino, 0, "x");
  struct stat st = Stat(ino);
  EXPECT_TRUE(Later(st.st_mtim, kLongAgo));
  EXPECT_TRUE(Same(st.st_mtim, st.st_ctim));
  EXPECT_TRUE(Same(st.st_atim, kLongAgo));

  // Timestamps carry nanoseconds, not whole seconds: of a few writes, at
  // least one lands off a microsecond boundary.
  bool sub_microsecond = false;
  for (int i = 0; i < 20 && !sub_microsecond; ++i) {
    WriteAt(ino, 0, "y");
    sub_microsecond = Stat(ino).st_mtim.tv_nsec % 1000 != 0;
  }
  EXPECT_TRUE(sub_microsecond);

  // A read changes neither mtime nor ctime; relatime updates an atime older
  // than mtime.
  st = Stat(ino);
  EXPECT_EQ(ReadAll(ino), "y");
  const struct stat after_read = Stat(ino);
  EXPECT_TRUE(Same(after_read.st_mtim, st.st_mtim));
  EXPECT_TRUE(Same(after_read.st_ctim, st.st_ctim));
  EXPECT_TRUE(Later(after_read.st_atim, kLongAgo));
}

TEST_F(FilesystemTest, NoatimeLeavesAtimeAlone) {
  FilesystemConfig config;
  config.update_atime = false;
  Build(8 * kMiB, config);
  const InodeNumber ino = NewFile(kRootInode, "f");
  WriteAt(ino, 0, "x");
  AttributeChanges old_atime;
  old_atime.atime = AttributeChanges::Time{false, kLongAgo};
  ASSERT_OK(fs_->SetAttributes(ino, old_atime, root_));
  EXPECT_EQ(ReadAll(ino), "x");
  EXPECT_TRUE(Same(Stat(ino).st_atim, kLongAgo));
}

TEST_F(FilesystemTest, FallocateModes) {
  const InodeNumber ino = NewFile(kRootInode, "f");
  const struct statvfs empty = fs_->StatFs();

  // Default mode: allocates and extends.
  ASSERT_OK(fs_->Allocate(ino, 0, 0, 64 * 1024, root_));
  struct stat st = Stat(ino);
  EXPECT_EQ(st.st_size, 64 * 1024);
  EXPECT_GE(st.st_blocks * 512, 64 * 1024);
  EXPECT_EQ(ReadAll(ino), std::string(64 * 1024, '\0'));
  EXPECT_EQ((empty.f_bfree - fs_->StatFs().f_bfree) * kMinBlock,
            static_cast<uint64_t>(st.st_blocks) * 512);

  // KEEP_SIZE: allocates past the end without extending.
  ASSERT_OK(fs_->Allocate(ino, FALLOC_FL_KEEP_SIZE, 64 * 1024, 64 * 1024, root_));
  const struct stat kept = Stat(ino);
  EXPECT_EQ(kept.st_size, 64 * 1024);
  EXPECT_GE(kept.st_blocks * 512, 128 * 1024);
  // and what lies there reads as zeros once the file grows over it.
  ASSERT_OK(fs_->SetAttributes(ino, Size(128 * 1024), root_));
  EXPECT_EQ(ReadAt(ino, 64 * 1024, 64 * 1024), std::string(64 * 1024, '\0'));

  // PUNCH_HOLE (needs KEEP_SIZE): zeros, same size, space returned.
  WriteAt(ino, 0, std::string(128 * 1024, 'd'));
  const uint64_t free_before_punch = fs_->StatFs().f_bfree;
  const struct stat before_punch = Stat(ino);
  EXPECT_EQ(Errno(fs_->Allocate(ino, FALLOC_FL_PUNCH_HOLE, 0, 4096, root_)), EOPNOTSUPP);
  ASSERT_OK(fs_->Allocate(ino, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 128 * 1024, root_));
  st = Stat(ino);
  EXPECT_EQ(st.st_size, 128 * 1024);
  EXPECT_LT(st.st_blocks, before_punch.st_blocks);
  EXPECT_EQ(ReadAll(ino), std::string(128 * 1024, '\0'));
  EXPECT_EQ((fs_->StatFs().f_bfree - free_before_punch) * kMinBlock,
            static_cast<uint64_t>(before_punch.st_blocks - st.st_blocks) * 512);

  // A partial punch zeroes only its range.
  WriteAt(ino, 0, std::string(3 * 4096, 'e'));
  ASSERT_OK(fs_->Allocate(ino, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 100, 5000, root_));
  EXPECT_EQ(ReadAt(ino, 0, 3 * 4096),
            std::string(100, 'e') + std::string(5000, '\0') + std::string(3 * 4096 - 5100, 'e'));

  // ZERO_RANGE, with and without KEEP_SIZE.
  WriteAt(ino, 0, std::string(200, 'z'));
  ASSERT_OK(fs_->Allocate(ino, FALLOC_FL_ZERO_RANGE, 10, 50, root_));
  EXPECT_EQ(ReadAt(ino, 0, 200),
            std::string(10, 'z') + std::string(50, '\0') + std::string(140, 'z'));
  ASSERT_OK(fs_->Allocate(ino, FALLOC_FL_ZERO_RANGE, 200 * 1024, 10, root_));
  EXPECT_EQ(Stat(ino).st_size, 200 * 1024 + 10);
  ASSERT_OK(fs_->Allocate(ino, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, 300 * 1024, 10, root_));
  EXPECT_EQ(Stat(ino).st_size, 200 * 1024 + 10);

  EXPECT_EQ(Errno(fs_->Allocate(ino, 0, 0, 0, root_)), EINVAL);
  EXPECT_EQ(Errno(fs_->Allocate(ino, FALLOC_FL_COLLAPSE_RANGE, 0, 4096, root_)), EOPNOTSUPP);
  EXPECT_EQ(Errno(fs_->Allocate(kRootInode, 0, 0, 4096, root_)), EISDIR);

  // Everything goes back when the file goes.
  ASSERT_OK(fs_->Unlink(kRootInode, "f"));
  fs_->Forget(ino, 1);
  EXPECT_EQ(fs_->StatFs().f_bfree, empty.f_bfree);
}

TEST_F(FilesystemTest, FallocateIsAModification) {
  // As on tmpfs: every mode updates mtime and ctime and drops set-id bits.
  const InodeNumber ino = NewFile(kRootInode, "f", 06777);
  const std::vector<std::pair<int, uint64_t>> calls = {
      {0, 0},
      {FALLOC_FL_KEEP_SIZE, 64 * 1024},
      {FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0},
      {FALLOC_FL_ZERO_RANGE, 0}};
  for (const auto& [mode, offset] : calls) {
    Age(ino);
    ASSERT_OK(fs_->Allocate(ino, mode, offset, 8192, root_));
    const struct stat st = Stat(ino);
    EXPECT_TRUE(Later(st.st_mtim, kLongAgo)) << mode;
    EXPECT_TRUE(Later(st.st_ctim, kLongAgo)) << mode;
  }
  EXPECT_EQ(Stat(ino).st_mode & 07777, 06777u);  // root keeps them
  ASSERT_OK(fs_->Allocate(ino, 0, 0, 8192, bob_));
  EXPECT_EQ(Stat(ino).st_mode & 07777, 0777u);
}

TEST_F(FilesystemTest, SeekDataAndHole) {
  const InodeNumber ino = NewFile(kRootInode, "f");
  WriteAt(ino, 0, std::string(4096, 'a'));
  WriteAt(ino, kMiB, std::string(4096, 'b'));
  ASSERT_OK(fs_->SetAttributes(ino, Size(4 * kMiB), root_));

  ASSERT_OK_AND_ASSIGN(uint64_t at, fs_->Seek(ino, 0, SEEK_DATA));
  EXPECT_EQ(at, 0u);
  ASSERT_OK_AND_ASSIGN(at, fs_->Seek(ino, 100, SEEK_DATA));
  EXPECT_EQ(at, 100u);
  ASSERT_OK_AND_ASSIGN(at, fs_->Seek(ino, 0, SEEK_HOLE));
  EXPECT_EQ(at, 4096u);
  ASSERT_OK_AND_ASSIGN(at, fs_->Seek(ino, 4096, SEEK_DATA));
  EXPECT_EQ(at, kMiB);
  ASSERT_OK_AND_ASSIGN(at, fs_->Seek(ino, 5000, SEEK_HOLE));
  EXPECT_EQ(at, 5000u);
  ASSERT_OK_AND_ASSIGN(at, fs_->Seek(ino, kMiB, SEEK_HOLE));
  EXPECT_GT(at, kMiB);
  EXPECT_LE(at, 2 * kMiB);
  EXPECT_EQ(ReadAt(ino, at, 4096), std::string(4096, '\0'));
  // Past the last data: no more data, and the end of file is a hole.
  EXPECT_EQ(Errno(fs_->Seek(ino, 2 * kMiB, SEEK_DATA)), ENXIO);
  ASSERT_OK_AND_ASSIGN(at, fs_->Seek(ino, 3 * kMiB, SEEK_HOLE));
  EXPECT_EQ(at, 3 * kMiB);
  EXPECT_EQ(Errno(fs_->Seek(ino, 4 * kMiB, SEEK_DATA)), ENXIO);
  EXPECT_EQ(Errno(fs_->Seek(ino, 4 * kMiB, SEEK_HOLE)), ENXIO);
  EXPECT_EQ(Errno(fs_->Seek(ino, 0, SEEK_END)), EINVAL);

  // The block of a small file reaches past its end; only the size counts.
  const InodeNumber small = NewFile(kRootInode, "small");
  WriteAt(small, 0, "abc");
  ASSERT_OK_AND_ASSIGN(at, fs_->Seek(small, 0, SEEK_HOLE));
  EXPECT_EQ(at, 3u);
  EXPECT_EQ(Errno(fs_->Seek(small, 3, SEEK_DATA)), ENXIO);
}

// A file that never stored a byte keeps no data at all (Inode::data): every
// operation must see it as a file of holes, exactly like one whose data was
// written and then truncated away, which is its twin below.
TEST_F(FilesystemTest, NeverWrittenFileIsAllHoles) {
  const InodeNumber never = NewFile(kRootInode, "never");
  const InodeNumber twin = NewFile(kRootInode, "twin");
  WriteAt(twin, 0, std::string(8192, 't'));
  ASSERT_OK(fs_->SetAttributes(twin, Size(0), root_));
  const uint64_t free_blocks = fs_->StatFs().f_bfree;
  for (InodeNumber ino : {never, twin}) {
    SCOPED_TRACE(ino == never ? "never written" : "truncated to 0");
    ASSERT_OK(fs_->SetAttributes(ino, Size(3 * 4096 + 5), root_));
    EXPECT_EQ(Stat(ino).st_blocks, 0);
    EXPECT_EQ(ReadAll(ino), std::string(3 * 4096 + 5, '\0'));
    EXPECT_EQ(ReadAt(ino, 4096, 100), std::string(100, '\0'));
    EXPECT_EQ(Errno(fs_->Seek(ino, 0, SEEK_DATA)), ENXIO);
    ASSERT_OK_AND_ASSIGN(uint64_t hole, fs_->Seek(ino, 100, SEEK_HOLE));
    EXPECT_EQ(hole, 100u);
    EXPECT_EQ(Errno(fs_->Seek(ino, 3 * 4096 + 5, SEEK_HOLE)), ENXIO);
    ASSERT_OK(fs_->Fsync(ino));
    ASSERT_OK(fs_->Allocate(ino, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096, root_));
    EXPECT_EQ(Stat(ino).st_blocks, 0);
    ASSERT_OK(fs_->Open(ino, O_WRONLY | O_TRUNC, root_));
    fs_->Release(ino);
    EXPECT_EQ(Stat(ino).st_size, 0);
  }
  EXPECT_EQ(fs_->StatFs().f_bfree, free_blocks);

  // As a copy's source: its holes become zeroed blocks of the target.
  const InodeNumber target = NewFile(kRootInode, "target");
  const InodeNumber target_twin = NewFile(kRootInode, "target_twin");
  WriteAt(target, 0, std::string(3 * 4096, 'x'));
  WriteAt(target_twin, 0, std::string(3 * 4096, 'x'));
  for (InodeNumber ino : {never, twin}) ASSERT_OK(fs_->SetAttributes(ino, Size(8192), root_));
  ASSERT_OK_AND_ASSIGN(size_t copied, fs_->CopyFileRange(never, 0, target, 100, 8192, root_));
  EXPECT_EQ(copied, 8192u);
  ASSERT_OK_AND_ASSIGN(copied, fs_->CopyFileRange(twin, 0, target_twin, 100, 8192, root_));
  EXPECT_EQ(copied, 8192u);
  EXPECT_EQ(ReadAll(target),
            std::string(100, 'x') + std::string(8192, '\0') + std::string(3 * 4096 - 8292, 'x'));
  EXPECT_EQ(ReadAll(target), ReadAll(target_twin));
  EXPECT_EQ(Stat(target).st_blocks, Stat(target_twin).st_blocks);
  EXPECT_EQ(Stat(never).st_blocks, 0);

  // As a copy's target, and fallocated: it gets data like any file.
  const InodeNumber copy_to = NewFile(kRootInode, "copy_to");
  ASSERT_OK_AND_ASSIGN(copied, fs_->CopyFileRange(target, 0, copy_to, 4096, 200, root_));
  EXPECT_EQ(copied, 200u);
  EXPECT_EQ(ReadAll(copy_to),
            std::string(4096, '\0') + std::string(100, 'x') + std::string(100, '\0'));
  EXPECT_EQ(Stat(copy_to).st_blocks * 512, 4096);
  const InodeNumber allocated = NewFile(kRootInode, "allocated");
  ASSERT_OK(fs_->Allocate(allocated, FALLOC_FL_KEEP_SIZE, 0, 8192, root_));
  EXPECT_EQ(Stat(allocated).st_size, 0);
  EXPECT_EQ(Stat(allocated).st_blocks * 512, 8192);

  // Unlinked while open, and gone with its last handle.
  ASSERT_OK_AND_ASSIGN(struct stat open, fs_->Create(kRootInode, "open", 0644, O_RDWR, root_));
  ASSERT_OK(fs_->Unlink(kRootInode, "open"));
  EXPECT_EQ(ReadAt(open.st_ino, 0, 10), "");
  fs_->Forget(open.st_ino, 1);
  fs_->Release(open.st_ino);
  EXPECT_EQ(Errno(fs_->GetAttributes(open.st_ino)), ENOENT);
}

TEST_F(FilesystemTest, CopyFileRange) {
  const InodeNumber in = NewFile(kRootInode, "in");
  const InodeNumber out = NewFile(kRootInode, "out");
  std::string data(3 * kMiB + 123, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7 + i / 4096);
  WriteAt(in, 0, data);

  ASSERT_OK_AND_ASSIGN(size_t copied, fs_->CopyFileRange(in, 1000, out, 50, 2 * kMiB + 5, root_));
  EXPECT_EQ(copied, 2 * kMiB + 5);
  EXPECT_TRUE(ReadAll(out) == std::string(50, '\0') + data.substr(1000, 2 * kMiB + 5));

  // Short at the source's end, nothing past it.
  ASSERT_OK_AND_ASSIGN(copied, fs_->CopyFileRange(in, data.size() - 10, out, 0, 100, root_));
  EXPECT_EQ(copied, 10u);
  EXPECT_EQ(ReadAt(out, 0, 10), data.substr(data.size() - 10));
  ASSERT_OK_AND_ASSIGN(copied, fs_->CopyFileRange(in, data.size(), out, 0, 100, root_));
  EXPECT_EQ(copied, 0u);

  // Within one file: overlapping ranges are refused, disjoint ones work.
  EXPECT_EQ(Errno(fs_->CopyFileRange(in, 0, in, 100, 200, root_)), EINVAL);
  ASSERT_OK_AND_ASSIGN(copied, fs_->CopyFileRange(in, 0, in, 1000, 1000, root_));
  EXPECT_EQ(copied, 1000u);
  EXPECT_EQ(ReadAt(in, 1000, 1000), data.substr(0, 1000));

  EXPECT_EQ(Errno(fs_->CopyFileRange(in, 0, kRootInode, 0, 10, root_)), EISDIR);
  EXPECT_EQ(Errno(fs_->CopyFileRange(kRootInode, 0, out, 0, 10, root_)), EISDIR);
}

// ---------------------------------------------------------------------------
// Directories

TEST_F(FilesystemTest, MakeAndRemoveDirectories) {
  ASSERT_OK_AND_ASSIGN(struct stat st, fs_->MakeDirectory(kRootInode, "d", 01750, alice_));
  EXPECT_EQ(st.st_mode, S_IFDIR | 01750);
  EXPECT_EQ(st.st_nlink, 2u);
  EXPECT_EQ(st.st_uid, 1000u);
  EXPECT_EQ(Stat(kRootInode).st_nlink, 3u);
  const InodeNumber dir = st.st_ino;
  NewDirectory(dir, "sub");
  EXPECT_EQ(Stat(dir).st_nlink, 3u);
  NewFile(dir, "file");
  EXPECT_EQ(Stat(dir).st_nlink, 3u);  // files do not count

  EXPECT_EQ(Errno(fs_->MakeDirectory(kRootInode, "d", 0755, root_)), EEXIST);
  EXPECT_EQ(Errno(fs_->RemoveDirectory(kRootInode, "d")), ENOTEMPTY);
  EXPECT_EQ(Errno(fs_->RemoveDirectory(dir, "file")), ENOTDIR);
  EXPECT_EQ(Errno(fs_->Unlink(kRootInode, "d")), EISDIR);
  EXPECT_EQ(Errno(fs_->RemoveDirectory(dir, ".")), EINVAL);
  EXPECT_EQ(Errno(fs_->RemoveDirectory(dir, "..")), ENOTEMPTY);
  EXPECT_EQ(Errno(fs_->RemoveDirectory(dir, "missing")), ENOENT);
  EXPECT_EQ(Errno(fs_->MakeDirectory(dir + 1000, "x", 0755, root_)), ENOENT);

  ASSERT_OK(fs_->RemoveDirectory(dir, "sub"));
  EXPECT_EQ(Stat(dir).st_nlink, 2u);
  ASSERT_OK(fs_->Unlink(dir, "file"));
  ASSERT_OK(fs_->RemoveDirectory(kRootInode, "d"));
  EXPECT_EQ(Stat(kRootInode).st_nlink, 2u);

  // Still looked up, but removed: nothing new can appear in it.
  EXPECT_EQ(Stat(dir).st_nlink, 0u);
  EXPECT_EQ(Errno(fs_->Create(dir, "f", 0644, 0, root_)), ENOENT);
  EXPECT_EQ(Errno(fs_->MakeDirectory(dir, "d", 0755, root_)), ENOENT);
  EXPECT_EQ(Errno(fs_->Lookup(dir, "file")), ENOENT);
  const InodeNumber other = NewFile(kRootInode, "other");
  EXPECT_EQ(Errno(fs_->Rename(kRootInode, "other", dir, "other", 0)), ENOENT);
  EXPECT_EQ(Errno(fs_->Link(other, dir, "other")), ENOENT);
  EXPECT_TRUE(List(dir).empty());
  fs_->Forget(dir, 1);
  EXPECT_EQ(Errno(fs_->GetAttributes(dir)), ENOENT);
}

TEST_F(FilesystemTest, ReadDirectoryListsEverythingWithAttributes) {
  const InodeNumber dir = NewDirectory(kRootInode, "d");
  const InodeNumber file = NewFile(dir, "file");
  WriteAt(file, 0, "12345");
  const InodeNumber sub = NewDirectory(dir, "sub");
  ASSERT_OK_AND_ASSIGN(struct stat link, fs_->SymbolicLink(dir, "link", "file", root_));

  std::map<std::string, DirectoryEntry> plain;
  ASSERT_OK(fs_->ReadDirectory(dir, 0, false, [&](const DirectoryEntry& entry) {
    EXPECT_TRUE(plain.emplace(entry.name, entry).second) << entry.name;
    return true;
  }));
  ASSERT_EQ(plain.size(), 5u);
  EXPECT_EQ(plain["."].attr.st_ino, dir);
  EXPECT_TRUE(S_ISDIR(plain["."].attr.st_mode));
  EXPECT_EQ(plain[".."].attr.st_ino, kRootInode);
  EXPECT_EQ(plain["file"].attr.st_ino, file);
  EXPECT_TRUE(S_ISREG(plain["file"].attr.st_mode));
  EXPECT_EQ(plain["sub"].attr.st_ino, sub);
  EXPECT_TRUE(S_ISDIR(plain["sub"].attr.st_mode));
  EXPECT_EQ(plain["link"].attr.st_ino, link.st_ino);
  EXPECT_TRUE(S_ISLNK(plain["link"].attr.st_mode));

  std::map<std::string, DirectoryEntry> plus;
  ASSERT_OK(fs_->ReadDirectory(dir, 0, true, [&](const DirectoryEntry& entry) {
    plus.emplace(entry.name, entry);
    return true;
  }));
  ASSERT_EQ(plus.size(), 5u);
  EXPECT_EQ(plus["file"].attr.st_size, 5);
  EXPECT_EQ(plus["file"].attr.st_nlink, 1u);
  EXPECT_EQ(plus["sub"].attr.st_nlink, 2u);

  EXPECT_EQ(Errno(fs_->ReadDirectory(file, 0, false, [](const DirectoryEntry&) { return true; })),
            ENOTDIR);
}

TEST_F(FilesystemTest, ReadDirectoryPlusAddsOneLookupPerConsumedEntry) {
  const InodeNumber dir = NewDirectory(kRootInode, "d");
  const InodeNumber a = NewFile(dir, "a");
  const InodeNumber b = NewFile(dir, "b");
  fs_->Forget(a, 1);
  fs_->Forget(b, 1);
  // Consume ".", "..", "a"; refuse "b".
  ASSERT_OK(fs_->ReadDirectory(dir, 0, true,
                               [&](const DirectoryEntry& entry) { return entry.name != "b"; }));
  ASSERT_OK(fs_->Unlink(dir, "a"));
  ASSERT_OK(fs_->Unlink(dir, "b"));
  EXPECT_EQ(Errno(fs_->GetAttributes(b)), ENOENT);  // never handed out
  EXPECT_EQ(Stat(a).st_nlink, 0u);                  // the readdirplus reference
  fs_->Forget(a, 1);
  EXPECT_EQ(Errno(fs_->GetAttributes(a)), ENOENT);
}

TEST_F(FilesystemTest, ReadDirectoryCookiesSurviveChanges) {
  const InodeNumber dir = NewDirectory(kRootInode, "d");
  std::set<std::string> initial;
  for (int i = 0; i < 120; ++i) {
    const std::string name = absl::StrCat("entry", i);
    NewFile(dir, name);
    initial.insert(name);
  }
  std::mt19937 random(7);
  std::set<std::string> removed;
  std::map<std::string, int> seen;
  uint64_t cookie = 0;
  int added = 0;
  for (int round = 0;; ++round) {
    int taken = 0;
    bool more = false;
    ASSERT_OK(fs_->ReadDirectory(dir, cookie, false, [&](const DirectoryEntry& entry) {
      if (taken == 7) {
        more = true;
        return false;  // not consumed: must come first next time
      }
      ++taken;
      ++seen[entry.name];
      cookie = entry.next_cookie;
      return true;
    }));
    if (!more) break;
    ASSERT_LT(round, 1000);
    // Between calls, remove a random initial entry (read or not yet read)
    // and add new ones.
    std::vector<std::string> candidates;
    for (const std::string& name : initial) {
      if (!removed.count(name)) candidates.push_back(name);
    }
    const std::string victim = candidates[random() % candidates.size()];
    ASSERT_OK(fs_->Unlink(dir, victim));
    removed.insert(victim);
    NewFile(dir, absl::StrCat("new", added++));
    if (round % 3 == 0) {
      NewDirectory(dir, absl::StrCat("newdir", round));
      ASSERT_OK(fs_->RemoveDirectory(dir, absl::StrCat("newdir", round)));
    }
  }
  EXPECT_EQ(seen["."], 1);
  EXPECT_EQ(seen[".."], 1);
  for (const auto& [name, count] : seen) EXPECT_EQ(count, 1) << name;
  for (const std::string& name : initial) {
    if (!removed.count(name)) {
      EXPECT_EQ(seen.count(name), 1u) << name << " was lost";
    }
  }
  EXPECT_GT(removed.size(), 10u);
}

TEST_F(FilesystemTest, ReadDirectoryResumesAfterARemovedEntry) {
  const InodeNumber dir = NewDirectory(kRootInode, "d");
  NewFile(dir, "a");
  NewFile(dir, "b");
  NewFile(dir, "c");
  // Resumes from `cookie`, collecting names until (not including) `stop`.
  auto read_from = [&](uint64_t cookie, const std::string& stop, uint64_t* next) {
    std::vector<std::string> names;
    EXPECT_TRUE(fs_->ReadDirectory(dir, cookie, false,
                                   [&](const DirectoryEntry& entry) {
                                     if (entry.name == stop) return false;
                                     names.push_back(entry.name);
                                     *next = entry.next_cookie;
                                     return true;
                                   })
                    .ok());
    return names;
  };
  uint64_t cookie = 0;
  EXPECT_EQ(read_from(0, "b", &cookie), (std::vector<std::string>{".", "..", "a"}));
  // The refused entry comes first next time, even after the last consumed
  // entry is gone.
  ASSERT_OK(fs_->Unlink(dir, "a"));
  uint64_t after_b = 0;
  EXPECT_EQ(read_from(cookie, "c", &after_b), std::vector<std::string>{"b"});
  ASSERT_OK(fs_->Unlink(dir, "b"));
  uint64_t end = 0;
  EXPECT_EQ(read_from(after_b, "", &end), std::vector<std::string>{"c"});
  EXPECT_TRUE(read_from(end, "", &end).empty());
}

// ---------------------------------------------------------------------------
// Unlink, Link

TEST_F(FilesystemTest, LinkCountsNames) {
  const InodeNumber dir = NewDirectory(kRootInode, "d");
  const InodeNumber ino = NewFile(kRootInode, "f");
  WriteAt(ino, 0, "shared");
  Age(ino);
  Age(dir);
  ASSERT_OK_AND_ASSIGN(struct stat st, fs_->Link(ino, dir, "g"));
  EXPECT_EQ(st.st_ino, ino);
  EXPECT_EQ(st.st_nlink, 2u);
  EXPECT_TRUE(Later(st.st_ctim, kLongAgo));
  EXPECT_TRUE(Later(Stat(dir).st_mtim, kLongAgo));
  EXPECT_EQ(InodeOf(dir, "g"), ino);
  ASSERT_OK(fs_->Link(ino, kRootInode, "h"));
  EXPECT_EQ(Stat(ino).st_nlink, 3u);

  EXPECT_EQ(Errno(fs_->Link(ino, dir, "g")), EEXIST);
  EXPECT_EQ(Errno(fs_->Link(dir, kRootInode, "dirlink")), EPERM);
  EXPECT_EQ(Errno(fs_->Link(ino, ino, "x")), ENOTDIR);
  EXPECT_EQ(Errno(fs_->Link(987654, kRootInode, "x")), ENOENT);

  ASSERT_OK(fs_->Unlink(kRootInode, "f"));
  EXPECT_EQ(Stat(ino).st_nlink, 2u);
  ASSERT_OK(fs_->Unlink(dir, "g"));
  EXPECT_EQ(Stat(ino).st_nlink, 1u);
  EXPECT_EQ(ReadAll(InodeOf(kRootInode, "h")), "shared");
  EXPECT_EQ(Errno(fs_->Unlink(kRootInode, "f")), ENOENT);
}

TEST_F(FilesystemTest, LinkOfAnUnlinkedOpenFileFails) {
  ASSERT_OK_AND_ASSIGN(struct stat st, fs_->Create(kRootInode, "f", 0644, O_RDWR, root_));
  ASSERT_OK(fs_->Unlink(kRootInode, "f"));
  EXPECT_EQ(Errno(fs_->Link(st.st_ino, kRootInode, "again")), ENOENT);
  fs_->Release(st.st_ino);
  fs_->Forget(st.st_ino, 1);
}

TEST_F(FilesystemTest, NamespaceChangesUpdateParentTimes) {
  const InodeNumber dir = NewDirectory(kRootInode, "d");
  const InodeNumber other = NewDirectory(kRootInode, "other");
  auto expect_touched = [&](InodeNumber ino, const char* what) {
    const struct stat st = Stat(ino);
    EXPECT_TRUE(Later(st.st_mtim, kLongAgo)) << what;
    EXPECT_TRUE(Later(st.st_ctim, kLongAgo)) << what;
    Age(ino);
  };
  Age(dir);
  Age(other);
  const InodeNumber file = NewFile(dir, "f");
  expect_touched(dir, "create");
  NewDirectory(dir, "sub");
  expect_touched(dir, "mkdir");
  ASSERT_OK(fs_->MakeNode(dir, "fifo", S_IFIFO | 0644, 0, root_));
  expect_touched(dir, "mknod");
  ASSERT_OK(fs_->SymbolicLink(dir, "link", "f", root_));
  expect_touched(dir, "symlink");
  ASSERT_OK(fs_->RemoveDirectory(dir, "sub"));
  expect_touched(dir, "rmdir");
  ASSERT_OK(fs_->Unlink(dir, "link"));
  expect_touched(dir, "unlink");

  Age(file);
  ASSERT_OK(fs_->Rename(dir, "f", other, "g", 0));
  expect_touched(dir, "rename source");
  expect_touched(other, "rename target");
  const struct stat moved = Stat(file);
  EXPECT_TRUE(Later(moved.st_ctim, kLongAgo));  // rename changes the inode's ctime
  EXPECT_TRUE(Same(moved.st_mtim, kLongAgo));   // but not its data

  ASSERT_OK(fs_->Link(file, dir, "again"));
  Age(file);
  ASSERT_OK(fs_->Unlink(dir, "again"));
  EXPECT_TRUE(Later(Stat(file).st_ctim, kLongAgo));  // unlink changes nlink, so ctime
}

// ---------------------------------------------------------------------------
// Rename

TEST_F(FilesystemTest, RenamePlainAndOverAFile) {
  const InodeNumber a = NewFile(kRootInode, "a");
  WriteAt(a, 0, "A");
  const InodeNumber b = NewFile(kRootInode, "b");
  WriteAt(b, 0, "B");
  ASSERT_OK(fs_->Rename(kRootInode, "a", kRootInode, "c", 0));
  EXPECT_EQ(Errno(fs_->Lookup(kRootInode, "a")), ENOENT);
  EXPECT_EQ(InodeOf(kRootInode, "c"), a);

  ASSERT_OK(fs_->Rename(kRootInode, "c", kRootInode, "b", 0));
  EXPECT_EQ(InodeOf(kRootInode, "b"), a);
  EXPECT_EQ(ReadAll(a), "A");
  EXPECT_EQ(List(kRootInode), std::vector<std::string>{"b"});
  // The replaced file lost its name but is still looked up.
  EXPECT_EQ(Stat(b).st_nlink, 0u);
  EXPECT_EQ(ReadAll(b), "B");
  fs_->Forget(b, 1);
  EXPECT_EQ(Errno(fs_->GetAttributes(b)), ENOENT);

  EXPECT_EQ(Errno(fs_->Rename(kRootInode, "missing", kRootInode, "x", 0)), ENOENT);
  EXPECT_EQ(Errno(fs_->Rename(kRootInode, ".", kRootInode, "x", 0)), EBUSY);
  EXPECT_EQ(Errno(fs_->Rename(kRootInode, "b", kRootInode, "..", 0)), EBUSY);
  EXPECT_EQ(Errno(fs_->Rename(kRootInode, "b", a, "x", 0)), ENOTDIR);
  EXPECT_EQ(Errno(fs_->Rename(kRootInode, "b", kRootInode, "x", 4242)), EINVAL);
  EXPECT_EQ(Errno(fs_->Rename(kRootInode, "b", kRootInode, "x", RENAME_NOREPLACE | RENAME_EXCHANGE)),
            EINVAL);
}

TEST_F(FilesystemTest, RenameBetweenHardLinksOfOneFileDoesNothing) {
  const InodeNumber ino = NewFile(kRootInode, "a");
  ASSERT_OK(fs_->Link(ino, kRootInode, "b"));
  ASSERT_OK(fs_->Rename(kRootInode, "a", kRootInode, "b", 0));
  EXPECT_EQ(InodeOf(kRootInode, "a"), ino);
  EXPECT_EQ(InodeOf(kRootInode, "b"), ino);
  EXPECT_EQ(Stat(ino).st_nlink, 2u);
}

TEST_F(FilesystemTest, RenameDirectories) {
  const InodeNumber a = NewDirectory(kRootInode, "a");
  const InodeNumber b = NewDirectory(kRootInode, "b");
  const InodeNumber empty = NewDirectory(kRootInode, "empty");
  const InodeNumber full = NewDirectory(kRootInode, "full");
  NewFile(full, "x");
  NewFile(kRootInode, "file");
  EXPECT_EQ(Stat(kRootInode).st_nlink, 6u);

  // Into another directory: ".." and both link counts follow.
  ASSERT_OK(fs_->Rename(kRootInode, "a", b, "a", 0));
  EXPECT_EQ(Stat(kRootInode).st_nlink, 5u);
  EXPECT_EQ(Stat(b).st_nlink, 3u);
  EXPECT_EQ(InodeOf(a, ".."), b);

  // Over an empty directory; not over a non-empty one; type mismatches.
  ASSERT_OK(fs_->Rename(b, "a", kRootInode, "empty", 0));
  EXPECT_EQ(InodeOf(kRootInode, "empty"), a);
  EXPECT_EQ(InodeOf(a, ".."), kRootInode);
  EXPECT_EQ(Stat(kRootInode).st_nlink, 5u);  // gained a, lost the old "empty"
  EXPECT_EQ(Stat(b).st_nlink, 2u);
  EXPECT_EQ(Stat(empty).st_nlink, 0u);
  EXPECT_EQ(Errno(fs_->Rename(kRootInode, "empty", kRootInode, "full", 0)), ENOTEMPTY);
  EXPECT_EQ(Errno(fs_->Rename(kRootInode, "empty", kRootInode, "file", 0)), ENOTDIR);
  EXPECT_EQ(Errno(fs_->Rename(kRootInode, "file", kRootInode, "b", 0)), EISDIR);
  EXPECT_EQ(InodeOf(kRootInode, "full"), full);
  EXPECT_NE(InodeOf(full, "x"), 0u);
}

TEST_F(FilesystemTest, RenameIntoOwnSubtreeIsInvalid) {
  const InodeNumber a = NewDirectory(kRootInode, "a");
  const InodeNumber b = NewDirectory(a, "b");
  const InodeNumber c = NewDirectory(b, "c");
  EXPECT_EQ(Errno(fs_->Rename(kRootInode, "a", a, "x", 0)), EINVAL);
  EXPECT_EQ(Errno(fs_->Rename(kRootInode, "a", c, "x", 0)), EINVAL);
  EXPECT_EQ(Errno(fs_->Rename(a, "b", c, "x", 0)), EINVAL);
  // Over its own (non-empty) ancestor.
  EXPECT_EQ(Errno(fs_->Rename(a, "b", kRootInode, "a", 0)), ENOTEMPTY);
  // Exchanging a directory with something inside it, either way round.
  NewFile(c, "f");
  EXPECT_EQ(Errno(fs_->Rename(kRootInode, "a", c, "f", RENAME_EXCHANGE)), EINVAL);
  EXPECT_EQ(Errno(fs_->Rename(c, "f", kRootInode, "a", RENAME_EXCHANGE)), EINVAL);
  // Moving up is fine.
  ASSERT_OK(fs_->Rename(b, "c", kRootInode, "c", 0));
  EXPECT_EQ(InodeOf(c, ".."), kRootInode);
}

TEST_F(FilesystemTest, RenameNoReplace) {
  const InodeNumber a = NewFile(kRootInode, "a");
  const InodeNumber b = NewFile(kRootInode, "b");
  EXPECT_EQ(Errno(fs_->Rename(kRootInode, "a", kRootInode, "b", RENAME_NOREPLACE)), EEXIST);
  EXPECT_EQ(InodeOf(kRootInode, "a"), a);
  EXPECT_EQ(InodeOf(kRootInode, "b"), b);
  ASSERT_OK(fs_->Rename(kRootInode, "a", kRootInode, "c", RENAME_NOREPLACE));
  EXPECT_EQ(InodeOf(kRootInode, "c"), a);
}

TEST_F(FilesystemTest, RenameExchange) {
  const InodeNumber d1 = NewDirectory(kRootInode, "d1");
  const InodeNumber d2 = NewDirectory(kRootInode, "d2");
  const InodeNumber file = NewFile(d1, "file");
  const InodeNumber sub = NewDirectory(d2, "sub");
  NewFile(sub, "inside");  // exchange does not care about emptiness
  EXPECT_EQ(Stat(d1).st_nlink, 2u);
  EXPECT_EQ(Stat(d2).st_nlink, 3u);

  ASSERT_OK(fs_->Rename(d1, "file", d2, "sub", RENAME_EXCHANGE));
  EXPECT_EQ(InodeOf(d1, "file"), sub);
  EXPECT_EQ(InodeOf(d2, "sub"), file);
  EXPECT_EQ(InodeOf(sub, ".."), d1);
  EXPECT_EQ(Stat(d1).st_nlink, 3u);
  EXPECT_EQ(Stat(d2).st_nlink, 2u);
  EXPECT_EQ(Stat(file).st_nlink, 1u);
  EXPECT_EQ(Stat(sub).st_nlink, 2u);
  EXPECT_NE(InodeOf(sub, "inside"), 0u);

  // Two files in one directory.
  const InodeNumber x = NewFile(kRootInode, "x");
  const InodeNumber y = NewFile(kRootInode, "y");
  ASSERT_OK(fs_->Rename(kRootInode, "x", kRootInode, "y", RENAME_EXCHANGE));
  EXPECT_EQ(InodeOf(kRootInode, "x"), y);
  EXPECT_EQ(InodeOf(kRootInode, "y"), x);

  EXPECT_EQ(Errno(fs_->Rename(kRootInode, "x", kRootInode, "none", RENAME_EXCHANGE)),
            ENOENT);
}

// ---------------------------------------------------------------------------
// Permissions

TEST_F(FilesystemTest, SetgidDirectoryHandsDownItsGroup) {
  const InodeNumber dir = NewDirectory(kRootInode, "shared", 02777);
  ASSERT_OK(fs_->SetAttributes(dir, Owner(std::nullopt, 500), root_));
  ASSERT_OK(fs_->SetAttributes(dir, Mode(02777), root_));

  // The file keeps the mode the kernel sends (it has already stripped
  // setgid where the creator may not have it: mode_strip_sgid).
  ASSERT_OK_AND_ASSIGN(struct stat file, fs_->Create(dir, "f", 02755, 0, alice_));
  fs_->Release(file.st_ino);
  EXPECT_EQ(file.st_gid, 500u);
  EXPECT_EQ(file.st_uid, 1000u);
  EXPECT_EQ(file.st_mode & 07777, 02755u);
  ASSERT_OK_AND_ASSIGN(struct stat sub, fs_->MakeDirectory(dir, "sub", 0777, alice_));
  EXPECT_EQ(sub.st_gid, 500u);
  EXPECT_EQ(sub.st_mode & 07777, 02777u);  // subdirectories inherit the bit
  ASSERT_OK_AND_ASSIGN(struct stat nested, fs_->MakeDirectory(sub.st_ino, "n", 0700, bob_));
  EXPECT_EQ(nested.st_gid, 500u);
  EXPECT_EQ(nested.st_mode & 07777, 02700u);

  const InodeNumber plain = NewDirectory(kRootInode, "plain", 0777);
  ASSERT_OK_AND_ASSIGN(struct stat outside, fs_->MakeDirectory(plain, "d", 0755, alice_));
  EXPECT_EQ(outside.st_gid, 1000u);
  EXPECT_EQ(outside.st_mode & 07777, 0755u);
}
// ---------------------------------------------------------------------------
// Extended attributes

TEST_F(FilesystemTest, ExtendedAttributesRoundTrip) {
  const InodeNumber ino = NewFile(kRootInode, "f");
  Age(ino);
  ASSERT_OK(fs_->SetExtendedAttribute(ino, "user.b", "two", 0));
  EXPECT_TRUE(Later(Stat(ino).st_ctim, kLongAgo));
  ASSERT_OK(fs_->SetExtendedAttribute(ino, "user.a", std::string("o\0ne", 4), 0));
  ASSERT_OK(fs_->SetExtendedAttribute(ino, "user.empty", "", 0));
  ASSERT_OK_AND_ASSIGN(std::string value, fs_->GetExtendedAttribute(ino, "user.a"));
  EXPECT_EQ(value, std::string("o\0ne", 4));
  ASSERT_OK_AND_ASSIGN(value, fs_->GetExtendedAttribute(ino, "user.empty"));
  EXPECT_EQ(value, "");
  ASSERT_OK_AND_ASSIGN(std::string names, fs_->ListExtendedAttributes(ino, root_));
  EXPECT_EQ(names, std::string("user.a\0user.b\0user.empty\0", 25));

  EXPECT_EQ(Errno(fs_->SetExtendedAttribute(ino, "user.a", "x", XATTR_CREATE)), EEXIST);
  EXPECT_EQ(Errno(fs_->SetExtendedAttribute(ino, "user.c", "x", XATTR_REPLACE)), ENODATA);
  ASSERT_OK(fs_->SetExtendedAttribute(ino, "user.a", "new", XATTR_REPLACE));
  ASSERT_OK(fs_->SetExtendedAttribute(ino, "user.c", "x", XATTR_CREATE));
  ASSERT_OK_AND_ASSIGN(value, fs_->GetExtendedAttribute(ino, "user.a"));
  EXPECT_EQ(value, "new");

  ASSERT_OK(fs_->RemoveExtendedAttribute(ino, "user.b"));
  EXPECT_EQ(Errno(fs_->GetExtendedAttribute(ino, "user.b")), ENODATA);
  EXPECT_EQ(Errno(fs_->RemoveExtendedAttribute(ino, "user.b")), ENODATA);
  ASSERT_OK_AND_ASSIGN(names, fs_->ListExtendedAttributes(ino, root_));
  EXPECT_EQ(names, std::string("user.a\0user.c\0user.empty\0", 25));

  // Directories carry user.* too.
  ASSERT_OK(fs_->SetExtendedAttribute(kRootInode, "user.dir", "d", 0));
  ASSERT_OK_AND_ASSIGN(value, fs_->GetExtendedAttribute(kRootInode, "user.dir"));
  EXPECT_EQ(value, "d");
  EXPECT_EQ(Errno(fs_->SetExtendedAttribute(987654, "user.a", "x", 0)), ENOENT);
}

// The user.cudafs. names are cudafs's (the root's control attributes,
// answered before the Filesystem is asked): no inode stores one.
TEST_F(FilesystemTest, CudafsNamesAreNeverStored) {
  const InodeNumber file = NewFile(kRootInode, "f");
  for (const InodeNumber ino : {kRootInode, file}) {
    for (const char* name : {"user.cudafs.socket", "user.cudafs.make_room", "user.cudafs.x"}) {
      SCOPED_TRACE(name);
      const absl::Status set = fs_->SetExtendedAttribute(ino, name, "@x", 0);
      EXPECT_EQ(Errno(set), EPERM);
      EXPECT_TRUE(absl::StrContains(set.message(), "cudafs's own control attributes")) << set;
      EXPECT_EQ(Errno(fs_->GetExtendedAttribute(ino, name)), ENODATA);
      EXPECT_EQ(Errno(fs_->RemoveExtendedAttribute(ino, name)), ENODATA);
    }
  }
  EXPECT_EQ(Errno(fs_->SetExtendedAttribute(kRootInode, kWhereAttribute, "host", 0)), EPERM);
  ASSERT_OK_AND_ASSIGN(std::string names, fs_->ListExtendedAttributes(kRootInode, root_));
  EXPECT_EQ(names, "");
  ASSERT_OK(fs_->SetExtendedAttribute(file, "user.cudafsx", "1", 0));
}

TEST_F(FilesystemTest, ExtendedAttributeLimits) {
  const InodeNumber ino = NewFile(kRootInode, "f");
  const std::string longest_name = "user." + std::string(250, 'n');
  ASSERT_OK(fs_->SetExtendedAttribute(ino, longest_name, "v", 0));
  EXPECT_EQ(Errno(fs_->SetExtendedAttribute(ino, longest_name + "n", "v", 0)), ERANGE);
  EXPECT_EQ(Errno(fs_->GetExtendedAttribute(ino, longest_name + "n")), ERANGE);
  EXPECT_EQ(Errno(fs_->SetExtendedAttribute(ino, "", "v", 0)), ERANGE);

  const std::string largest(65536, 'v');
  ASSERT_OK(fs_->SetExtendedAttribute(ino, "user.large", largest, 0));
  ASSERT_OK_AND_ASSIGN(std::string value, fs_->GetExtendedAttribute(ino, "user.large"));
  EXPECT_EQ(value, largest);
  EXPECT_EQ(Errno(fs_->SetExtendedAttribute(ino, "user.large", largest + "v", 0)), E2BIG);
  ASSERT_OK_AND_ASSIGN(value, fs_->GetExtendedAttribute(ino, "user.large"));
  EXPECT_EQ(value.size(), largest.size());

  EXPECT_EQ(Errno(fs_->SetExtendedAttribute(ino, "unknown.x", "v", 0)), EOPNOTSUPP);
  EXPECT_EQ(Errno(fs_->SetExtendedAttribute(ino, "user", "v", 0)), EOPNOTSUPP);
  EXPECT_EQ(Errno(fs_->GetExtendedAttribute(ino, "system.x")), EOPNOTSUPP);
}

TEST_F(FilesystemTest, ExtendedAttributeNamespaces) {
  const InodeNumber ino = NewFile(kRootInode, "f", 0666, alice_);
  ASSERT_OK(fs_->SetExtendedAttribute(ino, "trusted.t", "secret", 0));
  ASSERT_OK(fs_->SetExtendedAttribute(ino, "security.s", "label", 0));
  ASSERT_OK(fs_->SetExtendedAttribute(ino, "user.u", "x", 0));
  ASSERT_OK_AND_ASSIGN(std::string value, fs_->GetExtendedAttribute(ino, "security.s"));
  EXPECT_EQ(value, "label");
  ASSERT_OK_AND_ASSIGN(value, fs_->GetExtendedAttribute(ino, "trusted.t"));
  EXPECT_EQ(value, "secret");

  // listxattr reaches us without a capability check: trusted.* names are
  // listed to uid 0 only.
  ASSERT_OK_AND_ASSIGN(std::string names, fs_->ListExtendedAttributes(ino, alice_));
  EXPECT_EQ(names, std::string("security.s\0user.u\0", 18));
  ASSERT_OK_AND_ASSIGN(names, fs_->ListExtendedAttributes(ino, root_));
  EXPECT_EQ(names, std::string("security.s\0trusted.t\0user.u\0", 28));
}
// ---------------------------------------------------------------------------
// Names

TEST_F(FilesystemTest, NamesUpTo255Bytes) {
  const std::string longest(255, 'n');
  const std::string too_long(256, 'n');
  const InodeNumber ino = NewFile(kRootInode, longest);
  EXPECT_EQ(InodeOf(kRootInode, longest), ino);
  EXPECT_EQ(List(kRootInode), std::vector<std::string>{longest});
  const InodeNumber dir = NewDirectory(kRootInode, std::string(255, 'd'));
  ASSERT_OK(fs_->SymbolicLink(dir, longest, longest, root_));
  ASSERT_OK(fs_->Link(ino, dir, std::string(255, 'l')));
  ASSERT_OK(fs_->Rename(dir, std::string(255, 'l'), dir, std::string(255, 'r'), 0));

  EXPECT_EQ(Errno(fs_->Create(kRootInode, too_long, 0644, 0, root_)), ENAMETOOLONG);
  EXPECT_EQ(Errno(fs_->MakeDirectory(kRootInode, too_long, 0755, root_)), ENAMETOOLONG);
  EXPECT_EQ(Errno(fs_->MakeNode(kRootInode, too_long, S_IFIFO | 0644, 0, root_)), ENAMETOOLONG);
  EXPECT_EQ(Errno(fs_->SymbolicLink(kRootInode, too_long, "t", root_)), ENAMETOOLONG);
  EXPECT_EQ(Errno(fs_->Link(ino, kRootInode, too_long)), ENAMETOOLONG);
  EXPECT_EQ(Errno(fs_->Lookup(kRootInode, too_long)), ENAMETOOLONG);
  EXPECT_EQ(Errno(fs_->Unlink(kRootInode, too_long)), ENAMETOOLONG);
  EXPECT_EQ(Errno(fs_->RemoveDirectory(kRootInode, too_long)), ENAMETOOLONG);
  EXPECT_EQ(Errno(fs_->Rename(kRootInode, longest, kRootInode, too_long, 0)), ENAMETOOLONG);
  EXPECT_EQ(Errno(fs_->Rename(kRootInode, too_long, kRootInode, "x", 0)), ENAMETOOLONG);
  EXPECT_EQ(fs_->StatFs().f_namemax, 255u);
}

TEST_F(FilesystemTest, NamesWithArbitraryBytes) {
  std::string every_byte;
  for (int c = 1; c < 256; ++c) {
    if (c != '/') every_byte.push_back(static_cast<char>(c));
  }
  ASSERT_EQ(every_byte.size(), 254u);
  const std::vector<std::string> names = {
      every_byte, "\xff\xfe invalid utf-8", "new\nline", " ", "...", "-", "\t"};
  std::set<InodeNumber> inodes;
  for (const std::string& name : names) inodes.insert(NewFile(kRootInode, name));
  EXPECT_EQ(inodes.size(), names.size());
  for (const std::string& name : names) EXPECT_NE(InodeOf(kRootInode, name), 0u);
  std::vector<std::string> listed = List(kRootInode);
  EXPECT_EQ(std::set<std::string>(listed.begin(), listed.end()),
            std::set<std::string>(names.begin(), names.end()));
  for (const std::string& name : names) ASSERT_OK(fs_->Unlink(kRootInode, name));
  EXPECT_TRUE(List(kRootInode).empty());
}

// ---------------------------------------------------------------------------
// Space: statfs, ENOSPC, nr_inodes

TEST_F(FilesystemTest, StatFsCountsBlocksAndInodes) {
  FilesystemConfig config;
  config.max_inodes = 100;
  Build(16 * kMiB, config);
  const struct statvfs empty = fs_->StatFs();
  EXPECT_EQ(empty.f_bsize, kMinBlock);
  EXPECT_EQ(empty.f_frsize, kMinBlock);
  EXPECT_EQ(empty.f_blocks, 16 * kMiB / kMinBlock);
  EXPECT_EQ(empty.f_bfree, empty.f_blocks);
  EXPECT_EQ(empty.f_bavail, empty.f_bfree);
  EXPECT_EQ(empty.f_files, 100u);
  EXPECT_EQ(empty.f_ffree, 99u);  // the root is an inode

  const InodeNumber ino = NewFile(kRootInode, "f");
  NewDirectory(kRootInode, "d");
  ASSERT_OK(fs_->SymbolicLink(kRootInode, "l", "f", root_));
  EXPECT_EQ(fs_->StatFs().f_ffree, 96u);
  WriteAt(ino, 0, std::string(100 * 1024, 'x'));
  const struct statvfs used = fs_->StatFs();
  const struct stat st = Stat(ino);
  EXPECT_GE(st.st_blocks * 512, 100 * 1024);
  EXPECT_EQ((empty.f_bfree - used.f_bfree) * kMinBlock, static_cast<uint64_t>(st.st_blocks) * 512);
  EXPECT_EQ(used.f_blocks, empty.f_blocks);

  ASSERT_OK(fs_->Unlink(kRootInode, "f"));
  EXPECT_EQ(fs_->StatFs().f_bfree, used.f_bfree);  // still looked up
  fs_->Forget(ino, 1);
  EXPECT_EQ(fs_->StatFs().f_bfree, empty.f_bfree);
  EXPECT_EQ(fs_->StatFs().f_ffree, 97u);
}

TEST_F(FilesystemTest, FullArenaFailsWritesWithoutChangingAnything) {
  Build(4 * kMiB, FilesystemConfig{});
  const InodeNumber a = NewFile(kRootInode, "a");
  std::string a_data(3 * kMiB, '\0');
  for (size_t i = 0; i < a_data.size(); ++i) a_data[i] = static_cast<char>(i % 251);
  for (uint64_t offset = 0; offset < a_data.size(); offset += kMiB) {
    WriteAt(a, offset, absl::string_view(a_data).substr(offset, kMiB));
  }
  EXPECT_EQ(fs_->StatFs().f_bfree * kMinBlock, kMiB);

  // 2 MiB do not fit in the 1 MiB left: nothing of it stays.
  const InodeNumber b = NewFile(kRootInode, "b");
  Age(b);
  const std::string two_mib(2 * kMiB, 'b');
  EXPECT_EQ(Errno(fs_->Write(b, 0, two_mib.data(), two_mib.size(), false, root_)), ENOSPC);
  struct stat st = Stat(b);
  EXPECT_EQ(st.st_size, 0);
  EXPECT_EQ(st.st_blocks, 0);
  EXPECT_TRUE(Same(st.st_mtim, kLongAgo));
  EXPECT_EQ(fs_->StatFs().f_bfree * kMinBlock, kMiB);
  // Same for growing a file, and for fallocate.
  EXPECT_EQ(Errno(fs_->Write(a, 3 * kMiB - 10, two_mib.data(), two_mib.size(), false, root_)),
            ENOSPC);
  EXPECT_EQ(Errno(fs_->Allocate(b, 0, 0, 2 * kMiB, root_)), ENOSPC);
  EXPECT_EQ(Stat(b).st_size, 0);
  EXPECT_EQ(static_cast<uint64_t>(Stat(a).st_size), a_data.size());
  EXPECT_TRUE(ReadAll(a) == a_data);
  EXPECT_EQ(fs_->StatFs().f_bfree * kMinBlock, kMiB);

  // Filling the arena exactly works; then even one byte more fails, while
  // overwriting stored bytes and creating empty files still work.
  WriteAt(b, 0, std::string(kMiB, 'b'));
  EXPECT_EQ(fs_->StatFs().f_bfree, 0u);
  const InodeNumber c = NewFile(kRootInode, "c");
  EXPECT_EQ(Errno(fs_->Write(c, 0, "x", 1, false, root_)), ENOSPC);
  WriteAt(a, 5, "overwrite");
  a_data.replace(5, 9, "overwrite");

  // Space comes back once the file is gone.
  ASSERT_OK(fs_->Unlink(kRootInode, "b"));
  fs_->Forget(b, 1);
  EXPECT_EQ(fs_->StatFs().f_bfree * kMinBlock, kMiB);
  WriteAt(c, 0, std::string(kMiB, 'c'));
  EXPECT_TRUE(ReadAll(a) == a_data);
  EXPECT_EQ(ReadAll(c), std::string(kMiB, 'c'));
}

TEST_F(FilesystemTest, InodeLimit) {
  FilesystemConfig config;
  config.max_inodes = 5;  // the root and four more
  Build(8 * kMiB, config);
  const InodeNumber a = NewFile(kRootInode, "a");
  NewDirectory(kRootInode, "d");
  ASSERT_OK(fs_->SymbolicLink(kRootInode, "l", "a", root_));
  EXPECT_EQ(fs_->StatFs().f_ffree, 1u);
  // A hard link takes an inode slot, as in tmpfs.
  ASSERT_OK(fs_->Link(a, kRootInode, "a2"));
  EXPECT_EQ(fs_->StatFs().f_ffree, 0u);
  EXPECT_EQ(Errno(fs_->Create(kRootInode, "b", 0644, 0, root_)), ENOSPC);
  EXPECT_EQ(Errno(fs_->MakeDirectory(kRootInode, "e", 0755, root_)), ENOSPC);
  EXPECT_EQ(Errno(fs_->MakeNode(kRootInode, "p", S_IFIFO | 0644, 0, root_)), ENOSPC);
  EXPECT_EQ(Errno(fs_->SymbolicLink(kRootInode, "m", "a", root_)), ENOSPC);
  EXPECT_EQ(Errno(fs_->Link(a, kRootInode, "a3")), ENOSPC);
  EXPECT_EQ(Errno(fs_->Lookup(kRootInode, "b")), ENOENT);  // nothing half-made
  EXPECT_EQ(Errno(fs_->Lookup(kRootInode, "a3")), ENOENT);
  EXPECT_EQ(Stat(a).st_nlink, 2u);

  // Removing one of two names gives its slot back.
  ASSERT_OK(fs_->Unlink(kRootInode, "a2"));
  EXPECT_EQ(fs_->StatFs().f_ffree, 1u);
  ASSERT_OK(fs_->Link(a, kRootInode, "a2"));
  // Renaming over a name removes that name.
  ASSERT_OK(fs_->Rename(kRootInode, "l", kRootInode, "a2", 0));
  EXPECT_EQ(fs_->StatFs().f_ffree, 1u);
  ASSERT_OK(fs_->Link(a, kRootInode, "a3"));

  // An inode counts until its last reference is gone.
  ASSERT_OK(fs_->Unlink(kRootInode, "a"));
  ASSERT_OK(fs_->Unlink(kRootInode, "a3"));
  EXPECT_EQ(fs_->StatFs().f_ffree, 1u);
  fs_->Forget(a, 4);  // Create's reference and three links'
  EXPECT_EQ(fs_->StatFs().f_ffree, 2u);
  NewFile(kRootInode, "b");
}

// Extended attributes take inode space by their bytes, as in tmpfs, so
// no user can grow the daemon's memory past nr_inodes with them.
TEST_F(FilesystemTest, ExtendedAttributesTakeInodeSpace) {
  FilesystemConfig config;
  config.max_inodes = 200;  // 200 KiB of inode space
  Build(8 * kMiB, config);
  const InodeNumber ino = NewFile(kRootInode, "f");
  const uint64_t free_before = fs_->StatFs().f_ffree;
  EXPECT_EQ(free_before, 198u);
  const std::string value(65536, 'v');
  int stored = 0;
  absl::Status status;
  while ((status = fs_->SetExtendedAttribute(ino, "user.a" + std::to_string(stored), value, 0))
             .ok()) {
    ++stored;
  }
  EXPECT_EQ(Errno(status), ENOSPC);
  EXPECT_EQ(stored, 3);  // 3 x 64 KiB fit in 198 KiB, a fourth does not
  // Each takes its 64 KiB value and less than a slot more.
  auto expect_free_after = [&](int attributes) {
    const uint64_t free = fs_->StatFs().f_ffree;
    EXPECT_LE(free, free_before - 64u * attributes) << attributes;
    EXPECT_GE(free, free_before - 65u * attributes - 1) << attributes;
  };
  expect_free_after(3);
  // Nothing half-made: the refused one is not there.
  EXPECT_EQ(Errno(fs_->GetExtendedAttribute(ino, "user.a3")), ENODATA);
  // A smaller value in place of a larger one gives space back.
  ASSERT_OK(fs_->SetExtendedAttribute(ino, "user.a0", "small", XATTR_REPLACE));
  expect_free_after(2);
  ASSERT_OK(fs_->RemoveExtendedAttribute(ino, "user.a1"));
  expect_free_after(1);
  // The space goes with the inode.
  ASSERT_OK(fs_->Unlink(kRootInode, "f"));
  fs_->Forget(ino, 1);
  EXPECT_EQ(fs_->StatFs().f_ffree, free_before + 1);
}

TEST_F(FilesystemTest, RemoveSetIdAsTheCallerWouldWrite) {
  const InodeNumber ino = NewFile(kRootInode, "f", 06755);
  AttributeChanges remove;
  remove.remove_set_id = true;
  ASSERT_OK_AND_ASSIGN(struct stat st, fs_->SetAttributes(ino, remove, root_));
  EXPECT_EQ(st.st_mode & 07777, 06755u);  // a caller with CAP_FSETID
  ASSERT_OK_AND_ASSIGN(st, fs_->SetAttributes(ino, remove, bob_));
  EXPECT_EQ(st.st_mode & 07777, 0755u);
}
// ---------------------------------------------------------------------------
// Concurrency

TEST_F(FilesystemTest, ConcurrentWritersReadersAndNamespaceChanges) {
  constexpr int kThreads = 4;
  constexpr int kEntriesPerThread = 150;
  const InodeNumber dir = NewDirectory(kRootInode, "shared", 0777);
  const InodeNumber log = NewFile(kRootInode, "log", 0666);
  std::vector<InodeNumber> files;
  for (int t = 0; t < kThreads; ++t) files.push_back(NewFile(dir, absl::StrCat("file", t)));

  std::atomic<int> failures{0};
  auto check = [&](bool ok) {
    if (!ok) failures.fetch_add(1);
  };
  std::vector<std::string> contents(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const Caller caller(1000 + t, 1000 + t);
      std::mt19937 random(t);
      std::string& model = contents[t];
      for (int i = 0; i < kEntriesPerThread; ++i) {
        // Data: a random write to this thread's file, checked by reading back.
        const uint64_t offset = random() % (256 * 1024);
        std::string data(1 + random() % 20000, static_cast<char>('a' + t));
        data[0] = static_cast<char>(i);
        absl::StatusOr<size_t> written =
            fs_->Write(files[t], offset, data.data(), data.size(), false, root_);
        check(written.ok() && *written == data.size());
        if (model.size() < offset + data.size()) model.resize(offset + data.size(), '\0');
        model.replace(offset, data.size(), data);
        std::string back(data.size(), '\0');
        absl::StatusOr<size_t> got = fs_->Read(files[t], offset, back.size(), back.data());
        check(got.ok() && *got == data.size() && back == data);

        // A record appended to the shared log.
        char record[16];  // "t<thread>:<12 digits>" and its NUL
        std::snprintf(record, sizeof(record), "t%d:%012d", t, i);
        absl::StatusOr<size_t> appended = fs_->Write(log, 0, record, 16, true, caller);
        check(appended.ok() && *appended == 16);

        // Names in the shared directory: create, look up, sometimes remove.
        const std::string name = absl::StrCat("e", t, "_", i);
        absl::StatusOr<struct stat> made = i % 5 == 0
                                               ? fs_->MakeDirectory(dir, name, 0755, caller)
                                               : fs_->Create(dir, name, 0644, O_WRONLY, caller);
        check(made.ok());
        if (!made.ok()) continue;
        if (i % 5 != 0) fs_->Release(made->st_ino);
        absl::StatusOr<struct stat> found = fs_->Lookup(dir, name);
        check(found.ok() && found->st_ino == made->st_ino);
        if (found.ok()) fs_->Forget(found->st_ino, 1);
        if (i % 2 == 0) {
          check((i % 5 == 0 ? fs_->RemoveDirectory(dir, name)
                            : fs_->Unlink(dir, name))
                    .ok());
        }
        fs_->Forget(made->st_ino, 1);
        if (i % 10 == 0) {
          const bool plus = i % 20 == 0;
          std::vector<InodeNumber> referenced;
          check(fs_->ReadDirectory(dir, 0, plus,
                                   [&](const DirectoryEntry& entry) {
                                     if (plus && entry.name != "." && entry.name != "..") {
                                       referenced.push_back(entry.attr.st_ino);
                                     }
                                     return true;
                                   })
                    .ok());
          for (InodeNumber ino : referenced) fs_->Forget(ino, 1);
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);

  for (int t = 0; t < kThreads; ++t) {
    EXPECT_TRUE(ReadAll(files[t]) == contents[t]) << "file" << t;
  }
  // Every record arrived whole, and each thread's in its own order.
  const std::string records = ReadAll(log);
  ASSERT_EQ(records.size(), size_t{16} * kThreads * kEntriesPerThread);
  std::vector<int> next(kThreads, 0);
  for (size_t at = 0; at < records.size(); at += 16) {
    int t = -1, i = -1;
    ASSERT_EQ(std::sscanf(records.c_str() + at, "t%d:%12d", &t, &i), 2) << at;
    ASSERT_GE(t, 0);
    ASSERT_LT(t, kThreads);
    EXPECT_EQ(i, next[t]++);
  }
  // Exactly the odd-numbered entries and the data files remain.
  std::set<std::string> expected;
  for (int t = 0; t < kThreads; ++t) {
    expected.insert(absl::StrCat("file", t));
    for (int i = 1; i < kEntriesPerThread; i += 2) {
      expected.insert(absl::StrCat("e", t, "_", i));
    }
  }
  std::vector<std::string> listed = List(dir);
  EXPECT_EQ(listed.size(), expected.size());
  EXPECT_EQ(std::set<std::string>(listed.begin(), listed.end()), expected);
  // Directories among them are counted in the parent's links.
  uint64_t subdirectories = 0;
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 1; i < kEntriesPerThread; i += 2) subdirectories += i % 5 == 0;
  }
  EXPECT_EQ(Stat(dir).st_nlink, 2 + subdirectories);
}

TEST_F(FilesystemTest, ConcurrentRenamesExchangesAndLinks) {
  constexpr int kThreads = 4;
  constexpr int kRounds = 300;
  const InodeNumber left = NewDirectory(kRootInode, "left", 0777);
  const InodeNumber right = NewDirectory(kRootInode, "right", 0777);
  // Per thread: a file "f<t>" and a directory "d<t>" that move between the
  // two directories, and "x<t>", a file in one and a directory in the
  // other, that trade places by RENAME_EXCHANGE.
  std::vector<InodeNumber> files, dirs;
  for (int t = 0; t < kThreads; ++t) {
    files.push_back(NewFile(left, absl::StrCat("f", t)));
    dirs.push_back(NewDirectory(left, absl::StrCat("d", t)));
    NewFile(left, absl::StrCat("x", t));
    NewDirectory(right, absl::StrCat("x", t));
  }
  std::atomic<int> failures{0};
  auto check = [&](bool ok, const char* what) {
    if (!ok) {
      failures.fetch_add(1);
      ADD_FAILURE() << what;
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const Caller caller(1000 + t, 1000 + t);
      const std::string f = absl::StrCat("f", t), d = absl::StrCat("d", t),
                        x = absl::StrCat("x", t), l = absl::StrCat("l", t);
      for (int round = 0; round < kRounds; ++round) {
        const InodeNumber here = round % 2 == 0 ? left : right;
        const InodeNumber there = round % 2 == 0 ? right : left;
        check(fs_->Rename(here, f, there, f, 0).ok(), "rename f");
        check(fs_->Rename(here, d, there, d, RENAME_NOREPLACE).ok(), "rename d");
        check(fs_->Rename(left, x, right, x, RENAME_EXCHANGE).ok(), "exchange");
        check(fs_->Link(files[t], here, l).ok(), "link");
        absl::StatusOr<struct stat> linked = fs_->Lookup(here, l);
        check(linked.ok() && linked->st_ino == files[t] && linked->st_nlink == 2, "lookup link");
        check(fs_->Unlink(here, l).ok(), "unlink");
        fs_->Forget(files[t], linked.ok() ? 2 : 1);
        absl::StatusOr<struct stat> parent = fs_->Lookup(dirs[t], "..");
        check(parent.ok() && parent->st_ino == there, "parent");
        if (parent.ok()) fs_->Forget(parent->st_ino, 1);
        if (round % 10 == 0) {
          // Entries move meanwhile, but one listing never shows a name twice.
          for (InodeNumber dir : {left, right}) {
            std::set<std::string> names;
            bool unique = true;
            check(fs_->ReadDirectory(dir, 0, false,
                                     [&](const DirectoryEntry& entry) {
                                       unique &= names.insert(entry.name).second;
                                       return true;
                                     })
                      .ok(),
                  "readdir");
            check(unique && names.count(".") == 1 && names.count("..") == 1, "listing");
          }
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);

  // kRounds is even: everything is back where it started.
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(InodeOf(left, absl::StrCat("f", t)), files[t]);
    EXPECT_EQ(InodeOf(left, absl::StrCat("d", t)), dirs[t]);
    EXPECT_EQ(Stat(files[t]).st_nlink, 1u);
    EXPECT_TRUE(S_ISREG(Stat(InodeOf(left, absl::StrCat("x", t))).st_mode));
    EXPECT_TRUE(S_ISDIR(Stat(InodeOf(right, absl::StrCat("x", t))).st_mode));
  }
  EXPECT_EQ(List(left).size(), 3u * kThreads);
  EXPECT_EQ(List(right).size(), 1u * kThreads);
  EXPECT_EQ(Stat(left).st_nlink, 2u + kThreads);
  EXPECT_EQ(Stat(right).st_nlink, 2u + kThreads);
}

TEST_F(FilesystemTest, ReadersNeverSeeHalfAWrite) {
  constexpr uint64_t kBlock = 64 * 1024;
  constexpr int kBlocks = 8;
  const InodeNumber ino = NewFile(kRootInode, "f");
  WriteAt(ino, 0, std::string(kBlock * kBlocks, 'a'));
  std::atomic<bool> done{false};
  std::atomic<int> torn{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; ++r) {
    readers.emplace_back([&, r] {
      std::string block(kBlock, '\0');
      for (uint64_t i = r; !done.load(); ++i) {
        absl::StatusOr<size_t> got = fs_->Read(ino, (i % kBlocks) * kBlock, kBlock, block.data());
        if (!got.ok() || *got != kBlock) {
          failures.fetch_add(1);
          continue;
        }
        if (block.find_first_not_of(block[0]) != std::string::npos) torn.fetch_add(1);
      }
    });
  }
  for (int round = 0; round < 400; ++round) {
    const std::string fill(kBlock, static_cast<char>('a' + round % 26));
    WriteAt(ino, (round % kBlocks) * kBlock, fill);
  }
  done = true;
  for (std::thread& reader : readers) reader.join();
  EXPECT_EQ(torn.load(), 0);
  EXPECT_EQ(failures.load(), 0);
}

// A shared file is the exported memory itself: writes through FUSE (small
// ones, which the write-back cache would hold, included) show in it at
// once, and what the mapping writes is what read returns, with no cached
// page in between. Small files and other kinds are refused.
TEST_F(FilesystemTest, SharedFilesAreTheExportedMemoryWithNoCacheBetween) {
  FilesystemConfig config;
  config.cache_bytes = 4 * kMiB;
  Build(64 * kMiB, config);
  const InodeNumber ino = NewFile(kRootInode, "f");
  const std::string data(3 * kMiB, 'd');
  WriteAt(ino, 0, data);
  WriteAt(ino, 10, "cached");
  EXPECT_EQ(ReadAt(ino, 8, 10), "ddcachedd" "d");  // a page in the cache now
  absl::StatusOr<std::unique_ptr<ExportedMemory>> exported = fs_->ExportShared(ino);
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_EQ((*exported)->size(), data.size());
  std::vector<char*> views;
  std::string all;
  for (const ExportedPiece& piece : (*exported)->pieces()) {
    char* view = static_cast<char*>(
        mmap(nullptr, piece.size, PROT_READ | PROT_WRITE, MAP_SHARED, piece.fd, 0));
    ASSERT_NE(view, MAP_FAILED);
    views.push_back(view);
    all.append(view, piece.size);
  }
  ASSERT_GE(all.size(), data.size());
  EXPECT_EQ(all.substr(8, 10), "ddcachedd" "d");
  WriteAt(ino, 20, "small");
  EXPECT_EQ(std::string_view(views[0] + 20, 5), "small") << "not held in the cache";
  std::memcpy(views[0] + 8, "MAPPED", 6);
  EXPECT_EQ(ReadAt(ino, 8, 6), "MAPPED") << "no stale cached page";
  Age(ino);
  ASSERT_OK(fs_->NoteMappedWrite(ino));
  EXPECT_GT(Stat(ino).st_mtim.tv_sec, kLongAgo.tv_sec);
  for (size_t i = 0; i < views.size(); ++i) munmap(views[i], (*exported)->pieces()[i].size);

  const InodeNumber small = NewFile(kRootInode, "small");
  WriteAt(small, 0, "tiny");
  EXPECT_EQ(ToErrno(fs_->ExportShared(small).status()), EINVAL);
  EXPECT_EQ(ToErrno(fs_->ExportShared(kRootInode).status()), EISDIR);
}

// A punch or a zeroed range in a shared file zeroes its blocks in place, so
// that the mapping stays the file's memory, as tmpfs keeps a shared mapping
// coherent: both sides see zeros, then each other's writes. The blocks
// stay allocated (st_blocks).
TEST_F(FilesystemTest, PunchAndZeroRangeKeepASharedFilesMemory) {
  const InodeNumber ino = NewFile(kRootInode, "f");
  const std::string data(8 * kMiB, 'd');
  for (uint64_t at = 0; at < data.size(); at += kMiB) WriteAt(ino, at, data.substr(at, kMiB));
  absl::StatusOr<std::unique_ptr<ExportedMemory>> exported = fs_->ExportShared(ino);
  ASSERT_TRUE(exported.ok()) << exported.status();
  // The mapping: each piece mapped, found by file offset.
  std::vector<std::pair<char*, uint64_t>> views;
  for (const ExportedPiece& piece : (*exported)->pieces()) {
    char* view = static_cast<char*>(
        mmap(nullptr, piece.size, PROT_READ | PROT_WRITE, MAP_SHARED, piece.fd, 0));
    ASSERT_NE(view, MAP_FAILED);
    views.emplace_back(view, piece.size);
  }
  const auto at = [&](uint64_t offset) -> char* {
    for (const auto& [view, size] : views) {
      if (offset < size) return view + offset;
      offset -= size;
    }
    return nullptr;
  };
  const auto mapped = [&](uint64_t offset, size_t length) {
    std::string bytes;
    for (uint64_t i = offset; i < offset + length; ++i) bytes += *at(i);
    return bytes;
  };
  const blkcnt_t blocks = Stat(ino).st_blocks;
  ASSERT_OK(fs_->Allocate(ino, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 2 * kMiB, 2 * kMiB,
                          root_));
  ASSERT_OK(fs_->Allocate(ino, FALLOC_FL_ZERO_RANGE, 4 * kMiB, 4 * kMiB, root_));
  const std::string zeros(6 * kMiB, '\0');
  EXPECT_TRUE(ReadAt(ino, 2 * kMiB, zeros.size()) == zeros);
  EXPECT_TRUE(mapped(2 * kMiB, zeros.size()) == zeros);
  EXPECT_TRUE(mapped(0, 2 * kMiB) == data.substr(0, 2 * kMiB));
  EXPECT_EQ(Stat(ino).st_blocks, blocks) << "zeroed in place, not freed";
  WriteAt(ino, 3 * kMiB, "written");
  EXPECT_EQ(mapped(3 * kMiB, 7), "written");
  std::memcpy(at(5 * kMiB), "mapped", 6);
  EXPECT_EQ(ReadAt(ino, 5 * kMiB, 6), "mapped");
  for (size_t i = 0; i < views.size(); ++i) munmap(views[i].first, views[i].second);
}

}  // namespace
}  // namespace cudafs

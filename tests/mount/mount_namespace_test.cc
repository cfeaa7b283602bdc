// Namespace operations on a mounted cudafs, through real system calls:
// lookup, mkdir/rmdir, readdir, unlink, rename, hard and symbolic links,
// special files and names. Expectations are tmpfs' (the suite passes with
// CUDAFS_TEST_DIR=/dev/shm).
#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/mount/mount_fixture.h"
#include "tests/support/errno_check.h"
#include "tests/support/fd.h"
#include "tests/support/file_io.h"
#include "tests/support/test_scale.h"

namespace cudafs_test {
namespace {

using NamespaceTest = FsTest;

ino_t InodeOf(const std::string& path) {
  const auto st = StatPath(path);
  return st ? st->st_ino : 0;
}

nlink_t LinksOf(const std::string& path) {
  const auto st = StatPath(path);
  return st ? st->st_nlink : 0;
}

struct RawEntry {
  std::string name;
  ino_t ino;
  unsigned char type;
  off_t next_offset;
};

// One getdents64 call on `fd` with a buffer of `buffer_size` bytes: the
// entries it returned (none at the end of the directory), or nullopt on
// error.
std::optional<std::vector<RawEntry>> GetDents(int fd, size_t buffer_size) {
  // The kernel's struct linux_dirent64.
  struct Dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
  };
  std::vector<char> buffer(buffer_size);
  const long got = syscall(SYS_getdents64, fd, buffer.data(), buffer.size());
  if (got < 0) return std::nullopt;
  std::vector<RawEntry> entries;
  for (long offset = 0; offset < got;) {
    const auto* entry = reinterpret_cast<const Dirent64*>(buffer.data() + offset);
    entries.push_back({entry->d_name, static_cast<ino_t>(entry->d_ino), entry->d_type,
                       static_cast<off_t>(entry->d_off)});
    offset += entry->d_reclen;
  }
  return entries;
}

// Every entry of `path` through readdir(3), in directory order.
std::vector<RawEntry> ReadAllEntries(const std::string& path) {
  std::vector<RawEntry> entries;
  DIR* dir = opendir(path.c_str());
  if (dir == nullptr) return entries;
  while (const dirent* entry = readdir(dir)) {
    entries.push_back({entry->d_name, entry->d_ino, entry->d_type, entry->d_off});
  }
  closedir(dir);
  return entries;
}

std::vector<std::string> Sorted(std::vector<std::string> names) {
  std::sort(names.begin(), names.end());
  return names;
}

// ---------------------------------------------------------------------------
// Lookup

TEST_P(NamespaceTest, MissingNamesAreENOENT) {
  struct stat st;
  EXPECT_ERRNO(lstat(Path("missing").c_str(), &st), ENOENT);
  EXPECT_ERRNO(stat(Path("missing/below").c_str(), &st), ENOENT);
  EXPECT_ERRNO(open(Path("missing").c_str(), O_RDONLY), ENOENT);
  EXPECT_ERRNO(mkdir(Path("missing/dir").c_str(), 0755), ENOENT);
  EXPECT_ERRNO(open(Path("missing/file").c_str(), O_CREAT | O_WRONLY, 0644), ENOENT);
  // A name that existed is missing again once removed.
  ASSERT_TRUE(WriteFile(Path("was"), "x"));
  ASSERT_SYS_OK(unlink(Path("was").c_str()));
  EXPECT_ERRNO(lstat(Path("was").c_str(), &st), ENOENT);
}

TEST_P(NamespaceTest, PathsThroughFilesAreENOTDIR) {
  ASSERT_TRUE(WriteFile(Path("file"), "data"));
  struct stat st;
  EXPECT_ERRNO(stat(Path("file/below").c_str(), &st), ENOTDIR);
  EXPECT_ERRNO(stat(Path("file/").c_str(), &st), ENOTDIR);
  EXPECT_ERRNO(open(Path("file/below").c_str(), O_CREAT | O_WRONLY, 0644), ENOTDIR);
  EXPECT_ERRNO(mkdir(Path("file/dir").c_str(), 0755), ENOTDIR);
  EXPECT_ERRNO(open(Path("file").c_str(), O_RDONLY | O_DIRECTORY), ENOTDIR);
  EXPECT_ERRNO(opendir(Path("file").c_str()) == nullptr ? -1 : 0, ENOTDIR);
}

// ---------------------------------------------------------------------------
// mkdir / rmdir

TEST_P(NamespaceTest, MkdirAndRmdir) {
  ASSERT_SYS_OK(mkdir(Path("dir").c_str(), 0750));
  const auto st = StatPath(Path("dir"));
  ASSERT_TRUE(st);
  EXPECT_TRUE(S_ISDIR(st->st_mode));
  EXPECT_EQ(st->st_mode & 07777, 0750u);
  EXPECT_EQ(st->st_nlink, 2u);
  EXPECT_EQ(st->st_uid, geteuid());
  EXPECT_EQ(ListDir(Path("dir")), (std::vector<std::string>{".", ".."}));

  EXPECT_ERRNO(mkdir(Path("dir").c_str(), 0755), EEXIST);
  ASSERT_TRUE(WriteFile(Path("file"), ""));
  EXPECT_ERRNO(mkdir(Path("file").c_str(), 0755), EEXIST);

  ASSERT_TRUE(WriteFile(Path("dir/inner"), "x"));
  EXPECT_ERRNO(rmdir(Path("dir").c_str()), ENOTEMPTY);
  EXPECT_ERRNO(rmdir(Path("file").c_str()), ENOTDIR);
  EXPECT_ERRNO(rmdir(Path("dir/inner").c_str()), ENOTDIR);
  EXPECT_ERRNO(rmdir(Path("dir/.").c_str()), EINVAL);
  EXPECT_ERRNO(rmdir(Path("dir/..").c_str()), ENOTEMPTY);
  EXPECT_ERRNO(rmdir(Path("absent").c_str()), ENOENT);

  ASSERT_SYS_OK(unlink(Path("dir/inner").c_str()));
  ASSERT_SYS_OK(rmdir(Path("dir").c_str()));
  EXPECT_FALSE(StatPath(Path("dir")));
  EXPECT_ERRNO(rmdir(Path("dir").c_str()), ENOENT);
  // The name is free again.
  EXPECT_SYS_OK(mkdir(Path("dir").c_str(), 0755));
}

TEST_P(NamespaceTest, RemovedDirectoryAcceptsNoNewEntries) {
  ASSERT_SYS_OK(mkdir(Path("gone").c_str(), 0755));
  Fd dir(open(Path("gone").c_str(), O_RDONLY | O_DIRECTORY));
  ASSERT_TRUE(dir.valid());
  ASSERT_SYS_OK(rmdir(Path("gone").c_str()));
  struct stat st;
  ASSERT_SYS_OK(fstat(dir.get(), &st));
  EXPECT_EQ(st.st_nlink, 0u);
  // Nothing can be created in a removed directory.
  EXPECT_ERRNO(openat(dir.get(), "new", O_CREAT | O_WRONLY, 0644), ENOENT);
  EXPECT_ERRNO(mkdirat(dir.get(), "sub", 0755), ENOENT);
  EXPECT_ERRNO(GetDents(dir.get(), 4096) ? 0 : -1, ENOENT);
}

// ---------------------------------------------------------------------------
// readdir

TEST_P(NamespaceTest, ReaddirListsEveryEntryWithTypeAndInode) {
  ASSERT_SYS_OK(mkdir(Path("d").c_str(), 0755));
  ASSERT_TRUE(WriteFile(Path("d/file"), "abc"));
  ASSERT_SYS_OK(mkdir(Path("d/sub").c_str(), 0755));
  ASSERT_SYS_OK(symlink("file", Path("d/link").c_str()));
  ASSERT_SYS_OK(mkfifo(Path("d/fifo").c_str(), 0644));

  const std::vector<RawEntry> entries = ReadAllEntries(Path("d"));
  std::map<std::string, RawEntry> by_name;
  for (const RawEntry& entry : entries) {
    EXPECT_TRUE(by_name.emplace(entry.name, entry).second) << entry.name << " listed twice";
  }
  std::vector<std::string> names;
  for (const auto& [name, entry] : by_name) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{".", "..", "fifo", "file", "link", "sub"}));

  EXPECT_EQ(by_name["."].ino, InodeOf(Path("d")));
  EXPECT_EQ(by_name[".."].ino, InodeOf(root()));
  const std::map<std::string, unsigned char> types = {{".", DT_DIR},     {"..", DT_DIR},
                                                      {"fifo", DT_FIFO}, {"file", DT_REG},
                                                      {"link", DT_LNK},  {"sub", DT_DIR}};
  for (const auto& [name, type] : types) {
    EXPECT_EQ(by_name[name].type, type) << name;
    if (name != "." && name != "..") {
      EXPECT_EQ(by_name[name].ino, InodeOf(Path("d/" + name))) << name;
    }
  }
  // A subdirectory's ".." is its parent.
  const std::vector<RawEntry> sub = ReadAllEntries(Path("d/sub"));
  const auto dotdot = std::find_if(sub.begin(), sub.end(),
                                   [](const RawEntry& entry) { return entry.name == ".."; });
  ASSERT_NE(dotdot, sub.end());
  EXPECT_EQ(dotdot->ino, InodeOf(Path("d")));
}

TEST_P(NamespaceTest, SeekdirReturnsToTelldirPosition) {
  ASSERT_SYS_OK(mkdir(Path("d").c_str(), 0755));
  for (int i = 0; i < 300; ++i) ASSERT_TRUE(WriteFile(Path("d/entry-" + std::to_string(i)), ""));
  DIR* dir = opendir(Path("d").c_str());
  ASSERT_NE(dir, nullptr);
  for (int i = 0; i < 150; ++i) ASSERT_NE(readdir(dir), nullptr);
  const long position = telldir(dir);
  std::vector<std::string> rest;
  while (const dirent* entry = readdir(dir)) rest.emplace_back(entry->d_name);
  seekdir(dir, position);
  std::vector<std::string> again;
  while (const dirent* entry = readdir(dir)) again.emplace_back(entry->d_name);
  rewinddir(dir);
  std::vector<std::string> all;
  while (const dirent* entry = readdir(dir)) all.emplace_back(entry->d_name);
  closedir(dir);
  EXPECT_EQ(rest.size(), 302u - 150u);
  EXPECT_EQ(again, rest);
  EXPECT_EQ(all.size(), 302u);
}

// getdents64 in batches of a few entries while other names come and go
// between batches: every name present throughout comes back exactly once,
// and no name comes back twice.
TEST_P(NamespaceTest, ReaddirInSmallBatchesWhileDirectoryChanges) {
  constexpr int kKept = 1200;
  constexpr int kRemoved = 400;
  ASSERT_SYS_OK(mkdir(Path("d").c_str(), 0755));
  const std::string dir_path = Path("d");
  Fd parent(open(dir_path.c_str(), O_RDONLY | O_DIRECTORY));
  ASSERT_TRUE(parent.valid());
  // Interleave the two kinds so removals hit every part of the listing.
  for (int i = 0; i < kKept; ++i) {
    Fd file(openat(parent.get(), ("keep-" + std::to_string(i)).c_str(), O_CREAT | O_WRONLY, 0644));
    ASSERT_TRUE(file.valid());
    if (i < kRemoved) {
      Fd doomed(
          openat(parent.get(), ("drop-" + std::to_string(i)).c_str(), O_CREAT | O_WRONLY, 0644));
      ASSERT_TRUE(doomed.valid());
    }
  }

  Fd dir(open(dir_path.c_str(), O_RDONLY | O_DIRECTORY));
  ASSERT_TRUE(dir.valid());
  std::map<std::string, int> seen;
  int removed = 0;
  int added = 0;
  int batches = 0;
  for (;;) {
    // 320 bytes hold about ten entries with these names.
    const auto batch = GetDents(dir.get(), 320);
    ASSERT_TRUE(batch) << "getdents64: " << ErrnoName(errno);
    if (batch->empty()) break;
    ++batches;
    for (const RawEntry& entry : *batch) ++seen[entry.name];
    // Between batches: remove two of the doomed names and add two new ones
    // (new names may or may not be listed, so adding stops once the doomed
    // names are gone: a listing that keeps finding new entries would not
    // end).
    for (int k = 0; k < 2 && removed < kRemoved; ++k, ++removed) {
      ASSERT_SYS_OK(unlinkat(parent.get(), ("drop-" + std::to_string(removed)).c_str(), 0));
    }
    for (int k = 0; k < 2 && added < kRemoved; ++k, ++added) {
      Fd file(
          openat(parent.get(), ("new-" + std::to_string(added)).c_str(), O_CREAT | O_WRONLY, 0644));
      ASSERT_TRUE(file.valid());
    }
  }
  EXPECT_GT(batches, 100) << "the batches were meant to be small";
  EXPECT_EQ(seen["."], 1);
  EXPECT_EQ(seen[".."], 1);
  for (int i = 0; i < kKept; ++i) {
    EXPECT_EQ(seen["keep-" + std::to_string(i)], 1) << "keep-" << i;
  }
  for (const auto& [name, count] : seen) {
    EXPECT_LE(count, 1) << name << " returned " << count << " times";
    const bool known = name == "." || name == ".." || name.starts_with("keep-") ||
                       name.starts_with("drop-") || name.starts_with("new-");
    EXPECT_TRUE(known) << "unexpected entry " << name;
  }
  // Afterwards the listing is exactly the current contents.
  const auto names = ListDir(dir_path);
  ASSERT_TRUE(names);
  EXPECT_EQ(names->size(), 2u + kKept + (kRemoved - removed) + added);
}

// A name a process removed never shows in its next listing, while other
// processes list the same directory all along (the kernel's readdir cache
// took in listings answered before the change: 0.6% of rounds failed).
TEST_P(NamespaceTest, RemovedNamesNeverShowWhileOthersList) {
  const std::string dir = Path("d");
  ASSERT_SYS_OK(mkdir(dir.c_str(), 0755));
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(WriteFile(dir + "/f" + std::to_string(i), ""));
  std::atomic<bool> stop = false;
  std::vector<std::thread> listers;
  for (int i = 0; i < 2; ++i) {
    listers.emplace_back([&] {
      while (!stop) ListDir(dir);
    });
  }
  const int rounds = cudafs::Scaled(4000);
  int stale_after_unlink = 0;
  int stale_after_rename = 0;
  const auto shows = [&](const std::string& name) {
    const auto names = ListDir(dir);
    return !names || std::find(names->begin(), names->end(), name) != names->end();
  };
  for (int round = 0; round < rounds; ++round) {
    const std::string name = "x" + std::to_string(round);
    ASSERT_TRUE(WriteFile(dir + "/" + name, ""));
    if (round % 2 == 0) {
      ASSERT_SYS_OK(unlink((dir + "/" + name).c_str()));
      stale_after_unlink += shows(name);
    } else {
      ASSERT_SYS_OK(rename((dir + "/" + name).c_str(), Path("moved").c_str()));
      stale_after_rename += shows(name);
    }
  }
  stop = true;
  for (std::thread& lister : listers) lister.join();
  EXPECT_EQ(stale_after_unlink, 0) << "of " << rounds / 2 << " rounds";
  EXPECT_EQ(stale_after_rename, 0) << "of " << rounds / 2 << " rounds";
}

// What nfsd does with a file handle once the kernel has forgotten the
// inode: open_by_handle_at after drop_caches finds a file or directory
// while it has a name, and ESTALE once it is removed.
TEST_P(NamespaceTest, FileHandlesOutliveTheKernelsCacheAndGoStaleOnRemoval) {
  if (geteuid() != 0) GTEST_SKIP() << "open_by_handle_at and drop_caches need root";
  ASSERT_SYS_OK(mkdir(Path("d").c_str(), 0755));
  const std::string data = "handle me";
  ASSERT_TRUE(WriteFile(Path("d/f"), data));
  auto handle_of = [](const std::string& path) {
    auto handle = std::make_unique<char[]>(sizeof(file_handle) + MAX_HANDLE_SZ);
    auto* h = reinterpret_cast<file_handle*>(handle.get());
    h->handle_bytes = MAX_HANDLE_SZ;
    int mount_id;
    EXPECT_SYS_OK(name_to_handle_at(AT_FDCWD, path.c_str(), h, &mount_id, 0));
    return handle;
  };
  auto file = handle_of(Path("d/f"));
  auto dir = handle_of(Path("d"));
  Fd root_fd(open(root().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  auto drop_caches = [] { return WriteFile("/proc/sys/vm/drop_caches", "2"); };
  ASSERT_TRUE(drop_caches());
  Fd opened(open_by_handle_at(root_fd.get(), reinterpret_cast<file_handle*>(file.get()),
                              O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(opened.valid()) << ErrnoName(errno);
  EXPECT_EQ(ReadAll(opened.get()), data);
  opened.Reset();
  Fd opened_dir(open_by_handle_at(root_fd.get(), reinterpret_cast<file_handle*>(dir.get()),
                                  O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  EXPECT_TRUE(opened_dir.valid()) << ErrnoName(errno);
  opened_dir.Reset();
  ASSERT_SYS_OK(unlink(Path("d/f").c_str()));
  ASSERT_TRUE(drop_caches());
  EXPECT_ERRNO(open_by_handle_at(root_fd.get(), reinterpret_cast<file_handle*>(file.get()),
                                 O_RDONLY | O_CLOEXEC),
               ESTALE);
}

// `ls -l`: a listing followed by lstat of every entry (the kernel fills its
// cache from READDIRPLUS) shows the current attributes of each.
TEST_P(NamespaceTest, ListingThenStatShowsCurrentAttributes) {
  ScopedUmask umask(0);
  ASSERT_SYS_OK(mkdir(Path("d").c_str(), 0755));
  std::map<std::string, std::pair<mode_t, off_t>> expected;
  for (int i = 0; i < 64; ++i) {
    // (Not "f" + std::to_string(i): GCC 12 warns about that falsely.)
    std::string name = "f";
    name += std::to_string(i);
    const mode_t mode = 0600 | (i % 8);
    ASSERT_TRUE(WriteFile(Path("d/" + name), std::string(i * 100, 'x'), mode));
    expected[name] = {S_IFREG | mode, i * 100};
  }
  ASSERT_SYS_OK(mkdir(Path("d/sub").c_str(), 0711));
  expected["sub"] = {S_IFDIR | 0711, -1};
  ASSERT_SYS_OK(symlink("f1", Path("d/link").c_str()));
  expected["link"] = {S_IFLNK | 0777, 2};

  auto check = [&](const std::string& when) {
    for (const RawEntry& entry : ReadAllEntries(Path("d"))) {
      if (entry.name == "." || entry.name == "..") continue;
      const auto st = StatPath(Path("d/" + entry.name));
      ASSERT_TRUE(st) << entry.name;
      ASSERT_TRUE(expected.count(entry.name)) << "unexpected entry " << entry.name;
      const auto& [mode, size] = expected[entry.name];
      EXPECT_EQ(st->st_ino, entry.ino) << when << entry.name;
      EXPECT_EQ(st->st_mode, mode) << when << entry.name;
      if (size >= 0) {
        EXPECT_EQ(st->st_size, size) << when << entry.name;
      }
      EXPECT_EQ(st->st_uid, geteuid()) << when << entry.name;
      EXPECT_EQ(st->st_nlink, S_ISDIR(mode) ? 2u : 1u) << when << entry.name;
    }
  };
  check("first listing: ");
  // Change every file after the kernel has cached its attributes; the next
  // listing must not show the old ones.
  for (int i = 0; i < 64; ++i) {
    std::string name = "f";
    name += std::to_string(i);
    ASSERT_SYS_OK(truncate(Path("d/" + name).c_str(), i * 7));
    ASSERT_SYS_OK(chmod(Path("d/" + name).c_str(), 0640));
    expected[name] = {S_IFREG | 0640, i * 7};
  }
  check("after changes: ");
}

// ---------------------------------------------------------------------------
// Inode numbers and link counts

TEST_P(NamespaceTest, InodeNumbersAreStableAndDistinct) {
  ASSERT_TRUE(WriteFile(Path("a"), "a"));
  ASSERT_TRUE(WriteFile(Path("b"), "b"));
  ASSERT_SYS_OK(mkdir(Path("d").c_str(), 0755));
  const ino_t a = InodeOf(Path("a"));
  const ino_t b = InodeOf(Path("b"));
  const ino_t d = InodeOf(Path("d"));
  EXPECT_NE(a, 0u);
  EXPECT_NE(a, b);
  EXPECT_NE(a, d);
  EXPECT_NE(b, d);
  // Same through an open descriptor, after a rename and across directories.
  Fd fd(open(Path("a").c_str(), O_RDONLY));
  struct stat st;
  ASSERT_SYS_OK(fstat(fd.get(), &st));
  EXPECT_EQ(st.st_ino, a);
  ASSERT_SYS_OK(rename(Path("a").c_str(), Path("d/a2").c_str()));
  EXPECT_EQ(InodeOf(Path("d/a2")), a);
  ASSERT_SYS_OK(rename(Path("d").c_str(), Path("d2").c_str()));
  EXPECT_EQ(InodeOf(Path("d2")), d);
  EXPECT_EQ(InodeOf(Path("d2/a2")), a);
  EXPECT_EQ(InodeOf(Path("b")), b);
}

TEST_P(NamespaceTest, DirectoryLinkCountIsTwoPlusSubdirectories) {
  const nlink_t root_links = LinksOf(root());
  ASSERT_SYS_OK(mkdir(Path("d").c_str(), 0755));
  EXPECT_EQ(LinksOf(root()), root_links + 1);
  EXPECT_EQ(LinksOf(Path("d")), 2u);
  for (int i = 0; i < 5; ++i) ASSERT_SYS_OK(mkdir(Path("d/s" + std::to_string(i)).c_str(), 0755));
  // Files do not count.
  ASSERT_TRUE(WriteFile(Path("d/file"), ""));
  ASSERT_SYS_OK(symlink("s0", Path("d/link").c_str()));
  EXPECT_EQ(LinksOf(Path("d")), 7u);
  ASSERT_SYS_OK(rmdir(Path("d/s4").c_str()));
  EXPECT_EQ(LinksOf(Path("d")), 6u);
  // Moving a subdirectory moves its ".." link.
  ASSERT_SYS_OK(mkdir(Path("e").c_str(), 0755));
  ASSERT_SYS_OK(rename(Path("d/s3").c_str(), Path("e/s3").c_str()));
  EXPECT_EQ(LinksOf(Path("d")), 5u);
  EXPECT_EQ(LinksOf(Path("e")), 3u);
  EXPECT_EQ(InodeOf(Path("e/s3/..")), InodeOf(Path("e")));
  // Renaming within a directory changes nothing.
  ASSERT_SYS_OK(rename(Path("d/s2").c_str(), Path("d/s2-renamed").c_str()));
  EXPECT_EQ(LinksOf(Path("d")), 5u);
  EXPECT_EQ(LinksOf(root()), root_links + 2);
}

// ---------------------------------------------------------------------------
// unlink

TEST_P(NamespaceTest, Unlink) {
  ASSERT_SYS_OK(mkdir(Path("dir").c_str(), 0755));
  EXPECT_ERRNO(unlink(Path("dir").c_str()), EISDIR);
  EXPECT_ERRNO(unlink(Path("missing").c_str()), ENOENT);
  EXPECT_ERRNO(unlink(Path("dir/missing").c_str()), ENOENT);
  EXPECT_TRUE(StatPath(Path("dir")));

  // An open file outlives its name.
  const std::string data = RandomBytes(10000, 1);
  ASSERT_TRUE(WriteFile(Path("file"), data));
  Fd fd(open(Path("file").c_str(), O_RDWR));
  ASSERT_TRUE(fd.valid());
  ASSERT_SYS_OK(unlink(Path("file").c_str()));
  EXPECT_FALSE(StatPath(Path("file")));
  EXPECT_EQ(ListDir(root()), (std::vector<std::string>{".", "..", "dir"}));
  struct stat st;
  ASSERT_SYS_OK(fstat(fd.get(), &st));
  EXPECT_EQ(st.st_nlink, 0u);
  EXPECT_TRUE(BytesEqual(ReadAt(fd.get(), 0, data.size()).value_or(""), data));
  EXPECT_TRUE(WriteAll(fd.get(), "more", data.size()));
  EXPECT_EQ(ReadAt(fd.get(), data.size(), 4), "more");
  // The name can be reused for a new, different file.
  ASSERT_TRUE(WriteFile(Path("file"), "new"));
  EXPECT_NE(InodeOf(Path("file")), st.st_ino);
  EXPECT_EQ(ReadFile(Path("file")), "new");
}

// ---------------------------------------------------------------------------
// rename

TEST_P(NamespaceTest, RenameWithinAndAcrossDirectories) {
  ASSERT_TRUE(WriteFile(Path("a"), "payload"));
  const ino_t ino = InodeOf(Path("a"));
  ASSERT_SYS_OK(rename(Path("a").c_str(), Path("b").c_str()));
  EXPECT_FALSE(StatPath(Path("a")));
  EXPECT_EQ(InodeOf(Path("b")), ino);
  EXPECT_EQ(ReadFile(Path("b")), "payload");

  ASSERT_SYS_OK(mkdir(Path("d1").c_str(), 0755));
  ASSERT_SYS_OK(mkdir(Path("d2").c_str(), 0755));
  ASSERT_SYS_OK(rename(Path("b").c_str(), Path("d1/c").c_str()));
  ASSERT_SYS_OK(rename(Path("d1/c").c_str(), Path("d2/c").c_str()));
  EXPECT_EQ(ListDir(Path("d1")), (std::vector<std::string>{".", ".."}));
  EXPECT_EQ(ListDir(Path("d2")), (std::vector<std::string>{".", "..", "c"}));
  EXPECT_EQ(InodeOf(Path("d2/c")), ino);
  EXPECT_EQ(ReadFile(Path("d2/c")), "payload");

  // A directory moves with its contents.
  ASSERT_TRUE(WriteFile(Path("d1/inner"), "inner"));
  ASSERT_SYS_OK(rename(Path("d1").c_str(), Path("d2/moved").c_str()));
  EXPECT_EQ(ReadFile(Path("d2/moved/inner")), "inner");
  EXPECT_EQ(ListDir(root()), (std::vector<std::string>{".", "..", "d2"}));

  EXPECT_ERRNO(rename(Path("missing").c_str(), Path("x").c_str()), ENOENT);
  EXPECT_ERRNO(rename(Path("d2/c").c_str(), Path("missing/c").c_str()), ENOENT);
}

TEST_P(NamespaceTest, RenameOverExistingFileReplacesIt) {
  ASSERT_TRUE(WriteFile(Path("src"), "new contents"));
  ASSERT_TRUE(WriteFile(Path("dst"), "old contents"));
  const ino_t src = InodeOf(Path("src"));
  Fd old_fd(open(Path("dst").c_str(), O_RDONLY));
  ASSERT_TRUE(old_fd.valid());
  ASSERT_SYS_OK(rename(Path("src").c_str(), Path("dst").c_str()));
  EXPECT_EQ(InodeOf(Path("dst")), src);
  EXPECT_EQ(ReadFile(Path("dst")), "new contents");
  EXPECT_EQ(ListDir(root()), (std::vector<std::string>{".", "..", "dst"}));
  // The replaced inode has no names left but stays readable while open.
  struct stat st;
  ASSERT_SYS_OK(fstat(old_fd.get(), &st));
  EXPECT_EQ(st.st_nlink, 0u);
  EXPECT_NE(st.st_ino, src);
  EXPECT_EQ(ReadAt(old_fd.get(), 0, 100), "old contents");
}

TEST_P(NamespaceTest, RenameDirectoryOverDirectory) {
  ASSERT_SYS_OK(mkdir(Path("src").c_str(), 0755));
  ASSERT_TRUE(WriteFile(Path("src/file"), "x"));
  ASSERT_SYS_OK(mkdir(Path("empty").c_str(), 0755));
  ASSERT_SYS_OK(mkdir(Path("full").c_str(), 0755));
  ASSERT_TRUE(WriteFile(Path("full/file"), "y"));
  const nlink_t root_links = LinksOf(root());

  EXPECT_ERRNO(rename(Path("src").c_str(), Path("full").c_str()), ENOTEMPTY);
  EXPECT_EQ(ReadFile(Path("full/file")), "y");

  const ino_t src = InodeOf(Path("src"));
  ASSERT_SYS_OK(rename(Path("src").c_str(), Path("empty").c_str()));
  EXPECT_EQ(InodeOf(Path("empty")), src);
  EXPECT_EQ(ReadFile(Path("empty/file")), "x");
  EXPECT_FALSE(StatPath(Path("src")));
  EXPECT_EQ(LinksOf(root()), root_links - 1);
}

TEST_P(NamespaceTest, RenameBetweenFileAndDirectoryFails) {
  ASSERT_SYS_OK(mkdir(Path("dir").c_str(), 0755));
  ASSERT_TRUE(WriteFile(Path("file"), "f"));
  EXPECT_ERRNO(rename(Path("dir").c_str(), Path("file").c_str()), ENOTDIR);
  EXPECT_ERRNO(rename(Path("file").c_str(), Path("dir").c_str()), EISDIR);
  EXPECT_TRUE(S_ISDIR(StatPath(Path("dir"))->st_mode));
  EXPECT_EQ(ReadFile(Path("file")), "f");
}

TEST_P(NamespaceTest, RenameNoReplace) {
  ASSERT_TRUE(WriteFile(Path("a"), "a"));
  ASSERT_TRUE(WriteFile(Path("b"), "b"));
  EXPECT_ERRNO(
      renameat2(AT_FDCWD, Path("a").c_str(), AT_FDCWD, Path("b").c_str(), RENAME_NOREPLACE),
      EEXIST);
  EXPECT_EQ(ReadFile(Path("a")), "a");
  EXPECT_EQ(ReadFile(Path("b")), "b");
  ASSERT_SYS_OK(
      renameat2(AT_FDCWD, Path("a").c_str(), AT_FDCWD, Path("c").c_str(), RENAME_NOREPLACE));
  EXPECT_EQ(ListDir(root()), (std::vector<std::string>{".", "..", "b", "c"}));
  EXPECT_ERRNO(renameat2(AT_FDCWD, Path("b").c_str(), AT_FDCWD, Path("c").c_str(),
                         RENAME_NOREPLACE | RENAME_EXCHANGE),
               EINVAL);
}

TEST_P(NamespaceTest, RenameExchangeFiles) {
  ASSERT_TRUE(WriteFile(Path("a"), "first"));
  ASSERT_SYS_OK(mkdir(Path("d").c_str(), 0755));
  ASSERT_TRUE(WriteFile(Path("d/b"), "second"));
  const ino_t a = InodeOf(Path("a"));
  const ino_t b = InodeOf(Path("d/b"));
  ASSERT_SYS_OK(
      renameat2(AT_FDCWD, Path("a").c_str(), AT_FDCWD, Path("d/b").c_str(), RENAME_EXCHANGE));
  EXPECT_EQ(InodeOf(Path("a")), b);
  EXPECT_EQ(InodeOf(Path("d/b")), a);
  EXPECT_EQ(ReadFile(Path("a")), "second");
  EXPECT_EQ(ReadFile(Path("d/b")), "first");
  EXPECT_ERRNO(
      renameat2(AT_FDCWD, Path("a").c_str(), AT_FDCWD, Path("missing").c_str(), RENAME_EXCHANGE),
      ENOENT);
}

TEST_P(NamespaceTest, RenameExchangeFileAndDirectoryMovesParentLinks) {
  ASSERT_SYS_OK(mkdir(Path("p1").c_str(), 0755));
  ASSERT_SYS_OK(mkdir(Path("p2").c_str(), 0755));
  ASSERT_SYS_OK(mkdir(Path("p1/dir").c_str(), 0755));
  ASSERT_TRUE(WriteFile(Path("p1/dir/inside"), "in"));
  ASSERT_TRUE(WriteFile(Path("p2/file"), "file"));
  ASSERT_EQ(LinksOf(Path("p1")), 3u);
  ASSERT_EQ(LinksOf(Path("p2")), 2u);
  const ino_t dir = InodeOf(Path("p1/dir"));
  ASSERT_SYS_OK(renameat2(AT_FDCWD, Path("p1/dir").c_str(), AT_FDCWD, Path("p2/file").c_str(),
                          RENAME_EXCHANGE));
  EXPECT_EQ(InodeOf(Path("p2/file")), dir);
  EXPECT_TRUE(S_ISDIR(StatPath(Path("p2/file"))->st_mode));
  EXPECT_TRUE(S_ISREG(StatPath(Path("p1/dir"))->st_mode));
  EXPECT_EQ(ReadFile(Path("p1/dir")), "file");
  EXPECT_EQ(ReadFile(Path("p2/file/inside")), "in");
  EXPECT_EQ(LinksOf(Path("p1")), 2u);
  EXPECT_EQ(LinksOf(Path("p2")), 3u);
  EXPECT_EQ(InodeOf(Path("p2/file/..")), InodeOf(Path("p2")));

  // Two directories in different parents: the counts stay.
  ASSERT_SYS_OK(mkdir(Path("p1/other").c_str(), 0755));
  ASSERT_SYS_OK(renameat2(AT_FDCWD, Path("p1/other").c_str(), AT_FDCWD, Path("p2/file").c_str(),
                          RENAME_EXCHANGE));
  EXPECT_EQ(LinksOf(Path("p1")), 3u);
  EXPECT_EQ(LinksOf(Path("p2")), 3u);
  EXPECT_EQ(ReadFile(Path("p1/other/inside")), "in");
  EXPECT_EQ(InodeOf(Path("p1/other/..")), InodeOf(Path("p1")));
}

TEST_P(NamespaceTest, RenameDirectoryIntoItsOwnSubtreeIsEINVAL) {
  ASSERT_SYS_OK(mkdir(Path("a").c_str(), 0755));
  ASSERT_SYS_OK(mkdir(Path("a/b").c_str(), 0755));
  ASSERT_SYS_OK(mkdir(Path("a/b/c").c_str(), 0755));
  EXPECT_ERRNO(rename(Path("a").c_str(), Path("a/x").c_str()), EINVAL);
  EXPECT_ERRNO(rename(Path("a").c_str(), Path("a/b/c/x").c_str()), EINVAL);
  // An existing target inside the subtree: the directory is not empty, but
  // the loop is what the kernel reports.
  EXPECT_ERRNO(rename(Path("a").c_str(), Path("a/b/c").c_str()), EINVAL, ENOTEMPTY);
  EXPECT_ERRNO(
      renameat2(AT_FDCWD, Path("a").c_str(), AT_FDCWD, Path("a/b/c").c_str(), RENAME_EXCHANGE),
      EINVAL);
  EXPECT_TRUE(StatPath(Path("a/b/c")));
  EXPECT_EQ(ListDir(root()), (std::vector<std::string>{".", "..", "a"}));
}

TEST_P(NamespaceTest, RenameToItselfDoesNothing) {
  ASSERT_TRUE(WriteFile(Path("a"), "same"));
  const ino_t ino = InodeOf(Path("a"));
  ASSERT_SYS_OK(rename(Path("a").c_str(), Path("a").c_str()));
  EXPECT_EQ(InodeOf(Path("a")), ino);
  EXPECT_EQ(ReadFile(Path("a")), "same");
  // Two names of one inode: rename between them does nothing, both stay.
  ASSERT_SYS_OK(link(Path("a").c_str(), Path("b").c_str()));
  ASSERT_SYS_OK(rename(Path("a").c_str(), Path("b").c_str()));
  EXPECT_EQ(ListDir(root()), (std::vector<std::string>{".", "..", "a", "b"}));
  EXPECT_EQ(LinksOf(Path("a")), 2u);
  ASSERT_SYS_OK(mkdir(Path("d").c_str(), 0755));
  ASSERT_SYS_OK(rename(Path("d").c_str(), Path("d").c_str()));
  EXPECT_TRUE(StatPath(Path("d")));
}

// ---------------------------------------------------------------------------
// Hard links

TEST_P(NamespaceTest, HardLinks) {
  ASSERT_TRUE(WriteFile(Path("a"), "shared"));
  ASSERT_SYS_OK(mkdir(Path("d").c_str(), 0755));
  ASSERT_SYS_OK(link(Path("a").c_str(), Path("b").c_str()));
  ASSERT_SYS_OK(link(Path("a").c_str(), Path("d/c").c_str()));
  EXPECT_EQ(LinksOf(Path("a")), 3u);
  EXPECT_EQ(LinksOf(Path("d/c")), 3u);
  EXPECT_EQ(InodeOf(Path("b")), InodeOf(Path("a")));
  EXPECT_EQ(InodeOf(Path("d/c")), InodeOf(Path("a")));

  // One file: a write through one name shows through the others.
  {
    Fd fd(open(Path("b").c_str(), O_WRONLY | O_APPEND));
    ASSERT_TRUE(fd.valid());
    ASSERT_EQ(write(fd.get(), " data", 5), 5);
  }
  EXPECT_EQ(ReadFile(Path("a")), "shared data");
  EXPECT_EQ(ReadFile(Path("d/c")), "shared data");

  EXPECT_ERRNO(link(Path("a").c_str(), Path("b").c_str()), EEXIST);
  EXPECT_ERRNO(link(Path("d").c_str(), Path("d-link").c_str()), EPERM);
  EXPECT_ERRNO(link(Path("missing").c_str(), Path("x").c_str()), ENOENT);

  ASSERT_SYS_OK(unlink(Path("a").c_str()));
  EXPECT_EQ(LinksOf(Path("b")), 2u);
  ASSERT_SYS_OK(unlink(Path("d/c").c_str()));
  EXPECT_EQ(LinksOf(Path("b")), 1u);
  EXPECT_EQ(ReadFile(Path("b")), "shared data");
  // A link brings the count back up.
  ASSERT_SYS_OK(link(Path("b").c_str(), Path("a").c_str()));
  EXPECT_EQ(LinksOf(Path("b")), 2u);
  // link(2) does not follow a symlink: the new name is a second name of
  // the link itself.
  ASSERT_SYS_OK(symlink("b", Path("symlink").c_str()));
  ASSERT_SYS_OK(link(Path("symlink").c_str(), Path("symlink2").c_str()));
  EXPECT_EQ(LinksOf(Path("symlink")), 2u);
  EXPECT_TRUE(S_ISLNK(StatPath(Path("symlink2"))->st_mode));
  EXPECT_EQ(InodeOf(Path("symlink2")), InodeOf(Path("symlink")));
  EXPECT_EQ(LinksOf(Path("b")), 2u);
}

// ---------------------------------------------------------------------------
// Symbolic links

TEST_P(NamespaceTest, SymlinkTargetsRoundTrip) {
  for (size_t length : {1, 2, 100, 255, 256, 1000, 4094, 4095}) {
    std::string target;
    for (size_t i = 0; i < length; ++i) target += static_cast<char>('a' + i % 26);
    // Slashes make it a long path rather than one long name.
    for (size_t i = 50; i < length; i += 51) target[i] = '/';
    const std::string link_path = Path("link" + std::to_string(length));
    ASSERT_SYS_OK(symlink(target.c_str(), link_path.c_str())) << "length " << length;
    std::string got(8192, '\0');
    const ssize_t n = readlink(link_path.c_str(), got.data(), got.size());
    ASSERT_SYS_OK(n) << "length " << length;
    got.resize(n);
    EXPECT_EQ(got, target) << "length " << length;
    const auto st = StatPath(link_path);
    ASSERT_TRUE(st);
    EXPECT_TRUE(S_ISLNK(st->st_mode));
    EXPECT_EQ(st->st_size, static_cast<off_t>(length));
  }
  // A short buffer gets a truncated target, not an error.
  char small[4];
  EXPECT_EQ(readlink(Path("link100").c_str(), small, sizeof small), 4);
  EXPECT_EQ(std::string(small, 4), "abcd");

  const std::string too_long(4096, 'x');
  EXPECT_ERRNO(symlink(too_long.c_str(), Path("toolong").c_str()), ENAMETOOLONG);
  EXPECT_ERRNO(symlink("", Path("empty").c_str()), ENOENT);
  EXPECT_ERRNO(symlink("x", Path("link1").c_str()), EEXIST);
  ASSERT_TRUE(WriteFile(Path("file"), ""));
  char buffer[16];
  EXPECT_ERRNO(readlink(Path("file").c_str(), buffer, sizeof buffer), EINVAL);
}

TEST_P(NamespaceTest, SymlinkFollowingAndDanglingLinks) {
  ASSERT_TRUE(WriteFile(Path("target"), "through the link"));
  ASSERT_SYS_OK(symlink("target", Path("link").c_str()));
  ASSERT_SYS_OK(mkdir(Path("dir").c_str(), 0755));
  ASSERT_SYS_OK(symlink("../target", Path("dir/up").c_str()));
  ASSERT_SYS_OK(symlink(Path("dir").c_str(), Path("absolute").c_str()));

  struct stat followed, link_st;
  ASSERT_SYS_OK(stat(Path("link").c_str(), &followed));
  ASSERT_SYS_OK(lstat(Path("link").c_str(), &link_st));
  EXPECT_TRUE(S_ISREG(followed.st_mode));
  EXPECT_EQ(followed.st_ino, InodeOf(Path("target")));
  EXPECT_TRUE(S_ISLNK(link_st.st_mode));
  EXPECT_NE(link_st.st_ino, followed.st_ino);
  EXPECT_EQ(link_st.st_mode & 07777, 0777u);
  EXPECT_EQ(ReadFile(Path("link")), "through the link");
  EXPECT_EQ(ReadFile(Path("dir/up")), "through the link");
  EXPECT_EQ(ReadFile(Path("absolute/up")), "through the link");
  EXPECT_ERRNO(open(Path("link").c_str(), O_RDONLY | O_NOFOLLOW), ELOOP);

  // Dangling: the link exists, what it names does not.
  ASSERT_SYS_OK(unlink(Path("target").c_str()));
  EXPECT_TRUE(StatPath(Path("link")));
  EXPECT_ERRNO(stat(Path("link").c_str(), &followed), ENOENT);
  EXPECT_ERRNO(open(Path("link").c_str(), O_RDONLY), ENOENT);
  // Exclusive creation does not follow the link: the name exists.
  EXPECT_ERRNO(open(Path("link").c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644), EEXIST);
  EXPECT_FALSE(StatPath(Path("target")));
  // Creating through a dangling link creates its target.
  ASSERT_TRUE(WriteFile(Path("link"), "recreated"));
  EXPECT_EQ(ReadFile(Path("target")), "recreated");
  // Removing the link leaves the target.
  ASSERT_SYS_OK(unlink(Path("link").c_str()));
  EXPECT_TRUE(StatPath(Path("target")));
}

TEST_P(NamespaceTest, SymlinkLoopsAreELOOP) {
  ASSERT_SYS_OK(symlink("self", Path("self").c_str()));
  ASSERT_SYS_OK(symlink("pong", Path("ping").c_str()));
  ASSERT_SYS_OK(symlink("ping", Path("pong").c_str()));
  struct stat st;
  EXPECT_ERRNO(stat(Path("self").c_str(), &st), ELOOP);
  EXPECT_ERRNO(stat(Path("ping").c_str(), &st), ELOOP);
  EXPECT_ERRNO(open(Path("pong").c_str(), O_RDONLY), ELOOP);
  EXPECT_ERRNO(stat(Path("ping/below").c_str(), &st), ELOOP);
  EXPECT_SYS_OK(lstat(Path("ping").c_str(), &st));
}

// ---------------------------------------------------------------------------
// Special files

TEST_P(NamespaceTest, MknodMakesSpecialFiles) {
  struct Node {
    std::string name;
    mode_t type;
    dev_t rdev;
  };
  const std::vector<Node> nodes = {
      {"fifo", S_IFIFO, 0},
      {"socket", S_IFSOCK, 0},
      {"char", S_IFCHR, makedev(1, 3)},
      // Minor numbers past 255 and majors past 255 use every bit of the
      // kernel's 32-bit encoding.
      {"block", S_IFBLK, makedev(259, 0x12345)},
      {"char-big", S_IFCHR, makedev(4095, 0xfffff)},
  };
  for (const Node& node : nodes) {
    ASSERT_SYS_OK(mknod(Path(node.name).c_str(), node.type | 0640, node.rdev)) << node.name;
    const auto st = StatPath(Path(node.name));
    ASSERT_TRUE(st) << node.name;
    EXPECT_EQ(st->st_mode & S_IFMT, node.type) << node.name;
    EXPECT_EQ(st->st_mode & 07777, 0640u) << node.name;
    EXPECT_EQ(st->st_size, 0) << node.name;
    if (node.type == S_IFCHR || node.type == S_IFBLK) {
      EXPECT_EQ(major(st->st_rdev), major(node.rdev)) << node.name;
      EXPECT_EQ(minor(st->st_rdev), minor(node.rdev)) << node.name;
    }
  }
  EXPECT_ERRNO(mknod(Path("fifo").c_str(), S_IFIFO | 0644, 0), EEXIST);
  // Regular files through mknod too.
  ASSERT_SYS_OK(mknod(Path("regular").c_str(), S_IFREG | 0600, 0));
  EXPECT_TRUE(S_ISREG(StatPath(Path("regular"))->st_mode));
  EXPECT_EQ(ReadFile(Path("regular")), "");
}

TEST_P(NamespaceTest, FifoCarriesDataFromWriterToReader) {
  ASSERT_SYS_OK(mkfifo(Path("fifo").c_str(), 0600));
  const std::string message = RandomBytes(100000, 7);  // more than a pipe buffer
  std::optional<std::string> received;
  std::thread reader([&] {
    Fd fd(open(Path("fifo").c_str(), O_RDONLY));
    if (!fd.valid()) return;
    std::string data;
    char buffer[4096];
    for (ssize_t n; (n = read(fd.get(), buffer, sizeof buffer)) > 0;) data.append(buffer, n);
    received = data;
  });
  {
    Fd fd(open(Path("fifo").c_str(), O_WRONLY));
    EXPECT_TRUE(fd.valid()) << ErrnoName(errno);
    if (fd.valid()) {
      size_t done = 0;
      while (done < message.size()) {
        const ssize_t n = write(fd.get(), message.data() + done, message.size() - done);
        if (n <= 0) break;
        done += n;
      }
      EXPECT_EQ(done, message.size());
    }
  }
  reader.join();
  ASSERT_TRUE(received);
  EXPECT_TRUE(BytesEqual(*received, message));
}

TEST_P(NamespaceTest, UnixSocketBindsAndConnects) {
  const std::string path = Path("sock");
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  ASSERT_LT(path.size(), sizeof address.sun_path);
  memcpy(address.sun_path, path.c_str(), path.size() + 1);
  Fd server(socket(AF_UNIX, SOCK_STREAM, 0));
  ASSERT_SYS_OK(bind(server.get(), reinterpret_cast<sockaddr*>(&address), sizeof address));
  ASSERT_SYS_OK(listen(server.get(), 1));
  EXPECT_TRUE(S_ISSOCK(StatPath(path)->st_mode));
  Fd client(socket(AF_UNIX, SOCK_STREAM, 0));
  ASSERT_SYS_OK(connect(client.get(), reinterpret_cast<sockaddr*>(&address), sizeof address));
  Fd accepted(accept(server.get(), nullptr, nullptr));
  ASSERT_TRUE(accepted.valid());
  ASSERT_EQ(write(client.get(), "ping", 4), 4);
  char buffer[4];
  ASSERT_EQ(read(accepted.get(), buffer, 4), 4);
  EXPECT_EQ(std::string(buffer, 4), "ping");
  // Binding to an existing name fails.
  Fd second(socket(AF_UNIX, SOCK_STREAM, 0));
  EXPECT_ERRNO(bind(second.get(), reinterpret_cast<sockaddr*>(&address), sizeof address),
               EADDRINUSE);
}

// ---------------------------------------------------------------------------
// Names

TEST_P(NamespaceTest, NameLengthLimit) {
  const std::string longest(255, 'n');
  const std::string too_long(256, 'n');
  ASSERT_TRUE(WriteFile(Path(longest), "max"));
  EXPECT_EQ(ReadFile(Path(longest)), "max");
  EXPECT_EQ(ListDir(root()), (std::vector<std::string>{".", "..", longest}));
  EXPECT_ERRNO(mkdir(Path(longest).c_str(), 0755), EEXIST);
  struct stat st;
  EXPECT_ERRNO(open(Path(too_long).c_str(), O_CREAT | O_WRONLY, 0644), ENAMETOOLONG);
  EXPECT_ERRNO(stat(Path(too_long).c_str(), &st), ENAMETOOLONG);
  EXPECT_ERRNO(mkdir(Path(too_long).c_str(), 0755), ENAMETOOLONG);
  EXPECT_ERRNO(symlink("x", Path(too_long).c_str()), ENAMETOOLONG);
  EXPECT_ERRNO(link(Path(longest).c_str(), Path(too_long).c_str()), ENAMETOOLONG);
  EXPECT_ERRNO(rename(Path(longest).c_str(), Path(too_long).c_str()), ENAMETOOLONG);
  EXPECT_ERRNO(mknod(Path(too_long).c_str(), S_IFIFO | 0644, 0), ENAMETOOLONG);
  EXPECT_ERRNO(unlink(Path(too_long).c_str()), ENAMETOOLONG);
  EXPECT_ERRNO(rmdir(Path(too_long).c_str()), ENAMETOOLONG);
  // A 255-byte directory name works as a path component.
  ASSERT_SYS_OK(unlink(Path(longest).c_str()));
  ASSERT_SYS_OK(mkdir(Path(longest).c_str(), 0755));
  ASSERT_TRUE(WriteFile(Path(longest + "/" + longest), "deep"));
  EXPECT_EQ(ReadFile(Path(longest + "/" + longest)), "deep");
  ASSERT_SYS_OK(rename(Path(longest + "/" + longest).c_str(), Path("short").c_str()));
  EXPECT_EQ(ReadFile(Path("short")), "deep");
}

TEST_P(NamespaceTest, NamesWithArbitraryBytesRoundTrip) {
  std::vector<std::string> names;
  std::string every_byte;
  for (int byte = 1; byte <= 0xff; ++byte) {
    if (byte == '/') continue;
    every_byte += static_cast<char>(byte);
    if (byte != '.') names.emplace_back(1, static_cast<char>(byte));
  }
  names.push_back(every_byte);  // 254 bytes
  names.push_back("...");
  names.push_back(".hidden");
  names.push_back("\xff\xfe invalid UTF-8 \xc0\x80");
  names.push_back("new\nline");
  names.push_back(" trailing space ");
  for (const std::string& name : names) {
    ASSERT_TRUE(WriteFile(Path(name), name)) << "name of " << name.size() << " bytes";
  }
  std::set<std::string> expected(names.begin(), names.end());
  expected.insert(".");
  expected.insert("..");
  const auto listed = ListDir(root());
  ASSERT_TRUE(listed);
  const std::set<std::string> listed_set(listed->begin(), listed->end());
  EXPECT_EQ(listed->size(), listed_set.size()) << "a name was listed twice";
  for (const std::string& name : expected) {
    EXPECT_TRUE(listed_set.count(name)) << "not listed: " << testing::PrintToString(name);
  }
  for (const std::string& name : listed_set) {
    EXPECT_TRUE(expected.count(name)) << "listed but not created: " << testing::PrintToString(name);
  }
  for (const std::string& name : names) {
    EXPECT_EQ(ReadFile(Path(name)), name);
  }
  // They survive a rename and removal by name.
  ASSERT_SYS_OK(rename(Path(every_byte).c_str(), Path(every_byte.substr(1)).c_str()));
  EXPECT_EQ(ReadFile(Path(every_byte.substr(1))), every_byte);
  for (const std::string& name : names) {
    if (name == every_byte) continue;
    ASSERT_SYS_OK(unlink(Path(name).c_str()));
  }
  EXPECT_EQ(ListDir(root()), Sorted({".", "..", every_byte.substr(1)}));
}

TEST_P(NamespaceTest, StatfsReportsNameMax) {
  const auto st = StatFs(root());
  ASSERT_TRUE(st);
  EXPECT_EQ(st->f_namemax, 255u);
}

CUDAFS_INSTANTIATE_BACKENDS(NamespaceTest);

}  // namespace
}  // namespace cudafs_test

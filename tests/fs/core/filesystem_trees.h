// Trees in a Filesystem for tests that compare a filesystem with what a
// successor made of it: making one (MakeIn, WriteNewFile, SeededBytes),
// and DescribeTree, everything a user sees of it, by path (its stat
// fields, extended attributes, bytes or link target).
#ifndef CUDAFS_TESTS_FS_CORE_FILESYSTEM_TREES_H_
#define CUDAFS_TESTS_FS_CORE_FILESYSTEM_TREES_H_

#include <sys/stat.h>

#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "fs/core/filesystem.h"
#include "gtest/gtest.h"

namespace cudafs {

// Makes `name` in `parent`, a directory or a node of `mode`, as root; its
// number (0, with a failure, when it could not).
inline InodeNumber MakeIn(Filesystem& fs, InodeNumber parent, const std::string& name, mode_t mode,
                          dev_t rdev = 0) {
  absl::StatusOr<struct stat> st = S_ISDIR(mode)
                                       ? fs.MakeDirectory(parent, name, mode, Caller::Root())
                                       : fs.MakeNode(parent, name, mode, rdev, Caller::Root());
  EXPECT_TRUE(st.ok()) << name << ": " << st.status();
  return st.ok() ? st->st_ino : 0;
}

// A new regular file `name` in `parent` holding `bytes` from `offset`.
inline InodeNumber WriteNewFile(Filesystem& fs, InodeNumber parent, const std::string& name,
                                const std::string& bytes, uint64_t offset = 0) {
  const InodeNumber ino = MakeIn(fs, parent, name, S_IFREG | 0640);
  absl::StatusOr<size_t> written =
      fs.Write(ino, offset, bytes.data(), bytes.size(), false, Caller::Root());
  EXPECT_TRUE(written.ok() && *written == bytes.size()) << name;
  return ino;
}

// `size` bytes that `seed` decides.
inline std::string SeededBytes(size_t size, uint32_t seed) {
  std::mt19937 random(seed);
  std::string bytes(size, '\0');
  for (char& c : bytes) c = static_cast<char>(random());
  return bytes;
}

struct DescribeOptions {
  bool atimes = true;  // reading moves them (relatime: the first read after a change)
  bool data = true;    // the files' bytes, hashed
};

// The tree below directory `dir`, whose path is `path`.
inline std::map<std::string, std::string> DescribeTree(Filesystem& fs, InodeNumber dir,
                                                       const std::string& path,
                                                       DescribeOptions options = {}) {
  std::map<std::string, std::string> seen;
  std::vector<DirectoryEntry> entries;
  EXPECT_TRUE(fs.ReadDirectory(dir, 0, false, [&](const DirectoryEntry& entry) {
                  entries.push_back(entry);
                  return true;
                }).ok());
  for (const DirectoryEntry& entry : entries) {
    if (entry.name == "." || entry.name == "..") continue;
    const std::string child = path + "/" + entry.name;
    absl::StatusOr<struct stat> st = fs.GetAttributes(entry.attr.st_ino);
    if (!st.ok()) {
      ADD_FAILURE() << child << ": " << st.status();
      continue;
    }
    std::string& out = seen[child];
    out = absl::StrFormat("ino %d mode %o nlink %d uid %d gid %d size %d blocks %d rdev %d "
                          "m %d.%d c %d.%d",
                          st->st_ino, st->st_mode, st->st_nlink, st->st_uid, st->st_gid,
                          st->st_size, st->st_blocks, st->st_rdev, st->st_mtim.tv_sec,
                          st->st_mtim.tv_nsec, st->st_ctim.tv_sec, st->st_ctim.tv_nsec);
    if (options.atimes) {
      absl::StrAppendFormat(&out, " a %d.%d", st->st_atim.tv_sec, st->st_atim.tv_nsec);
    }
    absl::StatusOr<std::string> names = fs.ListExtendedAttributes(st->st_ino, Caller::Root());
    if (names.ok()) {
      for (absl::string_view name : absl::StrSplit(*names, '\0', absl::SkipEmpty())) {
        absl::StatusOr<std::string> value = fs.GetExtendedAttribute(st->st_ino, name);
        absl::StrAppend(&out, " xattr ", name, "=", value.ok() ? *value : "?");
      }
    }
    if (S_ISREG(st->st_mode) && options.data) {
      std::string bytes(st->st_size, '\0');
      absl::StatusOr<size_t> read = fs.Read(st->st_ino, 0, bytes.size(), bytes.data(), false);
      EXPECT_TRUE(read.ok() && *read == bytes.size()) << child;
      absl::StrAppend(&out, " data ", std::hash<std::string>()(bytes));
    } else if (S_ISLNK(st->st_mode)) {
      absl::StrAppend(&out, " target ", fs.ReadLink(st->st_ino).value_or("?"));
    } else if (S_ISDIR(st->st_mode)) {
      const std::map<std::string, std::string> below = DescribeTree(fs, st->st_ino, child, options);
      seen.insert(below.begin(), below.end());
    }
  }
  return seen;
}

}  // namespace cudafs

#endif  // CUDAFS_TESTS_FS_CORE_FILESYSTEM_TREES_H_

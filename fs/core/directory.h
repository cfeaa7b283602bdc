// Directory: the entries of one directory, with readdir cookies that stay
// valid while the directory changes.
//
// Every entry gets a cookie from a per-directory counter when it is inserted,
// and readdir walks entries in cookie order from "the first cookie after X".
// So an entry present for a whole listing is returned exactly once, however
// many entries are created or removed meanwhile, and a removed entry's
// cookie still works as a resume point. Cookies 1 and 2 belong to "." and
// "..". Not thread-safe: the Filesystem's namespace lock guards it.
#ifndef CUDAFS_FS_CORE_DIRECTORY_H_
#define CUDAFS_FS_CORE_DIRECTORY_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace cudafs {

class Directory {
 public:
  static constexpr uint64_t kDotCookie = 1;
  static constexpr uint64_t kDotDotCookie = 2;

  struct Entry {
    uint64_t ino;
    mode_t type;  // S_IFMT bits of the inode, for readdir's d_type
  };

  std::optional<Entry> Find(absl::string_view name) const;
  // False (and no change) when the name exists.
  bool Insert(absl::string_view name, Entry entry);
  // The removed entry, if the name existed.
  std::optional<Entry> Erase(absl::string_view name);
  // Points an existing name at another inode; keeps its cookie (rename over
  // an existing name, RENAME_EXCHANGE).
  void Replace(absl::string_view name, Entry entry);

  // The inode ".." names: the directory that holds this one (the root's
  // own number for the root).
  uint64_t parent() const { return parent_; }
  void set_parent(uint64_t parent) { parent_ = parent; }

  bool empty() const { return by_name_.empty(); }
  size_t size() const { return by_name_.size(); }

  // Calls fn(name, entry, cookie) for entries with cookie > `after`, in
  // cookie order, until fn returns false.
  template <typename Fn>
  void ForEachAfter(uint64_t after, Fn fn) const {
    for (auto it = by_cookie_.upper_bound(after); it != by_cookie_.end(); ++it) {
      const Entry& entry = by_name_.at(it->second).entry;
      if (!fn(absl::string_view(it->second), entry, it->first)) return;
    }
  }

 private:
  struct Slot {
    Entry entry;
    uint64_t cookie;
  };
  absl::flat_hash_map<std::string, Slot> by_name_;
  absl::btree_map<uint64_t, std::string> by_cookie_;
  uint64_t next_cookie_ = kDotDotCookie + 1;
  uint64_t parent_ = 0;
};

}  // namespace cudafs

#endif  // CUDAFS_FS_CORE_DIRECTORY_H_

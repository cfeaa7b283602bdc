// Directory: the entries of one directory, with readdir cookies that stay
// valid while the directory changes.
//
// Every entry gets a cookie from a per-directory counter when it is inserted,
// and readdir walks entries in cookie order from "the first cookie after X".
// So an entry present for a whole listing is returned exactly once, however
// many entries are created or removed meanwhile, and a removed entry's
// cookie still works as a resume point. Cookies 1 and 2 belong to "." and
// "..". Not thread-safe: the Filesystem's namespace lock guards it.
//
// An entry is one allocation (its name, inode, type and cookie), reached
// by name through a hash set and in cookie order through a B-tree of
// pointers: a million names cost about 60 bytes each, most of it that
// allocation.
#ifndef CUDAFS_FS_CORE_DIRECTORY_H_
#define CUDAFS_FS_CORE_DIRECTORY_H_

#include <sys/stat.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <string>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/status/status.h"
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

  // `name`s are at most 255 bytes (NAME_MAX) throughout.
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

  // The cookie the next entry gets, and the cookie of entry `name` (0:
  // none), for the journal's records of single entries.
  uint64_t next_cookie() const { return next_cookie_; }
  uint64_t CookieOf(absl::string_view name) const;

  bool empty() const { return by_name_.empty(); }
  size_t size() const { return by_name_.size(); }

  // The directory as a record of a filesystem image (alloc/base/coding.h),
  // its cookies included: a listing in progress resumes across a restart.
  void EncodeTo(std::string* out) const;
  // Reads such a record into this empty directory. InvalidArgument for a
  // record that is none (names, types and cookies are checked; whether
  // the inodes exist is the caller's business).
  absl::Status DecodeFrom(absl::string_view* in);

  // Calls fn(name, entry, cookie) for entries with cookie > `after`, in
  // cookie order, until fn returns false.
  template <typename Fn>
  void ForEachAfter(uint64_t after, Fn fn) const {
    for (auto it = by_cookie_.upper_bound(after); it != by_cookie_.end(); ++it) {
      const Record& record = **it;
      if (!fn(record.name(), record.entry(), uint64_t{record.cookie})) return;
    }
  }

 private:
  // One entry, its name stored after it in the same allocation (LevelDB's
  // LRUHandle does the same). The type's 4 bits share a word with the
  // cookie: 2^60 inserts into one directory would take decades at a
  // billion a second.
  struct Record;
  struct FreeRecord {
    void operator()(Record* record) const { ::operator delete(record); }
  };
  using OwnedRecord = std::unique_ptr<Record, FreeRecord>;

  struct Record {
    static OwnedRecord Make(absl::string_view name, Entry entry, uint64_t cookie);
    absl::string_view name() const { return absl::string_view(name_data, name_size); }
    Entry entry() const { return Entry{ino, static_cast<mode_t>(type << 12)}; }

    uint64_t ino;
    uint64_t cookie : 60;
    uint64_t type : 4;  // S_IFMT >> 12
    uint8_t name_size;
    char name_data[1];  // name_size bytes, running past the struct
  };

  // Hash and equality by name, for records and for names (heterogeneous
  // lookup, so that finding a name builds nothing).
  struct NameHash {
    using is_transparent = void;
    size_t operator()(absl::string_view name) const { return absl::HashOf(name); }
    size_t operator()(const Record* record) const { return absl::HashOf(record->name()); }
  };
  struct NameEq {
    using is_transparent = void;
    static absl::string_view NameOf(absl::string_view name) { return name; }
    static absl::string_view NameOf(const Record* record) { return record->name(); }
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return NameOf(a) == NameOf(b);
    }
  };
  // Order by cookie, for records and for cookies.
  struct CookieLess {
    using is_transparent = void;
    static uint64_t CookieOf(uint64_t cookie) { return cookie; }
    static uint64_t CookieOf(const OwnedRecord& record) { return record->cookie; }
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return CookieOf(a) < CookieOf(b);
    }
  };

  absl::btree_set<OwnedRecord, CookieLess> by_cookie_;  // owns the records
  absl::flat_hash_set<Record*, NameHash, NameEq> by_name_;
  uint64_t next_cookie_ = kDotDotCookie + 1;
  uint64_t parent_ = 0;
};

}  // namespace cudafs

#endif  // CUDAFS_FS_CORE_DIRECTORY_H_

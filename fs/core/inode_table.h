// InodeTable: inode number -> Inode, and the reference counts that decide
// when an inode goes away.
//
// An inode is dropped (and its data blocks returned to the arena) once it
// has no name, no kernel lookup reference and no open handle. Inode numbers
// count up from 2 and are never reused within a mount (the FUSE glue gives
// each mount its own generation).
//
// Inode space, counted as tmpfs counts it under nr_inodes: max_inodes
// slots of kSlotBytes each; an inode takes one slot, and the filesystem
// charges more (a slot per extra hard link, extended attributes by their
// bytes) through ReserveSpace. What users can make the daemon hold in host
// memory is bounded by it.
//
// Lock order: Inode::mu before the table's lock; never call a method here
// while holding an Inode::mu, except those that say so.
//
// With a metadata log (metadata_log.h), each change of an inode's counts,
// and its going, is a record ('C', 'G': journal_records.h), made under the
// table's lock and appended after it (their sequence numbers, taken under
// the lock, order them: journal_records.h): a transaction of its own, or
// a count's in the operation's that made it (JournalScope::Counts). Counts
// change on every lookup: they take no other lock, and the table's lock
// never waits on the log's.
#ifndef CUDAFS_FS_CORE_INODE_TABLE_H_
#define CUDAFS_FS_CORE_INODE_TABLE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/hash/hash.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "fs/core/inode.h"

namespace cudafs {

class MetadataLog;

class InodeTable {
 public:
  // tmpfs' BOGO_INODE_SIZE: what one inode or hard link costs.
  static constexpr uint64_t kSlotBytes = 1024;

  // max_inodes counts every inode including the root; 0 is unlimited.
  // `journal`, if any, must outlive the table.
  explicit InodeTable(uint64_t max_inodes, MetadataLog* journal = nullptr);

  // Inserts the root directory (inode 1), which takes a slot.
  std::shared_ptr<Inode> CreateRoot(mode_t mode);
  // A new inode in a slot of its own; ENOSPC when the space is used up.
  absl::StatusOr<std::shared_ptr<Inode>> Create(mode_t mode);
  // Charges (or gives back) inode space beyond the inode's own slot; ENOSPC
  // when it does not fit. Space charged for an inode's extended attributes
  // (Inode::XattrSpace) comes back by itself when the inode is dropped.
  // May be called with an Inode::mu held.
  absl::Status ReserveSpace(uint64_t bytes);
  void ReleaseSpace(uint64_t bytes);
  // nullptr when no such inode exists (any more).
  std::shared_ptr<Inode> Get(uint64_t ino) const;
  // Get of each of `numbers`, under one acquisition of the table's lock,
  // appended to `inodes` (those that exist, in order).
  template <typename Numbers, typename Inodes>
  void GetEach(const Numbers& numbers, Inodes* inodes) const {
    absl::ReaderMutexLock lock(&mu_);
    for (const uint64_t ino : numbers) {
      if (auto it = inodes_.find(ino); it != inodes_.end()) inodes->push_back(*it);
    }
  }
  // Every inode now, for a pass over all files (moving data between
  // memories); each may be dropped from the table meanwhile.
  std::vector<std::shared_ptr<Inode>> All() const;

  // May be called with inode.mu held.
  void AddLookup(Inode& inode, uint64_t count = 1);
  void AddOpen(Inode& inode);
  // Drop references, then drop the inode if nothing holds it. The caller
  // must not hold inode.mu.
  void Forget(const std::shared_ptr<Inode>& inode, uint64_t count);
  // Returns true when that was the inode's last open handle.
  bool Release(const std::shared_ptr<Inode>& inode);
  // Drops the inode if it has no name, lookup or open left (after unlink,
  // rmdir or rename replaced it). The caller must not hold inode.mu.
  void DropIfUnused(const std::shared_ptr<Inode>& inode);

  // An inode's reference counts, for a filesystem image.
  struct References {
    uint64_t lookups = 0;
    uint32_t opens = 0;
  };
  References ReferencesOf(const Inode& inode) const;
  // An inode of a filesystem image, with its counts and the space it
  // takes beyond its slot (extra hard links, extended attributes).
  struct Adopted {
    std::shared_ptr<Inode> inode;
    References references;
    uint64_t extra_space = 0;
  };
  // Replaces every inode (the root included, which `inodes` must hold)
  // by `inodes`, numbered below `next_ino`, which new inodes then start
  // from. Not bounded by max_inodes: what was stored stays.
  // InvalidArgument (and no change) for a number used twice or not below
  // next_ino.
  absl::Status Replace(std::vector<Adopted> inodes, uint64_t next_ino);

  uint64_t size() const;
  // The number the next new inode gets.
  uint64_t next_number() const;
  uint64_t max_inodes() const { return max_inodes_; }
  // Whole slots of inode space still free; 0 when unlimited.
  uint64_t free_slots() const;

 private:
  absl::Status ReserveLocked(uint64_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Tells the analysis that Inode::table_lock is mu_, which is true of
  // every inode this table made, so that their counts may change. Checked:
  // that mu_ is held.
  void Counts() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_)
      ABSL_ASSERT_EXCLUSIVE_LOCK(Inode::table_lock);
  // The record of `inode`'s counts (or, `gone`, its going); "" without a
  // log. Journal appends one (call with no lock held), or a count's
  // joins the thread's transaction (JournalScope::Counts).
  std::string Record(const Inode& inode, bool gone = false) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Journal(const std::string& record, bool gone = false);
  // Forget's and Release's work: `change` of the inode's counts, then its
  // drop if nothing holds it any more, journaled as one record (its
  // counts, or its going).
  void ChangeCounts(Inode& inode, absl::FunctionRef<void(Inode&)> change) ABSL_LOCKS_EXCLUDED(mu_);
  // Takes the inode out of the table if it has no name, lookup or open
  // left (never the root); true if it did.
  bool DropLocked(const Inode& inode) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_)
      ABSL_SHARED_LOCKS_REQUIRED(inode.mu);

  const uint64_t max_inodes_;
  MetadataLog* const journal_;
  mutable absl::Mutex mu_;
  uint64_t used_space_ ABSL_GUARDED_BY(mu_) = 0;
  // Hash and equality by inode number, for inodes and for numbers: a set
  // keyed by the inode's own number takes 16 bytes a slot where a map from
  // number to inode took 24.
  struct ByNumber {
    using is_transparent = void;
    static uint64_t NumberOf(uint64_t ino) { return ino; }
    static uint64_t NumberOf(const std::shared_ptr<Inode>& inode) { return inode->ino; }
    template <typename T>
    size_t operator()(const T& key) const {
      return absl::HashOf(NumberOf(key));
    }
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return NumberOf(a) == NumberOf(b);
    }
  };

  absl::flat_hash_set<std::shared_ptr<Inode>, ByNumber, ByNumber> inodes_ ABSL_GUARDED_BY(mu_);
  uint64_t next_ino_ ABSL_GUARDED_BY(mu_) = 2;
};

}  // namespace cudafs

#endif  // CUDAFS_FS_CORE_INODE_TABLE_H_

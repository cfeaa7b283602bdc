#include "fs/core/inode_table.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_format.h"
#include "alloc/base/errors.h"
#include "alloc/base/status_macros.h"
#include "fs/core/journal_records.h"
#include "fs/core/journal_scope.h"
#include "fs/core/metadata_log.h"

namespace cudafs {

InodeTable::InodeTable(uint64_t max_inodes, MetadataLog* journal)
    : max_inodes_(max_inodes), journal_(journal) {}

std::string InodeTable::Record(const Inode& inode, bool gone) {
  if (journal_ == nullptr) return "";
  Counts();
  std::string record;
  if (gone) {
    PutGoneRecord(inode.ino, &record);
    return record;
  }
  PutCountsRecord(inode.ino, NextJournalSequence(), inode.lookups, inode.opens, &record);
  return record;
}

void InodeTable::Journal(const std::string& record, bool gone) {
  if (record.empty()) return;
  // A going is appended at once: another thread may let the blocks go
  // before this one's operation ends, and the log must not name them then.
  if (!gone && JournalScope::Counts(journal_, record)) return;
  // A failure abandons the log, which says so.
  journal_->Append(record).IgnoreError();
}

void InodeTable::Counts() const { mu_.AssertHeld(); }

std::shared_ptr<Inode> InodeTable::CreateRoot(mode_t mode) {
  auto root = std::make_shared<Inode>(1, mode);
  absl::MutexLock lock(&mu_);
  used_space_ += kSlotBytes;
  inodes_.insert(root);
  return root;
}

absl::Status InodeTable::ReserveLocked(uint64_t bytes) {
  if (max_inodes_ != 0 && used_space_ + bytes > max_inodes_ * kSlotBytes) {
    return PosixError(ENOSPC, "inode space (nr_inodes) used up");
  }
  used_space_ += bytes;
  return absl::OkStatus();
}

absl::Status InodeTable::ReserveSpace(uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  return ReserveLocked(bytes);
}

void InodeTable::ReleaseSpace(uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  used_space_ -= std::min(bytes, used_space_);
}

uint64_t InodeTable::free_slots() const {
  if (max_inodes_ == 0) return 0;
  absl::ReaderMutexLock lock(&mu_);
  const uint64_t capacity = max_inodes_ * kSlotBytes;
  return capacity > used_space_ ? (capacity - used_space_) / kSlotBytes : 0;
}

absl::StatusOr<std::shared_ptr<Inode>> InodeTable::Create(mode_t mode) {
  absl::MutexLock lock(&mu_);
  CUDAFS_RETURN_IF_ERROR(ReserveLocked(kSlotBytes));
  auto inode = std::make_shared<Inode>(next_ino_++, mode);
  inodes_.insert(inode);
  return inode;
}

InodeTable::References InodeTable::ReferencesOf(const Inode& inode) const {
  absl::MutexLock lock(&mu_);
  Counts();
  return References{inode.lookups, inode.opens};
}

absl::Status InodeTable::Replace(std::vector<Adopted> inodes, uint64_t next_ino) {
  absl::flat_hash_set<std::shared_ptr<Inode>, ByNumber, ByNumber> table;
  uint64_t space = 0;
  for (const Adopted& adopted : inodes) {
    const uint64_t ino = adopted.inode->ino;
    if (ino == 0 || ino >= next_ino || !table.insert(adopted.inode).second) {
      return absl::InvalidArgumentError(
          absl::StrFormat("inode %d is used twice, or not below the next number %d", ino, next_ino));
    }
    space += kSlotBytes + adopted.extra_space;
  }
  absl::MutexLock lock(&mu_);
  Counts();
  for (const Adopted& adopted : inodes) {
    adopted.inode->lookups = adopted.references.lookups;
    adopted.inode->opens = adopted.references.opens;
  }
  inodes_ = std::move(table);
  used_space_ = space;
  next_ino_ = next_ino;
  return absl::OkStatus();
}

std::shared_ptr<Inode> InodeTable::Get(uint64_t ino) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = inodes_.find(ino);
  return it == inodes_.end() ? nullptr : *it;
}

void InodeTable::AddLookup(Inode& inode, uint64_t count) {
  std::string record;
  {
    absl::MutexLock lock(&mu_);
    Counts();
    inode.lookups += count;
    record = Record(inode);
  }
  Journal(record);
}

void InodeTable::AddOpen(Inode& inode) {
  std::string record;
  {
    absl::MutexLock lock(&mu_);
    Counts();
    ++inode.opens;
    record = Record(inode);
  }
  Journal(record);
}

void InodeTable::Forget(const std::shared_ptr<Inode>& inode, uint64_t count) {
  ChangeCounts(*inode, [count](Inode& changed) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    changed.lookups -= std::min(count, changed.lookups);
  });
}

bool InodeTable::Release(const std::shared_ptr<Inode>& inode) {
  bool last = false;
  ChangeCounts(*inode, [&last](Inode& changed) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (changed.opens > 0) --changed.opens;
    last = changed.opens == 0;
  });
  return last;
}

void InodeTable::ChangeCounts(Inode& inode, absl::FunctionRef<void(Inode&)> change) {
  std::string record;
  bool gone;
  {
    // The inode's lock first, as DropIfUnused takes them: its link count
    // decides with the counts whether it goes.
    absl::ReaderMutexLock inode_lock(&inode.mu);
    absl::MutexLock lock(&mu_);
    Counts();
    change(inode);
    gone = DropLocked(inode);
    record = Record(inode, gone);
  }
  // Before its blocks go back: see DropIfUnused.
  Journal(record, gone);
}

bool InodeTable::DropLocked(const Inode& inode) {
  Counts();
  if (inode.ino == 1 || inode.nlink > 0 || inode.lookups != 0 || inode.opens != 0) return false;
  if (inodes_.erase(inode.ino) == 0) return false;  // a racing drop was first
  used_space_ -= std::min(kSlotBytes + inode.XattrSpace(), used_space_);
  return true;
}

void InodeTable::DropIfUnused(const std::shared_ptr<Inode>& inode) {
  std::string record;
  {
    absl::ReaderMutexLock inode_lock(&inode->mu);
    absl::MutexLock lock(&mu_);
    if (!DropLocked(*inode)) return;
    record = Record(*inode, /*gone=*/true);
  }
  // Before its blocks go back: they do when the last shared_ptr (maybe a
  // concurrent operation's) is gone, after the operation's transaction
  // (JournalScope holds the frees of its thread).
  Journal(record, /*gone=*/true);
}

std::vector<std::shared_ptr<Inode>> InodeTable::All() const {
  absl::ReaderMutexLock lock(&mu_);
  return {inodes_.begin(), inodes_.end()};
}

uint64_t InodeTable::next_number() const {
  absl::ReaderMutexLock lock(&mu_);
  return next_ino_;
}

uint64_t InodeTable::size() const {
  absl::ReaderMutexLock lock(&mu_);
  return inodes_.size();
}

}  // namespace cudafs

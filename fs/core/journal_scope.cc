#include "fs/core/journal_scope.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>

#include "absl/algorithm/container.h"
#include "absl/cleanup/cleanup.h"
#include "fs/core/filesystem_state.h"
#include "fs/core/journal_records.h"
#include "fs/core/metadata_log.h"

namespace cudafs {
namespace {

thread_local JournalScope* t_scope = nullptr;  // the thread's outermost, if any
// The thread's last transaction's buffer, kept for the next one unless it
// grew large: most transactions are a few hundred bytes.
thread_local std::string t_buffer;
constexpr size_t kKeptBufferBytes = 64 << 10;

}  // namespace

JournalScope::JournalScope(FilesystemState& state) {
  if (state.config.metadata_log == nullptr || t_scope != nullptr) return;
  state_ = &state;
  held_frees_.emplace(state.arena);
  t_scope = this;
}

JournalScope::~JournalScope() {
  if (state_ == nullptr) return;
  t_scope = nullptr;
  Commit();
  held_frees_.reset();  // the log no longer names what they held
}

void JournalScope::Inode(uint64_t ino) {
  if (t_scope != nullptr) t_scope->inodes_.push_back(ino);
}

void JournalScope::Attributes(uint64_t ino) {
  if (t_scope != nullptr) t_scope->attributes_.push_back(ino);
}

void JournalScope::Entry(uint64_t directory, absl::string_view name) {
  if (t_scope != nullptr) t_scope->entries_.emplace_back(directory, std::string(name));
}

void JournalScope::FileWritten(uint64_t ino, uint64_t offset, uint64_t end) {
  if (t_scope != nullptr) t_scope->written_.push_back({ino, offset, end});
}

void JournalScope::Exchanged(uint64_t request) {
  if (t_scope != nullptr) t_scope->exchanged_.push_back(request);
}

bool JournalScope::Counts(const MetadataLog* log, absl::string_view record) {
  // A scope of another filesystem (tests run several) keeps to its own log.
  if (t_scope == nullptr || t_scope->state_->config.metadata_log != log) return false;
  t_scope->counts_.append(record.data(), record.size());
  return true;
}

void JournalScope::Commit() {
  if (inodes_.empty() && attributes_.empty() && entries_.empty() && written_.empty() &&
      exchanged_.empty() && counts_.empty()) {
    return;
  }
  FilesystemState& state = *state_;
  auto sort_unique = [](auto& numbers) {
    std::sort(numbers.begin(), numbers.end());
    numbers.erase(std::unique(numbers.begin(), numbers.end()), numbers.end());
  };
  sort_unique(inodes_);
  sort_unique(attributes_);
  auto whole = [this](uint64_t ino) { return absl::c_binary_search(inodes_, ino); };
  // A write's record holds the head too, read after the attributes changed.
  absl::InlinedVector<uint64_t, 2> writes;
  for (const Written& write : written_) {
    if (!whole(write.ino)) writes.push_back(write.ino);
  }
  sort_unique(writes);
  // All in one trip to the table; inodes gone from it were recorded gone
  // by it.
  absl::InlinedVector<uint64_t, 6> wanted(inodes_.begin(), inodes_.end());
  for (const uint64_t ino : attributes_) {
    if (!whole(ino) && !absl::c_binary_search(writes, ino)) wanted.push_back(ino);
  }
  wanted.insert(wanted.end(), writes.begin(), writes.end());
  absl::InlinedVector<std::shared_ptr<cudafs::Inode>, 6> fetched;
  state.table.GetEach(wanted, &fetched);
  // Whole: those marked so; written: their writes' records; the rest,
  // their heads alone.
  absl::InlinedVector<std::shared_ptr<cudafs::Inode>, 4> inodes;
  absl::InlinedVector<std::shared_ptr<cudafs::Inode>, 4> heads;
  absl::InlinedVector<std::shared_ptr<cudafs::Inode>, 4> written;
  for (std::shared_ptr<cudafs::Inode>& inode : fetched) {
    auto& into = whole(inode->ino)                           ? inodes
                 : absl::c_binary_search(writes, inode->ino) ? written
                                                             : heads;
    into.push_back(std::move(inode));
  }
  const bool directories =
      !entries_.empty() || absl::c_any_of(inodes, [](const std::shared_ptr<cudafs::Inode>& inode) {
        return inode->is_directory();
      });
  // Each state is read, and numbered, under the lock its changes take.
  std::string transaction = std::move(t_buffer);
  transaction.clear();
  absl::Cleanup keep = [&transaction] {
    if (transaction.capacity() <= kKeptBufferBytes) t_buffer = std::move(transaction);
  };
  transaction.append(counts_);
  if (directories) {
    // A directory's record and the entries are the namespace's.
    absl::ReaderMutexLock namespace_lock(&state.namespace_mu);
    state.ReadsNamespace();
    // Inodes before the entries that name them.
    for (const std::shared_ptr<cudafs::Inode>& inode : inodes) {
      absl::ReaderMutexLock lock(&inode->mu);
      PutInodeRecord(*inode, NextJournalSequence(), &transaction);
    }
    for (const auto& [directory, name] : entries_) {
      // Marked too, as a rule (its head): no second trip to the table's lock.
      const cudafs::Inode* dir = nullptr;
      for (const auto* marked : {&inodes, &heads}) {
        for (const std::shared_ptr<cudafs::Inode>& inode : *marked) {
          if (inode->ino == directory) dir = inode.get();
        }
      }
      std::shared_ptr<cudafs::Inode> unmarked;
      if (dir == nullptr) dir = (unmarked = state.table.Get(directory)).get();
      if (dir == nullptr || !dir->is_directory()) continue;  // gone, and its entries with it
      const std::optional<Directory::Entry> entry = dir->directory().Find(name);
      PutEntryRecord(directory, name, NextJournalSequence(), entry,
                     entry ? dir->directory().CookieOf(name) : 0, &transaction);
    }
  } else {
    for (const std::shared_ptr<cudafs::Inode>& inode : inodes) {
      absl::ReaderMutexLock lock(&inode->mu);
      PutFileRecord(*inode, NextJournalSequence(), &transaction);
    }
  }
  for (const std::shared_ptr<cudafs::Inode>& inode : heads) {
    absl::ReaderMutexLock lock(&inode->mu);
    PutHeadRecord(*inode, NextJournalSequence(), &transaction);
  }
  for (const Written& write : written_) {
    for (const std::shared_ptr<cudafs::Inode>& inode : written) {
      if (inode->ino != write.ino) continue;
      absl::ReaderMutexLock lock(&inode->mu);
      if (inode->is_regular() && inode->data() != nullptr) {
        PutFileWriteRecord(*inode, NextJournalSequence(), write.offset, write.end, &transaction);
      } else {
        PutHeadRecord(*inode, NextJournalSequence(), &transaction);
      }
    }
  }
  // In the transaction of the exchange's entries: both land or neither.
  for (const uint64_t request : exchanged_) PutExchangedRecord(request, &transaction);
  if (transaction.empty()) return;
  MetadataLog& log = *state.config.metadata_log;
  // A failure abandons the log, which says so: a successor then refuses it.
  if (!log.Append(transaction).ok()) return;
  // Replaying costs what the journal holds: once it outgrows the
  // checkpoint (and a floor), its owner checkpoints.
  if (state.config.checkpoint_due && !state.checkpoint_asked.load(std::memory_order_relaxed) &&
      log.journal_bytes() > std::max(state.config.checkpoint_floor, 2 * log.checkpoint_bytes()) &&
      !state.checkpoint_asked.exchange(true)) {
    state.config.checkpoint_due();
  }
}

}  // namespace cudafs

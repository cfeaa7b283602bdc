#include "fs/core/journal_scope.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "alloc/base/log.h"
#include "fs/core/filesystem_state.h"
#include "fs/core/journal_records.h"
#include "fs/core/metadata_log.h"

namespace cudafs {
namespace {

thread_local JournalScope* t_scope = nullptr;  // the thread's outermost, if any

// The journal size below which no checkpoint is asked for.
constexpr uint64_t kCheckpointFloor = uint64_t{64} << 20;

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
  if (t_scope != nullptr) t_scope->inodes_.emplace_back(ino, true);
}

void JournalScope::Counts(uint64_t ino) {
  if (t_scope != nullptr) t_scope->inodes_.emplace_back(ino, false);
}

void JournalScope::Entry(uint64_t directory, absl::string_view name) {
  if (t_scope != nullptr) t_scope->entries_.emplace_back(directory, std::string(name));
}

void JournalScope::Commit() {
  if (inodes_.empty() && entries_.empty()) return;
  FilesystemState& state = *state_;
  // Whole before counts-only for each number, then one of each.
  std::sort(inodes_.begin(), inodes_.end(),
            [](const auto& a, const auto& b) { return a.first < b.first || (a.first == b.first && a.second > b.second); });
  inodes_.erase(std::unique(inodes_.begin(), inodes_.end(),
                            [](const auto& a, const auto& b) { return a.first == b.first; }),
                inodes_.end());
  std::string transaction;
  absl::MutexLock journal_lock(&state.journal_mu);
  {
    absl::ReaderMutexLock namespace_lock(&state.namespace_mu);
    state.ReadsNamespace();
    // Inodes before the entries that name them.
    for (const auto& [ino, whole] : inodes_) {
      const std::shared_ptr<cudafs::Inode> inode = state.table.Get(ino);
      if (inode == nullptr) {
        PutGoneRecord(ino, &transaction);
        continue;
      }
      if (whole) {
        absl::ReaderMutexLock lock(&inode->mu);
        PutInodeRecord(*inode, &transaction);
      }
      const InodeTable::References references = state.table.ReferencesOf(*inode);
      PutCountsRecord(ino, references.lookups, references.opens, &transaction);
    }
    for (const auto& [directory, name] : entries_) {
      const std::shared_ptr<cudafs::Inode> dir = state.table.Get(directory);
      if (dir == nullptr || !dir->is_directory()) continue;  // gone, and its entries with it
      const std::optional<Directory::Entry> entry = dir->directory().Find(name);
      PutEntryRecord(directory, name, entry, entry ? dir->directory().CookieOf(name) : 0,
                     &transaction);
    }
  }
  if (state.journal_abandoned) return;
  MetadataLog& log = *state.config.metadata_log;
  if (absl::Status appended = log.Append(transaction); !appended.ok()) {
    // From here on the log is behind the files: a successor must not load it.
    state.journal_abandoned = true;
    log.Abandon(appended.message());
    LogError(absl::StrCat("the metadata log stops; a crash now loses the files: ",
                          appended.message()));
    return;
  }
  // Replaying costs what the journal holds: once it outgrows the
  // checkpoint (and a floor), its owner checkpoints.
  if (!state.checkpoint_asked && state.config.checkpoint_due &&
      log.journal_bytes() > std::max(kCheckpointFloor, 2 * log.checkpoint_bytes())) {
    state.checkpoint_asked = true;
    state.config.checkpoint_due();
  }
}

}  // namespace cudafs

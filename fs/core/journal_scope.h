// JournalScope: one Filesystem operation's transaction in the mount's
// metadata log (metadata_log.h), where the mount keeps one.
//
// An operation opens a scope first and marks what it changed as it goes;
// when the outermost scope on the thread ends, with no other lock held,
// the current state of each marked thing becomes a record
// (journal_records.h), read and numbered under the lock its changes take,
// and the transaction is appended. Whatever order operations commit in,
// each thing's highest-numbered record was read after its last change, so
// the log's replay ends where the filesystem is. Frees of the arena on the
// thread wait until the append (Arena::HeldFrees): a block an operation
// gave up must not hold another file's bytes before the log stops naming
// it.
#ifndef CUDAFS_FS_CORE_JOURNAL_SCOPE_H_
#define CUDAFS_FS_CORE_JOURNAL_SCOPE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/string_view.h"
#include "alloc/storage/arena.h"

namespace cudafs {

struct FilesystemState;
class MetadataLog;

class JournalScope {
 public:
  explicit JournalScope(FilesystemState& state);
  JournalScope(const JournalScope&) = delete;
  JournalScope& operator=(const JournalScope&) = delete;
  ~JournalScope();

  // Marks, in the thread's scope (none, or a filesystem without a log:
  // nothing to do): inode `ino` changed (attributes, extended attributes,
  // data); the entry `name` of directory `directory` changed (made, pointed
  // elsewhere or removed). Reference counts, and an inode's going, the
  // inode table journals itself, as they change.
  static void Inode(uint64_t ino);
  // Only inode `ino`'s attributes changed (mode, owners, link count,
  // times), or a directory's entries (marked apart): its record is then
  // its head alone ('H'), not a file's extents or extended attributes,
  // which may be many.
  static void Attributes(uint64_t ino);
  static void Entry(uint64_t directory, absl::string_view name);
  // Regular file `ino` was written at [offset, end), and nothing else of it
  // changed but its attributes: its record is the extents the range
  // overlaps (an 'F' record), not all of them.
  static void FileWritten(uint64_t ino, uint64_t offset, uint64_t end);
  // Request `request` exchanged two names (an 'X' record): a successor
  // must not swap them back when the kernel sends it again.
  static void Exchanged(uint64_t request);
  // Record `record` of log `log`'s inode table (reference counts:
  // inode_table.h): joins the thread's transaction where it has one for
  // that log (true), which lands before the request is answered, so that
  // an operation costs one append; else the caller appends it.
  static bool Counts(const MetadataLog* log, absl::string_view record);

 private:
  void Commit();

  FilesystemState* state_ = nullptr;  // null: an outer scope commits, or no log
  std::optional<Arena::HeldFrees> held_frees_;
  // Inline: an operation marks a few things, and allocating for them on
  // every request would cost the journal's fast path more than encoding.
  absl::InlinedVector<uint64_t, 4> inodes_;
  absl::InlinedVector<uint64_t, 2> attributes_;
  struct Written {
    uint64_t ino;
    uint64_t offset;
    uint64_t end;
  };
  absl::InlinedVector<Written, 1> written_;
  absl::InlinedVector<uint64_t, 1> exchanged_;
  absl::InlinedVector<std::pair<uint64_t, std::string>, 2> entries_;
  std::string counts_;  // the table's records, as they came
};

}  // namespace cudafs

#endif  // CUDAFS_FS_CORE_JOURNAL_SCOPE_H_

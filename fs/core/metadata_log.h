// MetadataLog: a mount's metadata kept in memory that outlives its daemon
// (a memfd the keeper holds, fs/daemon/keeper.h): a checkpoint and the
// transactions committed since, each a run of journal records
// (journal_records.h), from which a successor rebuilds the filesystem.
//
// Crash-consistent at any instant, with no fsync (the memory is the
// medium): a transaction is published by storing the journal's new length
// after its bytes, so a process killed in the middle of Append leaves none
// of it. A checkpoint goes into the other of two slots, and one word
// switches slots, so a crash leaves the old version or the new one whole.
// The memfd is sparse: only what is written takes memory, and a slot's
// memory goes back once the other one takes over.
#ifndef CUDAFS_FS_CORE_METADATA_LOG_H_
#define CUDAFS_FS_CORE_METADATA_LOG_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace cudafs {

class MetadataLog {
 public:
  // The most a checkpoint, and the journal after it, may hold.
  static constexpr uint64_t kMaxCheckpoint = uint64_t{4} << 30;
  static constexpr uint64_t kMaxJournal = uint64_t{4} << 30;

  // A new log in a new memfd: an empty checkpoint, an empty journal.
  static absl::StatusOr<std::unique_ptr<MetadataLog>> Create();
  // The log in memfd `fd` (taken), as another process left it.
  // InvalidArgument for a descriptor that holds no log of this version.
  static absl::StatusOr<std::unique_ptr<MetadataLog>> Adopt(int fd);

  MetadataLog(const MetadataLog&) = delete;
  MetadataLog& operator=(const MetadataLog&) = delete;
  ~MetadataLog();

  // The memfd, for the process that holds it across a crash.
  int fd() const { return fd_; }

  // Appends one transaction: whole once this returns; thread-safe. A
  // transaction that does not fit (the owner checkpoints well before)
  // abandons the log (ResourceExhausted), and every append after fails.
  absl::Status Append(absl::string_view transaction);
  // Makes `records` the checkpoint, with an empty journal after it. The
  // caller makes sure no Append runs meanwhile.
  absl::Status Checkpoint(absl::string_view records);
  // Marks the log as no longer following the filesystem (a transaction
  // that did not fit): a successor refuses it rather than load a past,
  // and the daemon's log says so once.
  void Abandon(absl::string_view why);

  uint64_t journal_bytes() const;
  uint64_t checkpoint_bytes() const;

  // What the log holds: the checkpoint's records and the journal's
  // transactions (each a varint length and its bytes). FailedPrecondition
  // for an abandoned log, saying why.
  struct Contents {
    std::string checkpoint;
    std::string journal;
  };
  absl::StatusOr<Contents> Read() const;

 private:
  struct Header;
  MetadataLog(int fd, char* base) : fd_(fd), base_(base) {}
  Header& header() const;
  void AbandonLocked(absl::string_view why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  char* SlotData(uint64_t slot) const;

  const int fd_;
  char* const base_;  // the whole memfd, mapped shared
  mutable absl::Mutex mu_;  // orders appends
};

}  // namespace cudafs

#endif  // CUDAFS_FS_CORE_METADATA_LOG_H_

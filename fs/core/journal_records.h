// Journal records: what a metadata log (metadata_log.h) holds. Each record
// is the state of one thing after a change, not the change, taken under
// the lock that orders the thing's changes together with a sequence
// number (NextJournalSequence): applying a log's records, the highest
// number of each thing winning whatever order they landed in, gives the
// filesystem as the last transaction left it. ReplayJournal does that and
// writes the result as a filesystem image (Filesystem::LoadImage). A
// record is one byte of kind, then its fields (alloc/base/coding.h):
//
//   'I' inode:    ino, sequence, head, extended attributes, body (each as
//                 bytes, in inode_coding.h's format; a directory's body
//                 without its entries)
//   'F' file written: ino, sequence, head, and the part of a regular
//                 file's data record a write changes (CachedFile::
//                 EncodeRangeTo): where its data ends, and the extents the
//                 write's range overlaps. Each extent is a thing of its
//                 own, keyed by its file offset, and an 'I' record is the
//                 state of all of them: so a write costs what it changed,
//                 not the file's whole extent list.
//   'H' head:     ino, sequence, head: a change of attributes alone (mode,
//                 owners, link count, times), of an inode of any kind. A
//                 directory's other state is its entries': a successor
//                 finds its parent by walking the tree and its next cookie
//                 past every cookie an entry record names.
//   'A' entry:    directory, name, sequence, ino, type (S_IFMT >> 12), cookie
//   'R' no entry: directory, name, sequence
//   'C' counts:   ino, sequence, lookups, open handles
//   'G' gone:     ino (numbers are never reused: it wins over every other
//                 record of the inode)
//   'X' exchanged: the id of a request that exchanged two names, in the
//                 exchange's transaction (ReplayReport::exchanges)
// A checkpoint's records carry sequence 0.
#ifndef CUDAFS_FS_CORE_JOURNAL_RECORDS_H_
#define CUDAFS_FS_CORE_JOURNAL_RECORDS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fs/core/directory.h"
#include "fs/core/inode.h"

namespace cudafs {

// A number greater than every one given before, in this process or in an
// earlier one on this boot (the monotonic clock's nanoseconds at the first
// call, counted up from there). Take it under the lock the record's state
// is read under.
uint64_t NextJournalSequence();

void PutInodeRecord(const Inode& inode, uint64_t sequence, std::string* out)
    ABSL_SHARED_LOCKS_REQUIRED(inode.mu, Inode::namespace_lock);
// The same of an inode that is no directory, which needs no namespace lock.
void PutFileRecord(const Inode& inode, uint64_t sequence, std::string* out)
    ABSL_SHARED_LOCKS_REQUIRED(inode.mu);
// An 'H' record: `inode`'s head alone.
void PutHeadRecord(const Inode& inode, uint64_t sequence, std::string* out)
    ABSL_SHARED_LOCKS_REQUIRED(inode.mu);
// An 'F' record of a write to [offset, end) of regular file `inode`,
// which holds data.
void PutFileWriteRecord(const Inode& inode, uint64_t sequence, uint64_t offset, uint64_t end,
                        std::string* out) ABSL_SHARED_LOCKS_REQUIRED(inode.mu);
// `entry` empty: the name is gone.
void PutEntryRecord(uint64_t directory, absl::string_view name, uint64_t sequence,
                    const std::optional<Directory::Entry>& entry, uint64_t cookie,
                    std::string* out);
void PutCountsRecord(uint64_t ino, uint64_t sequence, uint64_t lookups, uint64_t opens,
                     std::string* out);
void PutGoneRecord(uint64_t ino, std::string* out);
void PutExchangedRecord(uint64_t request, std::string* out);

// What a replay found. Transactions cut by a crash leave traces a replay
// mends, each said in `mended`: an entry whose inode's record never came, a
// link count that a directory's names contradict (a transaction that
// changed it came before the one that named it), a directory named twice,
// a file's extent that a later one overlaps (the transaction that split or
// dropped it did not land: what the later one holds wins, what else the
// older block held stays).
struct ReplayReport {
  uint64_t transactions = 0;
  uint64_t records = 0;
  uint64_t inodes = 0;
  std::vector<std::string> mended;
  // The requests that exchanged two names since the checkpoint ('X').
  std::vector<uint64_t> exchanges;
};

// The filesystem image that `checkpoint` (records) and then `journal`
// (transactions, each a varint length and its records: MetadataLog::
// Contents) make. DataLoss for bytes that are no records or a log with no
// root directory.
absl::StatusOr<std::string> ReplayJournal(absl::string_view checkpoint, absl::string_view journal,
                                          ReplayReport* report);

}  // namespace cudafs

#endif  // CUDAFS_FS_CORE_JOURNAL_RECORDS_H_

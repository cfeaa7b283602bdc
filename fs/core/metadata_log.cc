#include "fs/core/metadata_log.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "alloc/base/coding.h"
#include "alloc/base/log.h"

namespace cudafs {
namespace {

// The version says which records the log may hold: a binary refuses a
// log of a later one. 2 added 'H' records; a log of 1 holds a subset, and
// becomes 2 when adopted, as records of 2 may follow.
constexpr char kMagic[] = "cudafs metadata log 2";
constexpr char kMagicBefore[] = "cudafs metadata log 1";
static_assert(sizeof(kMagic) == sizeof(kMagicBefore));
constexpr uint64_t kHeaderBytes = 4096;
constexpr uint64_t kSlotBytes = MetadataLog::kMaxCheckpoint + MetadataLog::kMaxJournal;
constexpr uint64_t kFileBytes = kHeaderBytes + 2 * kSlotBytes;
constexpr uint64_t kPageBytes = 4096;
// How far ahead of its end the journal's pages are faulted in.
constexpr uint64_t kAheadBytes = 256 << 10;

// The whole of log memfd `fd`, mapped shared; closes `fd` on failure.
absl::StatusOr<char*> MapLog(int fd) {
  void* base = mmap(nullptr, kFileBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  if (base == MAP_FAILED) {
    const int error = errno;
    close(fd);
    return absl::ErrnoToStatus(error, "mapping the metadata log");
  }
  return static_cast<char*>(base);
}

}  // namespace

// The first page of the memfd. Its atomics are lock-free, so they work
// across the processes that map it.
struct MetadataLog::Header {
  struct Slot {
    std::atomic<uint64_t> checkpoint_length;
    std::atomic<uint64_t> journal_length;
  };
  char magic[32];
  std::atomic<uint64_t> active;  // the slot in use: 0 or 1
  std::atomic<uint64_t> abandoned;
  char why[256];
  Slot slots[2];
};

MetadataLog::Header& MetadataLog::header() const {
  static_assert(sizeof(Header) <= kHeaderBytes);
  static_assert(std::atomic<uint64_t>::is_always_lock_free);
  return *reinterpret_cast<Header*>(base_);
}

char* MetadataLog::SlotData(uint64_t slot) const { return base_ + kHeaderBytes + slot * kSlotBytes; }

absl::StatusOr<std::unique_ptr<MetadataLog>> MetadataLog::Create() {
  const int fd = memfd_create("cudafs-metadata", MFD_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, "memfd_create for the metadata log");
  if (ftruncate(fd, static_cast<off_t>(kFileBytes)) != 0) {
    const int error = errno;
    close(fd);
    return absl::ErrnoToStatus(error, "sizing the metadata log");
  }
  absl::StatusOr<char*> base = MapLog(fd);
  if (!base.ok()) return base.status();
  std::unique_ptr<MetadataLog> log(new MetadataLog(fd, *base));
  std::memcpy(log->header().magic, kMagic, sizeof(kMagic));
  return log;
}

absl::StatusOr<std::unique_ptr<MetadataLog>> MetadataLog::Adopt(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) != kFileBytes) {
    close(fd);
    return absl::InvalidArgumentError("the metadata handed over is no log of this version");
  }
  absl::StatusOr<char*> base = MapLog(fd);
  if (!base.ok()) return base.status();
  std::unique_ptr<MetadataLog> log(new MetadataLog(fd, *base));
  Header& header = log->header();
  const bool before = std::memcmp(header.magic, kMagicBefore, sizeof(kMagicBefore)) == 0;
  if ((!before && std::memcmp(header.magic, kMagic, sizeof(kMagic)) != 0) ||
      header.active.load() > 1) {
    return absl::InvalidArgumentError("the metadata handed over is no log of this version");
  }
  if (before) std::memcpy(header.magic, kMagic, sizeof(kMagic));
  return log;
}

MetadataLog::~MetadataLog() {
  munmap(base_, kFileBytes);
  close(fd_);
}

absl::Status MetadataLog::Append(absl::string_view transaction) {
  char length[kMaxVarintBytes];
  const size_t length_bytes = EncodeVarint(length, transaction.size());
  char* ahead = nullptr;
  uint64_t ahead_bytes = 0;
  {
    absl::MutexLock lock(&mu_);
    if (header().abandoned.load(std::memory_order_relaxed) != 0) {
      return absl::FailedPreconditionError("the metadata log was abandoned");
    }
    Header::Slot& slot = header().slots[header().active.load(std::memory_order_relaxed)];
    const uint64_t at = slot.journal_length.load(std::memory_order_relaxed);
    const uint64_t size = length_bytes + transaction.size();
    if (size > kMaxJournal - at) {
      AbandonLocked("the metadata log's journal is full");
      return absl::ResourceExhaustedError("the metadata log's journal is full");
    }
    char* journal = SlotData(header().active.load(std::memory_order_relaxed)) + kMaxCheckpoint;
    std::memcpy(journal + at, length, length_bytes);
    std::memcpy(journal + at + length_bytes, transaction.data(), transaction.size());
    // Published last: a crash before this store leaves the transaction out.
    slot.journal_length.store(at + size, std::memory_order_release);
    const uint64_t end = at + size;
    if (at == 0 || at / kAheadBytes != end / kAheadBytes) {
      const uint64_t from = end / kPageBytes * kPageBytes;
      ahead = journal + from;
      ahead_bytes = std::min(2 * kAheadBytes, kMaxJournal - from);
    }
  }
  // The pages the next appends write, faulted in by the append that first
  // reaches a run of them, and outside the lock: else each new page faults
  // in the memcpy above, while every other appender waits. Best effort: a
  // page not yet in faults there as before. A checkpoint, which punches
  // the slot, never runs beside an append.
  if (ahead_bytes != 0) madvise(ahead, ahead_bytes, MADV_POPULATE_WRITE);
  return absl::OkStatus();
}

absl::Status MetadataLog::Checkpoint(absl::string_view records) {
  if (records.size() > kMaxCheckpoint) {
    return absl::ResourceExhaustedError("the metadata is too large for a checkpoint");
  }
  absl::MutexLock lock(&mu_);
  const uint64_t old = header().active.load(std::memory_order_relaxed);
  const uint64_t next = 1 - old;
  std::memcpy(SlotData(next), records.data(), records.size());
  header().slots[next].checkpoint_length.store(records.size(), std::memory_order_relaxed);
  header().slots[next].journal_length.store(0, std::memory_order_relaxed);
  // The switch: everything above is in place before it.
  header().active.store(next, std::memory_order_release);
  // The old slot's memory goes back; its bytes are no longer read.
  fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
            static_cast<off_t>(kHeaderBytes + old * kSlotBytes), static_cast<off_t>(kSlotBytes));
  return absl::OkStatus();
}

void MetadataLog::Abandon(absl::string_view why) {
  absl::MutexLock lock(&mu_);
  AbandonLocked(why);
}

void MetadataLog::AbandonLocked(absl::string_view why) {
  if (header().abandoned.load(std::memory_order_relaxed) != 0) return;
  LogError(absl::StrCat("the metadata log stops; a crash now loses the files: ", why));
  const size_t length = std::min(why.size(), sizeof(header().why) - 1);
  std::memcpy(header().why, why.data(), length);
  header().why[length] = '\0';
  header().abandoned.store(1, std::memory_order_release);
}

uint64_t MetadataLog::journal_bytes() const {
  const Header& h = header();
  return h.slots[h.active.load(std::memory_order_acquire)].journal_length.load(
      std::memory_order_acquire);
}

uint64_t MetadataLog::checkpoint_bytes() const {
  const Header& h = header();
  return h.slots[h.active.load(std::memory_order_acquire)].checkpoint_length.load(
      std::memory_order_acquire);
}

absl::StatusOr<MetadataLog::Contents> MetadataLog::Read() const {
  const Header& h = header();
  if (h.abandoned.load(std::memory_order_acquire) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the metadata log stopped following the files: ",
        absl::string_view(h.why, strnlen(h.why, sizeof(h.why)))));
  }
  const uint64_t active = h.active.load(std::memory_order_acquire);
  const uint64_t checkpoint = h.slots[active].checkpoint_length.load(std::memory_order_acquire);
  const uint64_t journal = h.slots[active].journal_length.load(std::memory_order_acquire);
  if (active > 1 || checkpoint > kMaxCheckpoint || journal > kMaxJournal) {
    return absl::DataLossError("the metadata log's header is damaged");
  }
  Contents contents;
  contents.checkpoint.assign(SlotData(active), checkpoint);
  contents.journal.assign(SlotData(active) + kMaxCheckpoint, journal);
  return contents;
}

}  // namespace cudafs

#include "alloc/devices/host_device.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "alloc/base/errors.h"
#include "alloc/base/file_pages.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace cudafs {
namespace {

// A bad offset is a caller's bug, but it must come back as an error (as on the
// CUDA device), not as a copy into whatever the process has mapped next to
// the arena, or as the arena's memory growing.
absl::Status InRange(uint64_t offset, uint64_t length, uint64_t arena_size) {
  if (offset > arena_size || length > arena_size - offset) {
    return absl::InternalError(
        absl::StrFormat("arena range [%d, +%d) is outside the arena", offset, length));
  }
  return absl::OkStatus();
}

// Memfds of whole pages, owned.
class HostExport final : public ExportedMemory {
 public:
  explicit HostExport(uint64_t size) : size_(size) {}
  ~HostExport() override {
    for (const ExportedPiece& piece : pieces_) close(piece.fd);
  }
  void Add(int fd, uint64_t length) { pieces_.push_back({fd, length, ""}); }

  Kind kind() const override { return Kind::kHost; }
  uint64_t size() const override { return size_; }
  absl::Span<const ExportedPiece> pieces() const override { return pieces_; }

 private:
  const uint64_t size_;
  std::vector<ExportedPiece> pieces_;
};

absl::Status OutOfMemoryOr(int error, absl::string_view what) {
  return error == ENOSPC || error == ENOMEM
             ? absl::ResourceExhaustedError(absl::StrCat("out of host memory for ", what))
             : absl::ErrnoToStatus(error, what);
}

const char kZeros[64 * 1024] = {};

// `length` bytes from `from` into `fd` at `at`, all of them. With `repeat`,
// `from` is kZeros, written over and over.
absl::Status PutBytes(int fd, const char* from, uint64_t at, uint64_t length, bool repeat) {
  for (uint64_t done = 0; done < length;) {
    const size_t chunk = repeat ? std::min<uint64_t>(sizeof kZeros, length - done) : length - done;
    const ssize_t wrote =
        pwrite(fd, repeat ? from : from + done, chunk, static_cast<off_t>(at + done));
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) return OutOfMemoryOr(wrote < 0 ? errno : ENOSPC, "a write to host memory");
    done += static_cast<uint64_t>(wrote);
  }
  return absl::OkStatus();
}

// `length` bytes of `fd` from `at` into `to`, all of them.
absl::Status GetBytes(int fd, char* to, uint64_t at, uint64_t length) {
  for (uint64_t done = 0; done < length;) {
    const ssize_t got = pread(fd, to + done, length - done, static_cast<off_t>(at + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return absl::ErrnoToStatus(errno, "a read of host memory");
    if (got == 0) return absl::InternalError("a read of host memory past its end");
    done += static_cast<uint64_t>(got);
  }
  return absl::OkStatus();
}

// `length` bytes of `fd` from `from` to `to`, ranges that do not overlap.
absl::Status CopyBytes(int fd, uint64_t to, uint64_t from, uint64_t length) {
  for (uint64_t done = 0; done < length;) {
    off_t in = static_cast<off_t>(from + done);
    off_t out = static_cast<off_t>(to + done);
    const ssize_t copied = copy_file_range(fd, &in, fd, &out, length - done, 0);
    if (copied < 0 && errno == EINTR) continue;
    if (copied <= 0) return OutOfMemoryOr(copied < 0 ? errno : ENOSPC, "a copy in host memory");
    done += static_cast<uint64_t>(copied);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<HostDevice>> HostDevice::Create(uint64_t arena_size,
                                                               Backing backing) {
  const uint64_t size = (arena_size + kGranule - 1) / kGranule * kGranule;
  if (size == 0) return absl::InvalidArgumentError("arena size must be > 0");
  int memory = -1;
  if (backing == Backing::kMemfd) {
    memory = memfd_create("cudafs-arena", MFD_CLOEXEC);
    if (memory < 0) return DescriptorError(errno, "memfd_create for the arena");
  }
  absl::Cleanup close_memory = [memory] {
    if (memory >= 0) close(memory);
  };
  if (memory >= 0 && ftruncate(memory, static_cast<off_t>(size)) != 0) {
    return absl::ErrnoToStatus(
        errno, absl::StrFormat("cannot make %d bytes of host memory for the arena", size));
  }
  std::move(close_memory).Cancel();
  return Map(memory, size);
}

absl::StatusOr<std::unique_ptr<HostDevice>> HostDevice::Adopt(int memfd) {
  absl::Cleanup close_memory = [memfd] { close(memfd); };
  struct stat st{};
  if (fstat(memfd, &st) != 0) return DescriptorError(errno, "the arena's memfd");
  // Only memfds (and other shmem files) have seals to ask for.
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (!S_ISREG(st.st_mode) || fcntl(memfd, F_GET_SEALS) < 0 || size == 0 ||
      size % kGranule != 0) {
    return absl::InvalidArgumentError("the descriptor handed over is no arena's memfd");
  }
  std::move(close_memory).Cancel();
  return Map(memfd, size);
}

absl::StatusOr<std::unique_ptr<HostDevice>> HostDevice::Map(int memory, uint64_t size) {
  absl::Cleanup close_memory = [memory] {
    if (memory >= 0) close(memory);
  };
  // Aligned to a granule, so that each granule can be one huge page: for
  // anonymous memory one page to fault in and zero, not 512 (committing
  // host memory is most of what moving data off a GPU costs), and for the
  // memfd where the kernel gives shared memory huge pages (shmem_enabled).
  // A granule is committed whole anyway, so huge pages cost no memory.
  void* reserved = mmap(nullptr, size + kGranule, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (reserved == MAP_FAILED) {
    return absl::ErrnoToStatus(errno,
                               absl::StrFormat("cannot reserve %d bytes of host memory", size));
  }
  const uintptr_t start = reinterpret_cast<uintptr_t>(reserved);
  const uintptr_t aligned = (start + kGranule - 1) / kGranule * kGranule;
  if (aligned > start) munmap(reserved, aligned - start);
  munmap(reinterpret_cast<void*>(aligned + size), start + kGranule - aligned);
  char* base = reinterpret_cast<char*>(aligned);
  if (memory < 0) {
    madvise(base, size, MADV_HUGEPAGE);  // best effort: 4 KiB pages work too
  } else if (mmap(base, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, memory, 0) ==
             MAP_FAILED) {
    const int error = errno;
    munmap(base, size);
    return absl::ErrnoToStatus(error, "cannot map the arena's host memory");
  }
  std::move(close_memory).Cancel();
  return std::unique_ptr<HostDevice>(new HostDevice(memory, base, size));
}

HostDevice::~HostDevice() {
  munmap(base_, size_);
  if (memory_ >= 0) close(memory_);
}

std::string HostDevice::Describe() const { return "host memory"; }

absl::Status HostDevice::Commit(uint64_t offset, uint64_t length) {
  if (absl::Status s = InRange(offset, length, size_); !s.ok()) return s;
  // Allocated now, so that a shortage shows up as ENOSPC on the write that
  // needed the memory, not as the OOM killer later.
  if (memory_ >= 0) {
    // The kernel allocates and zeroes the pages without mapping them into
    // this process; a failed fallocate keeps none of those it added.
    int result;
    do {
      result = fallocate(memory_, 0, static_cast<off_t>(offset), static_cast<off_t>(length));
    } while (result != 0 && errno == EINTR);
    if (result != 0) return OutOfMemoryOr(errno, "committing host memory");
    return absl::OkStatus();
  }
  // Kernels before 5.14 lack MADV_POPULATE_WRITE (EINVAL); they fault on
  // first touch instead.
  if (madvise(base_ + offset, length, MADV_POPULATE_WRITE) != 0 && errno != EINVAL) {
    const int error = errno;
    madvise(base_ + offset, length, MADV_DONTNEED);
    if (error == ENOMEM || error == EFAULT) {
      return absl::ResourceExhaustedError("out of host memory");
    }
    return absl::ErrnoToStatus(error, "madvise(MADV_POPULATE_WRITE)");
  }
  return absl::OkStatus();
}

absl::Status HostDevice::Decommit(uint64_t offset, uint64_t length) {
  if (absl::Status s = InRange(offset, length, size_); !s.ok()) return s;
  {
    // Shared ranges go back to the arena's memory, and their memfd's pages
    // are released though importers map them: else they are memory outside
    // size= (df shows it free), grown without bound by mapping, truncating
    // and starting again (tmpfs counts a mapped file's pages until the last
    // unmap, which the daemon cannot see). Punched, not truncated: this
    // serves a truncate (tmpfs: SIGBUS past the end) but also a removal or
    // an unmount (tmpfs: the bytes stay), so importers read zeros rather
    // than crash, and own any page they touch afterwards.
    absl::MutexLock lock(&shared_mu_);
    auto it = shared_.upper_bound(offset);
    if (it != shared_.begin() && std::prev(it)->first + std::prev(it)->second.length > offset) {
      --it;
    }
    while (it != shared_.end() && it->first < offset + length) {
      const uint64_t from = std::max(offset, it->first);
      const uint64_t to = std::min(offset + length, it->first + it->second.length);
      if (fallocate(it->second.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                    static_cast<off_t>(from - it->first), static_cast<off_t>(to - from)) != 0) {
        return absl::ErrnoToStatus(errno, "fallocate(FALLOC_FL_PUNCH_HOLE) of a shared range");
      }
      const bool anonymous = memory_ < 0;
      if (mmap(base_ + from, to - from, PROT_READ | PROT_WRITE,
               anonymous ? MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED
                         : MAP_SHARED | MAP_FIXED,
               memory_, anonymous ? 0 : static_cast<off_t>(from)) == MAP_FAILED) {
        return absl::ErrnoToStatus(errno, "mmap over a shared range");
      }
      it->second.committed -= to - from;
      if (it->second.committed == 0) {
        close(it->second.fd);
        it = shared_.erase(it);
      } else {
        ++it;
      }
    }
  }
  if (memory_ < 0) {
    if (madvise(base_ + offset, length, MADV_DONTNEED) != 0) {
      return absl::ErrnoToStatus(errno, "madvise(MADV_DONTNEED)");
    }
  } else if (fallocate(memory_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                       static_cast<off_t>(offset), static_cast<off_t>(length)) != 0) {
    return absl::ErrnoToStatus(errno, "fallocate(FALLOC_FL_PUNCH_HOLE)");
  }
  return absl::OkStatus();
}

// In the arena's memfd bytes move with pwrite, pread and copy_file_range,
// the kernel copying, as into tmpfs: a memcpy would first fault each page
// into this process. Anonymous memory, and shared ranges (memfds of their
// own), are reached through the arena's mapping. The lock, held across the
// copies, keeps a range from becoming shared (its bytes moving to another
// memfd) while they run.
absl::Status HostDevice::Write(absl::Span<const HostToDevice> copies) {
  for (const HostToDevice& c : copies) {
    if (absl::Status s = InRange(c.device_offset, c.length, size_); !s.ok()) return s;
  }
  absl::ReaderMutexLock lock(&shared_mu_);
  for (const HostToDevice& c : copies) {
    if (!ByKernel(c.device_offset, c.length)) {
      std::memcpy(base_ + c.device_offset, c.source, c.length);
    } else if (absl::Status s = PutBytes(memory_, static_cast<const char*>(c.source),
                                         c.device_offset, c.length, false);
               !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status HostDevice::Read(absl::Span<const DeviceToHost> copies) {
  for (const DeviceToHost& c : copies) {
    if (absl::Status s = InRange(c.device_offset, c.length, size_); !s.ok()) return s;
  }
  absl::ReaderMutexLock lock(&shared_mu_);
  for (const DeviceToHost& c : copies) {
    if (!ByKernel(c.device_offset, c.length)) {
      std::memcpy(c.destination, base_ + c.device_offset, c.length);
    } else if (absl::Status s =
                   GetBytes(memory_, static_cast<char*>(c.destination), c.device_offset, c.length);
               !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status HostDevice::Copy(absl::Span<const DeviceToDevice> copies) {
  for (const DeviceToDevice& c : copies) {
    if (absl::Status s = InRange(c.destination_offset, c.length, size_); !s.ok()) return s;
    if (absl::Status s = InRange(c.source_offset, c.length, size_); !s.ok()) return s;
  }
  absl::ReaderMutexLock lock(&shared_mu_);
  for (const DeviceToDevice& c : copies) {
    const bool overlap = c.source_offset < c.destination_offset + c.length &&
                         c.destination_offset < c.source_offset + c.length;
    if (overlap || !ByKernel(c.source_offset, c.length) ||
        !ByKernel(c.destination_offset, c.length)) {
      std::memmove(base_ + c.destination_offset, base_ + c.source_offset, c.length);
    } else if (absl::Status s = CopyBytes(memory_, c.destination_offset, c.source_offset, c.length);
               !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status HostDevice::Zero(absl::Span<const DeviceRange> ranges) {
  for (const DeviceRange& r : ranges) {
    if (absl::Status s = InRange(r.offset, r.length, size_); !s.ok()) return s;
  }
  absl::ReaderMutexLock lock(&shared_mu_);
  for (const DeviceRange& r : ranges) {
    if (!ByKernel(r.offset, r.length)) {
      std::memset(base_ + r.offset, 0, r.length);
    } else if (absl::Status s = PutBytes(memory_, kZeros, r.offset, r.length, true); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Exporter::CopyPiece>> HostDevice::PlanCopy(
    uint64_t size, absl::Span<const DeviceToDevice> /*copies*/) const {
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  CopyPiece piece;
  piece.kind = ExportedMemory::Kind::kHost;
  piece.bytes = std::max<uint64_t>(page, (size + page - 1) / page * page);
  return std::vector<CopyPiece>{piece};
}

absl::Status HostDevice::FillCopy(absl::Span<const CopyMemory> pieces,
                                  absl::Span<const DeviceToDevice> copies) {
  if (pieces.size() != 1) return absl::FailedPreconditionError("a copy here is one piece");
  const int memory = pieces[0].fd;
  const uint64_t memory_bytes = pieces[0].bytes;
  for (const DeviceToDevice& c : copies) {
    if (absl::Status s = InRange(c.source_offset, c.length, size_); !s.ok()) return s;
    if (c.destination_offset > memory_bytes || c.length > memory_bytes - c.destination_offset) {
      return absl::InternalError("a copy lies past the memory it fills");
    }
  }
  // pwrite, never a mapping: the memory's owner may shrink it meanwhile,
  // which a mapping's access would meet as SIGBUS and pwrite as an error.
  // Each chunk's pages are checked just before it is written: the owner
  // may punch holes meanwhile, which pwrite would fill with pages charged
  // to the daemon; the window left is one chunk's write.
  constexpr uint64_t kChunk = 1 << 20;
  const auto put = [memory](const char* from, uint64_t at, uint64_t length,
                            bool repeat) -> absl::Status {
    for (uint64_t done = 0; done < length;) {
      const size_t chunk = std::min<uint64_t>(repeat ? sizeof kZeros : kChunk, length - done);
      if (absl::Status s = CheckPagesAllocated(memory, at + done, chunk); !s.ok()) return s;
      const ssize_t wrote =
          pwrite(memory, repeat ? from : from + done, chunk, static_cast<off_t>(at + done));
      if (wrote <= 0) return OutOfMemoryOr(wrote < 0 ? errno : ENOSPC, "a copy");
      done += static_cast<uint64_t>(wrote);
    }
    return absl::OkStatus();
  };
  // From the arena's memfd the kernel copies (copy_file_range), so that
  // the file's pages are never mapped into the daemon, whose memory the
  // copy must not grow. A memory the kernel cannot copy into that way (a
  // file of another filesystem) is written from the mapping.
  const auto copy = [this, memory, &put](uint64_t from, uint64_t at,
                                         uint64_t length) -> absl::Status {
    for (uint64_t done = 0; done < length;) {
      const size_t chunk = std::min<uint64_t>(uint64_t{kChunk}, length - done);
      if (absl::Status s = CheckPagesAllocated(memory, at + done, chunk); !s.ok()) return s;
      off_t in = static_cast<off_t>(from + done);
      off_t out = static_cast<off_t>(at + done);
      const ssize_t copied = copy_file_range(memory_, &in, memory, &out, chunk, 0);
      if (copied < 0 && errno == EINTR) continue;
      if (copied < 0 && (errno == EXDEV || errno == EOPNOTSUPP || errno == EINVAL)) {
        return put(base_ + from + done, at + done, length - done, false);
      }
      if (copied <= 0) return OutOfMemoryOr(copied < 0 ? errno : ENOSPC, "a copy");
      done += static_cast<uint64_t>(copied);
    }
    return absl::OkStatus();
  };
  std::vector<DeviceToDevice> sorted(copies.begin(), copies.end());
  std::sort(sorted.begin(), sorted.end(), [](const DeviceToDevice& a, const DeviceToDevice& b) {
    return a.destination_offset < b.destination_offset;
  });
  absl::ReaderMutexLock lock(&shared_mu_);
  uint64_t at = 0;
  for (const DeviceToDevice& c : sorted) {
    if (c.destination_offset < at) return absl::InternalError("copies overlap");
    if (absl::Status s = put(kZeros, at, c.destination_offset - at, true); !s.ok()) return s;
    absl::Status s = ByKernel(c.source_offset, c.length)
                         ? copy(c.source_offset, c.destination_offset, c.length)
                         : put(base_ + c.source_offset, c.destination_offset, c.length, false);
    if (!s.ok()) return s;
    at = c.destination_offset + c.length;
  }
  return put(kZeros, at, memory_bytes - at, true);
}

bool HostDevice::Exclusive(DeviceRange range) const {
  if (!WholeGranules(range)) return false;
  absl::ReaderMutexLock lock(&shared_mu_);
  return NotSharedOtherwise(range);
}

bool HostDevice::WholeGranules(DeviceRange range) const {
  return range.length > 0 && range.offset % kGranule == 0 && range.length % kGranule == 0 &&
         InRange(range.offset, range.length, size_).ok();
}

bool HostDevice::NotSharedOtherwise(DeviceRange range) const {
  if (auto it = shared_.find(range.offset);
      it != shared_.end() && it->second.length == range.length) {
    return true;
  }
  return Plain(range.offset, range.length);
}

bool HostDevice::ByKernel(uint64_t offset, uint64_t length) const {
  return memory_ >= 0 && Plain(offset, length);
}

bool HostDevice::Plain(uint64_t offset, uint64_t length) const {
  auto it = shared_.upper_bound(offset);
  if (it != shared_.begin() && std::prev(it)->first + std::prev(it)->second.length > offset) {
    return false;
  }
  return it == shared_.end() || it->first >= offset + length;
}

absl::StatusOr<int> HostDevice::SharedMemory(uint64_t offset, uint64_t length) {
  if (auto it = shared_.find(offset); it != shared_.end()) return it->second.fd;
  const int fd = memfd_create("cudafs-shared", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return DescriptorError(errno, "memfd_create for a shared range");
  // The range's bytes go into the memfd, which then replaces the arena's
  // memory at the same address (the caller keeps writers of the range out).
  absl::Status status;
  if (ftruncate(fd, static_cast<off_t>(length)) != 0) {
    status = OutOfMemoryOr(errno, "a shared range");
  } else if (pwrite(fd, base_ + offset, length, 0) != static_cast<ssize_t>(length)) {
    status = OutOfMemoryOr(errno, "a shared range");
  } else if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    // Importers get this very file open for writing: sealed, none of them
    // can shrink it under the arena's view (the daemon's next access would
    // be SIGBUS) or grow it at the mount's expense. Punching holes stays
    // possible: the arena then reads zeros, as the importer wrote them.
    status = absl::ErrnoToStatus(errno, "sealing a shared range");
  } else if (mmap(base_ + offset, length, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) ==
             MAP_FAILED) {
    status = OutOfMemoryOr(errno, "mapping a shared range");
  }
  if (!status.ok()) {
    close(fd);
    return status;
  }
  // The arena's own copy is no longer mapped: its pages go. Should that
  // fail, they go when the range is decommitted.
  if (memory_ >= 0) {
    fallocate(memory_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
              static_cast<off_t>(length));
  }
  shared_[offset] = Shared{fd, length, length};
  return fd;
}

absl::StatusOr<std::unique_ptr<ExportedMemory>> HostDevice::ExportShared(
    uint64_t size, absl::Span<const DeviceRange> ranges) {
  // The descriptors first, the export once all are had: a failure (often
  // the daemon out of descriptors) has only them to close.
  std::vector<std::pair<int, uint64_t>> copies;
  absl::Cleanup close_copies = [&copies] {
    for (const auto& [fd, length] : copies) close(fd);
  };
  {
    absl::MutexLock lock(&shared_mu_);
    for (const DeviceRange& range : ranges) {
      if (!WholeGranules(range) || !NotSharedOtherwise(range)) {
        return absl::FailedPreconditionError("a shared range is not a block of its own");
      }
      absl::StatusOr<int> fd = SharedMemory(range.offset, range.length);
      if (!fd.ok()) return fd.status();
      const int copy = fcntl(*fd, F_DUPFD_CLOEXEC, 0);
      if (copy < 0) return DescriptorError(errno, "dup of a shared range");
      copies.emplace_back(copy, range.length);
    }
  }
  auto exported = std::make_unique<HostExport>(size);
  for (const auto& [fd, length] : copies) exported->Add(fd, length);
  std::move(close_copies).Cancel();
  return exported;
}

}  // namespace cudafs

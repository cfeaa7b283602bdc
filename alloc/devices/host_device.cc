#include "alloc/devices/host_device.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace cudafs {
namespace {

// A bad offset is a caller's bug, but it must come back as an error (as on the
// CUDA device), not as a memcpy or madvise on whatever the process has mapped
// next to the arena.
absl::Status InRange(uint64_t offset, uint64_t length, uint64_t arena_size) {
  if (offset > arena_size || length > arena_size - offset) {
    return absl::InternalError(
        absl::StrFormat("arena range [%d, +%d) is outside the arena", offset, length));
  }
  return absl::OkStatus();
}

// A memfd of whole pages.
class HostExport final : public ExportedMemory {
 public:
  HostExport(int fd, uint64_t size, uint64_t mapped) : size_(size), piece_{fd, mapped} {}
  ~HostExport() override { close(piece_.fd); }

  Kind kind() const override { return Kind::kHost; }
  uint64_t size() const override { return size_; }
  absl::Span<const ExportedPiece> pieces() const override { return {&piece_, 1}; }

 private:
  const uint64_t size_;
  const ExportedPiece piece_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<HostDevice>> HostDevice::Create(uint64_t arena_size) {
  const uint64_t size = (arena_size + kGranule - 1) / kGranule * kGranule;
  if (size == 0) return absl::InvalidArgumentError("arena size must be > 0");
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) {
    return absl::ErrnoToStatus(
        errno, absl::StrFormat("cannot reserve %d bytes of host memory", size));
  }
  return std::unique_ptr<HostDevice>(new HostDevice(static_cast<char*>(base), size));
}

HostDevice::~HostDevice() { munmap(base_, size_); }

std::string HostDevice::Describe() const { return "host memory"; }

absl::Status HostDevice::Commit(uint64_t offset, uint64_t length) {
  if (absl::Status s = InRange(offset, length, size_); !s.ok()) return s;
  // Fault the pages in now so that a shortage shows up as ENOSPC on the
  // write that needed them, not as the OOM killer later. Kernels before 5.14
  // lack MADV_POPULATE_WRITE (EINVAL); they fault on first touch instead.
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
  if (madvise(base_ + offset, length, MADV_DONTNEED) != 0) {
    return absl::ErrnoToStatus(errno, "madvise(MADV_DONTNEED)");
  }
  return absl::OkStatus();
}

absl::Status HostDevice::Write(absl::Span<const HostToDevice> copies) {
  for (const HostToDevice& c : copies) {
    if (absl::Status s = InRange(c.device_offset, c.length, size_); !s.ok()) return s;
  }
  for (const HostToDevice& c : copies) std::memcpy(base_ + c.device_offset, c.source, c.length);
  return absl::OkStatus();
}

absl::Status HostDevice::Read(absl::Span<const DeviceToHost> copies) {
  for (const DeviceToHost& c : copies) {
    if (absl::Status s = InRange(c.device_offset, c.length, size_); !s.ok()) return s;
  }
  for (const DeviceToHost& c : copies) std::memcpy(c.destination, base_ + c.device_offset, c.length);
  return absl::OkStatus();
}

absl::Status HostDevice::Copy(absl::Span<const DeviceToDevice> copies) {
  for (const DeviceToDevice& c : copies) {
    if (absl::Status s = InRange(c.destination_offset, c.length, size_); !s.ok()) return s;
    if (absl::Status s = InRange(c.source_offset, c.length, size_); !s.ok()) return s;
  }
  for (const DeviceToDevice& c : copies) {
    std::memmove(base_ + c.destination_offset, base_ + c.source_offset, c.length);
  }
  return absl::OkStatus();
}

absl::Status HostDevice::Zero(absl::Span<const DeviceRange> ranges) {
  for (const DeviceRange& r : ranges) {
    if (absl::Status s = InRange(r.offset, r.length, size_); !s.ok()) return s;
  }
  for (const DeviceRange& r : ranges) std::memset(base_ + r.offset, 0, r.length);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ExportedMemory>> HostDevice::ExportCopy(
    uint64_t size, absl::Span<const DeviceToDevice> copies) {
  for (const DeviceToDevice& c : copies) {
    if (absl::Status s = InRange(c.source_offset, c.length, size_); !s.ok()) return s;
    if (c.destination_offset > size || c.length > size - c.destination_offset) {
      return absl::InternalError("an export copy lies past the exported size");
    }
  }
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t mapped = std::max<uint64_t>(page, (size + page - 1) / page * page);
  const int fd = memfd_create("cudafs-export", MFD_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, "memfd_create");
  auto exported = std::make_unique<HostExport>(fd, size, mapped);
  // A fresh memfd reads as zeros: only the copies need writing.
  if (ftruncate(fd, static_cast<off_t>(mapped)) != 0) {
    return errno == ENOSPC || errno == ENOMEM
               ? absl::ResourceExhaustedError("out of host memory for an export")
               : absl::ErrnoToStatus(errno, "ftruncate of the export");
  }
  void* memory = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (memory == MAP_FAILED) return absl::ErrnoToStatus(errno, "mmap of the export");
  for (const DeviceToDevice& c : copies) {
    std::memcpy(static_cast<char*>(memory) + c.destination_offset, base_ + c.source_offset,
                c.length);
  }
  munmap(memory, mapped);
  return exported;
}

}  // namespace cudafs

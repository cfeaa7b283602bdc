#include "alloc/base/file_pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "absl/strings/str_format.h"
#include "alloc/base/errors.h"

namespace cudafs {

absl::Status CheckPagesAllocated(int fd, uint64_t offset, uint64_t length) {
  if (length == 0) return absl::OkStatus();
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t start = offset / page * page;
  const uint64_t span = (offset + length - start + page - 1) / page * page;
  void* view = mmap(nullptr, span, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(start));
  if (view == MAP_FAILED) {
    return PosixError(errno == EACCES ? EBADF : errno, "the memory cannot be mapped to check it");
  }
  std::vector<unsigned char> resident(span / page);
  const int checked = mincore(view, span, resident.data());
  const int error = errno;
  munmap(view, span);
  if (checked != 0) return PosixError(error, "mincore of the memory");
  for (size_t i = 0; i < resident.size(); ++i) {
    if ((resident[i] & 1) == 0) {
      return PosixError(EINVAL, absl::StrFormat("the memory's pages are not all allocated (none "
                                                "at byte %d): write them first",
                                                start + i * page));
    }
  }
  return absl::OkStatus();
}

}  // namespace cudafs

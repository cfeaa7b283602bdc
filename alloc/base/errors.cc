#include "alloc/base/errors.h"

#include <cerrno>
#include <optional>
#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace cudafs {
namespace {
constexpr absl::string_view kErrnoPayload = "cudafs/errno";
}  // namespace

absl::Status PosixError(int error_number, absl::string_view message) {
  absl::Status status = absl::ErrnoToStatus(error_number, message);
  status.SetPayload(kErrnoPayload, absl::Cord(std::to_string(error_number)));
  return status;
}

absl::Status DescriptorError(int error_number, absl::string_view what) {
  switch (error_number) {
    case EMFILE:
      return PosixError(EMFILE, absl::StrCat(what, ": the daemon is out of file descriptors "
                                                   "(its open-file limit, RLIMIT_NOFILE)"));
    case ENFILE:
      return PosixError(ENFILE, absl::StrCat(what, ": the system is out of file descriptors "
                                                   "(fs.file-max)"));
    default:
      return PosixError(error_number, what);
  }
}

int ToErrno(const absl::Status& status) {
  if (status.ok()) return 0;
  if (auto payload = status.GetPayload(kErrnoPayload)) {
    int error_number;
    if (absl::SimpleAtoi(std::string(*payload), &error_number)) return error_number;
  }
  switch (status.code()) {
    case absl::StatusCode::kResourceExhausted: return ENOSPC;
    case absl::StatusCode::kNotFound: return ENOENT;
    case absl::StatusCode::kAlreadyExists: return EEXIST;
    case absl::StatusCode::kPermissionDenied: return EACCES;
    case absl::StatusCode::kInvalidArgument: return EINVAL;
    case absl::StatusCode::kOutOfRange: return EFBIG;
    case absl::StatusCode::kUnimplemented: return EOPNOTSUPP;
    default: return EIO;
  }
}

}  // namespace cudafs

// Errors inside cudafs are absl::Status; at the FUSE boundary they become
// errno. PosixError keeps the exact errno in a payload so that the trip
// through Status loses nothing (ENOTEMPTY and EEXIST both map to one
// StatusCode otherwise).
#ifndef CUDAFS_ALLOC_BASE_ERRORS_H_
#define CUDAFS_ALLOC_BASE_ERRORS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace cudafs {

absl::Status PosixError(int error_number, absl::string_view message = "");

// A failure to make a descriptor (memfd_create, dup, open) while doing
// `what`. EMFILE and ENFILE keep their errno and say whose limit ran out:
// absl reads both as ResourceExhausted, which would reach the caller as
// ENOSPC, a full filesystem.
absl::Status DescriptorError(int error_number, absl::string_view what);

// The errno a status stands for: the PosixError payload when present, else
// the closest errno for its code (ResourceExhausted -> ENOSPC, anything
// unexpected -> EIO). 0 for OK.
int ToErrno(const absl::Status& status);

}  // namespace cudafs

#endif  // CUDAFS_ALLOC_BASE_ERRORS_H_

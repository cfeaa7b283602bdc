// How a map request's answer is laid out on the wire, from what the
// filesystem said: a private copy's plan (the memory the client is to
// bring), or a shared mapping's exported pieces (their descriptors, in
// batches). Each GPU is named once, by PCI bus id, in the reply's table.
#ifndef CUDAFS_FS_SHARE_SHARE_MAPPING_H_
#define CUDAFS_FS_SHARE_SHARE_MAPPING_H_

#include <memory>

#include "absl/status/statusor.h"
#include "alloc/devices/exported_memory.h"
#include "fs/core/filesystem.h"
#include "fs/share/share_outcome.h"

namespace cudafs {

// The reply asking for memory for a copy of file `ino` as `plan` says,
// then the pieces' lengths and GPUs (no descriptors); the outcome waits
// for kShareFill. EOPNOTSUPP for a plan of no pieces, more than one batch
// of them, or more GPUs than a reply names.
absl::StatusOr<ShareOutcome> CopyPlanOutcome(InodeNumber ino, const Filesystem::CopyPlan& plan);

// The reply handing out `exported`, then its pieces kShareBatch at a time
// with their descriptors (borrowed from `exported`, which the outcome
// holds until kShareImported). EOPNOTSUPP for more GPUs than a reply
// names.
absl::StatusOr<ShareOutcome> SharedMappingOutcome(std::unique_ptr<ExportedMemory> exported);

}  // namespace cudafs

#endif  // CUDAFS_FS_SHARE_SHARE_MAPPING_H_
